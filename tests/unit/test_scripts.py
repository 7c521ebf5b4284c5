"""scripts/up.sh, run on a copy of the project with fake docker, kind and pulumi that record
how they are called (the real ones are exercised by the opt-in e2e tests)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kindnode import images

ROOT = Path(__file__).resolve().parents[2]


def _fake(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(0o755)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    copy = tmp_path / "project"
    copy.mkdir()
    for name in ("components", "controller", "scripts", "stacks"):
        # stacks/local: this host's settings (kindnode build --for-stack), which a clone lacks.
        ignore = shutil.ignore_patterns("__pycache__", "local")
        shutil.copytree(ROOT / name, copy / name, ignore=ignore)
    for name in ("requirements.txt", "requirements-cloud.txt", "Pulumi.yaml", "__main__.py"):
        shutil.copy(ROOT / name, copy / name)
    # Pulumi's environment for the program: this test's interpreter (every pin, so nothing
    # to download), with `pip install` recorded instead of run.
    # `-m loopback build TOOL...` (a pinned tool built from its Go module) is recorded too,
    # and copies the fake of each TOOL from $FAKE_BUILT, when a test gives one.
    log = tmp_path / "calls.log"
    _fake(
        copy / ".venv" / "bin" / "python",
        f'if [ "$1 $2 $3" = "-m pip install" ]; then echo "venv $*" >> {log}; exit 0; fi\n'
        f'if [ "$1 $2 $3" = "-m loopback build" ]; then\n'
        f'  echo "build ${{*:4}} into $MKF_TOOLS_BIN" >> {log}\n'
        '  for t in "${@:4}"; do\n'
        '    cp "${FAKE_BUILT:-/nonexistent}/$t" "$MKF_TOOLS_BIN/" || exit 1\n'
        "  done\n"
        "  exit 0\nfi\n"
        # `-m kindnode build --for-stack S`: recorded, and this host's settings written as the
        # real build writes them (kindnode/__main__.py).
        f'if [ "$1 $2 $3" = "-m kindnode build" ]; then\n'
        f'  echo "kindnode build ${{*:4}} into $MKF_TOOLS_BIN" >> {log}\n'
        f'  exec {sys.executable} -c "import sys; '
        "from components.model.host_local import write_host_settings as w; "
        f"w(sys.argv[1], '{LOCAL_NODE}', {{'docker.io': 'http://mkf-registry:5000'}})\" "
        '"$5"\nfi\n'
        f'exec {sys.executable} "$@"\n',
    )
    return copy


LOCAL_NODE = "127.0.0.1:5001/kindest/node:v1.36.4@sha256:" + "ab" * 32


OUTPUTS = json.dumps(
    {
        "fleet": "dev",
        "clusters": [{"name": "manager", "role": "manager", "provider": "kind"}],
        "kubeconfigs": {"manager": "apiVersion: v1\nkind: Config\n"},
        "checks": [],
    }
)

FAKE_DOCKER_INFO = json.dumps(
    {
        "ServerVersion": "fake",
        "DefaultRuntime": "runc-without-sys-resource",
        "CgroupVersion": "2",
        "MemTotal": 0,
        "DockerRootDir": "/",
    }
)

# Records each call with the backend and passphrase it saw; answers what up/down read.
FAKE_PULUMI = r"""echo "pulumi $* | $PULUMI_BACKEND_URL | ${PULUMI_CONFIG_PASSPHRASE:-}" >> LOG
case "$1" in
  # Like pulumi-kubernetes: a provider's kubeconfig left in $TMPDIR (components/cli/engine_tmp.py).
  up|preview|destroy)
    echo "pulumi $1 TMPDIR=${TMPDIR:-}" >> LOG; mktemp -t kubeconfigXXXXXX >/dev/null ;;
esac
case "$1 $2" in
  "version "*) echo v3.274.1 ;;
  "up --yes")
    if [ -n "${FAKE_UP_FAILS_ONCE:-}" ] && [ ! -e "$FAKE_UP_FAILS_ONCE" ]; then
      touch "$FAKE_UP_FAILS_ONCE"; printf '%s\n' "$FAKE_UP_FAILS"; exit 255
    fi
    if [ -z "${FAKE_UP_FAILS_ONCE:-}" ] && [ -n "${FAKE_UP_FAILS:-}" ]; then
      printf '%s\n' "$FAKE_UP_FAILS"; exit 255
    fi ;;
  "stack output")
    if [ "$3" = checks ]; then echo '["kubectl --context kind-dev-manager get clusterqueues"]'
    else echo "$FAKE_OUTPUTS"
    fi ;;
esac
exit 0
"""


FAKE_KUBECTL = 'echo "kubectl $*" >> LOG\necho "Client Version: v1.36.4"\n'

FAKE_KIND = (
    'echo "kind $*" >> LOG\n[ "$1" = version ] && echo "kind v0.33.0 go1.26.8 linux/amd64"\n'
    "exit 0\n"
)


# A Docker that pulls nothing (no registry reachable) and has only what was built here.
DOCKER_WITHOUT_PULLS = r"""
if [ "$1 $2" = "image inspect" ]; then
  case "$3" in
    127.0.0.1:5001/*) exit 0 ;;
    localhost/multikueue-fleet/*) [ -z "${FAKE_NO_DEBIAN_BASE:-}" ] && exit 0 || exit 1 ;;
    *) exit 1 ;;
  esac
fi
if [ "$1" = pull ]; then
  echo 'Error response from daemon: Get "https://registry-1.docker.io/v2/": no such host' >&2
  exit 1
fi
"""


def run_up(
    project: Path,
    tmp_path: Path,
    *args: str,
    docker_ok: bool = True,
    pulls: bool = True,
    env: dict[str, str] | None = None,
    script: str = "up.sh",
    without: tuple[str, ...] = (),
    in_tools: tuple[str, ...] = ("kind", "pulumi", "kubectl"),
    tools_on_path: bool = True,
) -> subprocess.CompletedProcess[str]:
    bin_dir, tools, log = tmp_path / "bin", tmp_path / "tools", tmp_path / "calls.log"
    _fake(
        bin_dir / "docker",
        f'echo "docker $*" >> {log}\n'
        + ("" if pulls else DOCKER_WITHOUT_PULLS)
        + '[ "$1" = info ] || exit 0\n'
        f"[ {0 if docker_ok else 1} = 0 ] || exit 1\n"
        # What the kind pre-flight reads (components/checks/kind_host.py).
        f"echo '{FAKE_DOCKER_INFO}'\n",
    )
    for plugin in ("gke-gcloud-auth-plugin", "aws"):  # what cloud kubeconfigs run
        if plugin not in (without or ()):
            _fake(bin_dir / plugin, "exit 0\n")
    if "kind" in in_tools:
        _fake(tools / "kind", FAKE_KIND.replace("LOG", str(log)))
    if "pulumi" in in_tools:
        _fake(tools / "pulumi", FAKE_PULUMI.replace("LOG", str(log)))
    if "kubectl" in in_tools:
        _fake(tools / "kubectl", FAKE_KUBECTL.replace("LOG", str(log)))
    tools.mkdir(parents=True, exist_ok=True)
    # Only what the test sets: a passphrase in the caller's environment must not leak in.
    environment = {
        # The fakes first: up.sh uses a kind or Pulumi CLI of the pinned version on PATH.
        "PATH": f"{tools if tools_on_path else ''}:{bin_dir}:"
        f"{(env or {}).get('SYSTEM_PATH', os.environ['PATH'])}",
        "HOME": str(tmp_path),
        "MKF_TOOLS_DIR": str(tools),
        "FAKE_OUTPUTS": OUTPUTS,
        **(env or {}),
    }
    return subprocess.run(
        ["bash", str(project / "scripts" / script), *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        env=environment,
    )


def calls_of(tmp_path: Path) -> list[str]:
    log = tmp_path / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def test_dev_is_validated_rendered_and_brought_up(project: Path, tmp_path: Path) -> None:
    result = run_up(project, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    backend = f"file://{project}/.pulumi-state"
    calls = [c.split(" | ")[0] for c in calls_of(tmp_path)]
    assert (
        calls_of(tmp_path)[calls.index("pulumi stack select --create dev --non-interactive")]
        == f"pulumi stack select --create dev --non-interactive | {backend} | multikueue-fleet-dev"
    )
    assert calls.index("pulumi stack select --create dev --non-interactive") < calls.index(
        "pulumi up --yes --stack dev --non-interactive"
    )
    assert "docker info" in calls
    assert (project / ".render" / "dev" / "manager" / "objects.yaml").exists()
    assert "The fleet is up, in " in result.stdout
    assert '  eval "$(.venv/bin/mkf env dev)"' in result.stdout
    # What `status --dir .fleet` reads, written from the stack's outputs.
    summary = json.loads((project / ".fleet" / "summary.json").read_text())
    assert summary["clusters"][0]["kubeconfig"] == "kubeconfigs/manager.yaml"
    assert (project / ".fleet" / "kubeconfigs" / "manager.yaml").stat().st_mode & 0o777 == 0o600
    assert "  kubectl --context kind-dev-manager get clusterqueues" in result.stdout


def test_down_is_safe_when_there_is_nothing(project: Path, tmp_path: Path) -> None:
    # No network: curl is not even reachable, and no tool is installed or called.
    (tmp_path / "bin").mkdir()
    _fake(
        tmp_path / "bin" / "curl",
        'echo "curl $*" >> LOG\nexit 7\n'.replace("LOG", str(tmp_path / "calls.log")),
    )
    (tmp_path / "tools").mkdir()
    result = run_up(project, tmp_path, script="down.sh")
    assert result.returncode == 0, result.stderr
    assert "nothing to tear down" in result.stdout
    assert calls_of(tmp_path) == []


@pytest.mark.parametrize("state_file", ["dev.json", "dev.json.gz", "dev.json.zst"])
def test_down_destroys_and_forgets_the_stack(
    project: Path, tmp_path: Path, state_file: str
) -> None:
    """Plain, gzip and zstd state: the local backend writes each (pulumi v3.259.0
    pkg/backend/diy/store.go), and a missed one would leave the clusters running."""
    state = project / ".pulumi-state" / ".pulumi" / "stacks" / "multikueue-fleet" / state_file
    state.parent.mkdir(parents=True)
    state.write_text("{}")
    result = run_up(project, tmp_path, script="down.sh")
    assert result.returncode == 0, result.stderr
    calls = [c.split(" | ")[0] for c in calls_of(tmp_path)]
    assert "pulumi destroy --yes --stack dev --non-interactive" in calls
    assert "pulumi stack rm --yes --preserve-config --stack dev --non-interactive" in calls


def test_up_and_down_leave_no_kubeconfig_of_the_engine_in_tmp(
    project: Path, tmp_path: Path
) -> None:
    """The engine runs with a TMPDIR of its own under .pulumi-state/tmp, removed at the end;
    one a killed run left (its process gone) goes too, a live one's stays."""
    host_tmp, engine_tmp = tmp_path / "host-tmp", project / ".pulumi-state" / "tmp"
    host_tmp.mkdir()
    killed, live = engine_tmp / "engine-999999999-abc", engine_tmp / f"engine-{os.getpid()}-abc"
    for folder in (killed, live):
        folder.mkdir(parents=True)
    result = run_up(project, tmp_path, env={"TMPDIR": str(host_tmp)})
    assert result.returncode == 0, result.stdout + result.stderr
    state = project / ".pulumi-state" / ".pulumi" / "stacks" / "multikueue-fleet" / "dev.json"
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text("{}")  # what the real up leaves, for down to find
    result = run_up(project, tmp_path, script="down.sh", env={"TMPDIR": str(host_tmp)})
    assert result.returncode == 0, result.stdout + result.stderr
    used = [c.split("TMPDIR=")[1] for c in calls_of(tmp_path) if " TMPDIR=" in c]
    assert len(used) == 2 and len(set(used)) == 2, used  # up's and destroy's, each its own
    assert all(Path(folder).parent == engine_tmp for folder in used), used
    assert list(host_tmp.iterdir()) == []
    assert sorted(engine_tmp.iterdir()) == [live]
    assert engine_tmp.stat().st_mode & 0o777 == 0o700


def test_down_removes_only_the_kubeconfigs_up_wrote(project: Path, tmp_path: Path) -> None:
    """A file of the user's in .fleet/kubeconfigs (and another stack's fleet) stays."""
    state = project / ".pulumi-state" / ".pulumi" / "stacks" / "multikueue-fleet"
    state.mkdir(parents=True)
    (state / "dev.json").write_text("{}")
    fleet = project / ".fleet"
    (fleet / "kubeconfigs").mkdir(parents=True)
    for name in ("manager", "worker1", "mine"):
        (fleet / "kubeconfigs" / f"{name}.yaml").write_text(name)
    clusters = [{"name": n, "kubeconfig": f"kubeconfigs/{n}.yaml"} for n in ("manager", "worker1")]
    summary = json.dumps({"stack": "dev", "clusters": clusters})
    (fleet / "summary.json").write_text(summary.replace('"dev"', '"other"'))
    result = run_up(project, tmp_path, script="down.sh")
    assert result.returncode == 0, result.stderr
    assert len(list((fleet / "kubeconfigs").iterdir())) == 3  # another stack's fleet
    (fleet / "summary.json").write_text(summary)
    (state / "dev.json").write_text("{}")
    result = run_up(project, tmp_path, script="down.sh")
    assert result.returncode == 0, result.stderr
    assert "Removed from .fleet/ the kubeconfigs and summary of stack 'dev'" in result.stdout
    assert [p.name for p in (fleet / "kubeconfigs").iterdir()] == ["mine.yaml"]
    assert not (fleet / "summary.json").exists()


@pytest.mark.parametrize(("stack", "drains"), [("gke", False), ("eks", False), ("existing", True)])
def test_down_drains_only_when_a_cluster_outlives_the_fleet(
    project: Path, tmp_path: Path, stack: str, drains: bool
) -> None:
    """GKE and EKS clusters the stack created go whole, their objects with them: only a
    stack with `existing` clusters holds its queues and waits before destroy."""
    state = project / ".pulumi-state" / ".pulumi" / "stacks" / "multikueue-fleet"
    state.mkdir(parents=True)
    (state / f"{stack}.json").write_text("{}")
    passphrase = {"PULUMI_CONFIG_PASSPHRASE": "x"}
    result = run_up(project, tmp_path, stack, script="down.sh", env=passphrase)
    assert result.returncode == 0, result.stderr
    calls = [c.split(" | ")[0] for c in calls_of(tmp_path)]
    assert any(c.startswith("pulumi stack output") for c in calls) == drains, calls
    assert f"pulumi destroy --yes --stack {stack} --non-interactive" in calls


def test_docker_not_running_is_a_clear_stop(project: Path, tmp_path: Path) -> None:
    result = run_up(project, tmp_path, docker_ok=False)
    assert result.returncode == 1
    assert "Docker is installed but not running" in result.stderr
    assert not any(c.startswith(("kind", "pulumi")) for c in calls_of(tmp_path))


def test_invalid_stack_stops_before_docker_or_tools(project: Path, tmp_path: Path) -> None:
    stack = project / "stacks" / "Pulumi.dev.yaml"
    stack.write_text(stack.read_text().replace("name: worker2", "name: worker1"))
    result = run_up(project, tmp_path)
    assert result.returncode == 1
    assert "duplicate cluster name 'worker1'" in result.stderr
    # Only requirements.txt went into .venv (validate needs it); no tool was called.
    assert [c for c in calls_of(tmp_path) if not c.startswith("venv -m pip")] == []


def test_other_stacks_need_their_own_passphrase(project: Path, tmp_path: Path) -> None:
    result = run_up(project, tmp_path, "ci")
    assert result.returncode == 1
    assert "set PULUMI_CONFIG_PASSPHRASE" in result.stderr
    ok = run_up(project, tmp_path, "ci", env={"PULUMI_CONFIG_PASSPHRASE": "s3cret"})
    assert ok.returncode == 0, ok.stderr
    assert any(
        c.startswith("pulumi stack select --create ci") and c.endswith("s3cret")
        for c in calls_of(tmp_path)
    )


def test_dev_always_uses_the_passphrase_its_committed_salt_opens_with(
    project: Path, tmp_path: Path
) -> None:
    """A passphrase exported for other stacks would meet the dev stack's committed salt
    and Pulumi would stop with "incorrect passphrase"; the dev one is used, with a note."""
    secret_file = tmp_path / "phrase"
    secret_file.write_text("s3cret\n")
    result = run_up(
        project,
        tmp_path,
        env={
            "PULUMI_CONFIG_PASSPHRASE": "s3cret",
            "PULUMI_CONFIG_PASSPHRASE_FILE": str(secret_file),
        },
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "the dev stack uses its documented passphrase" in result.stdout
    # Every call on the stack (`pulumi version` comes before the backend is chosen).
    on_stack = [c for c in calls_of(tmp_path) if c.startswith("pulumi ") and "file://" in c]
    assert len(on_stack) >= 2, calls_of(tmp_path)
    assert all(c.endswith("| multikueue-fleet-dev") for c in on_stack), on_stack
    # Nothing to say when the environment already holds the dev passphrase.
    again = run_up(project, tmp_path, env={"PULUMI_CONFIG_PASSPHRASE": "multikueue-fleet-dev"})
    assert "documented passphrase" not in again.stdout


def test_unknown_stack_lists_the_stacks(project: Path, tmp_path: Path) -> None:
    result = run_up(project, tmp_path, "nope")
    assert result.returncode == 1
    assert "no stack file stacks/Pulumi.nope.yaml" in result.stderr
    assert "dev" in result.stderr and "tas" in result.stderr


def test_a_flow_style_cloud_stack_is_read_through_the_model(project: Path, tmp_path: Path) -> None:
    """`{name: w, provider: gke}` is a gke cluster, not kind: with an image given, nothing
    is built, so Docker is not asked for (it is not running here)."""
    stack = yaml.safe_load((project / "stacks" / "Pulumi.gke.yaml").read_text())
    stack["config"]["multikueue-fleet:dispatcher"] = {"image": "ghcr.io/example/dispatcher:v1"}
    flow = project / "stacks" / "Pulumi.flow.yaml"
    flow.write_text(yaml.safe_dump(stack, default_flow_style=True))
    assert not re.search(r"^\s*provider:", flow.read_text(), re.M)  # what grep looked for
    result = run_up(
        project, tmp_path, "flow", docker_ok=False, env={"PULUMI_CONFIG_PASSPHRASE": "s3cret"}
    )
    assert result.returncode == 0, result.stdout + result.stderr
    calls = [c.split(" | ")[0] for c in calls_of(tmp_path)]
    assert not any(c.startswith("docker") for c in calls)
    assert "pulumi up --yes --stack flow --non-interactive" in calls
    # A stack with GKE clusters gets the cloud SDKs in Pulumi's environment, before `up`.
    cloud = next(i for i, c in enumerate(calls) if "-r requirements-cloud.txt" in c)
    assert calls[cloud].startswith("venv -m pip install")
    assert cloud < calls.index("pulumi up --yes --stack flow --non-interactive")


def test_a_kind_stack_puts_no_cloud_sdk_in_pulumis_environment(
    project: Path, tmp_path: Path
) -> None:
    """Pulumi fetches the plugin of every Pulumi package in the program's environment
    (components/resources/program_env.py): for kind, requirements.txt alone goes there."""
    result = run_up(project, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    installs = [c for c in calls_of(tmp_path) if c.startswith("venv -m pip install")]
    requirements = [c for c in installs if not c.endswith("--no-deps -e .")]
    assert requirements and all(c.endswith("-r requirements.txt") for c in requirements), installs
    # ... and the project itself, for the `mkf` command, without a dependency of its own.
    assert [c for c in installs if c.endswith("--no-deps -e .")], installs
    # This test's environment has them all (it stands in for .venv): up.sh says so, once.
    assert result.stderr.count("note: .venv holds pulumi_aws, pulumi_eks, pulumi_gcp") == 1


def test_docker_is_checked_when_a_cloud_stack_builds_the_image(
    project: Path, tmp_path: Path
) -> None:
    result = run_up(
        project, tmp_path, "gke", docker_ok=False, env={"PULUMI_CONFIG_PASSPHRASE": "s3cret"}
    )
    assert result.returncode == 1
    assert "Docker is installed but not running" in result.stderr
    assert not any(c.startswith("pulumi") for c in calls_of(tmp_path))


def test_an_old_python_is_named_with_what_to_install(project: Path, tmp_path: Path) -> None:
    old = tmp_path / "old" / "python3"
    _fake(old, '[ "$1" = -V ] && echo "Python 3.10.12"\nexit 1\n')
    result = run_up(project, tmp_path, env={"PYTHON": str(old)})
    assert result.returncode == 1
    assert "Python 3.11 or newer is needed; " in result.stderr
    assert "Python 3.10.12" in result.stderr


def _venv_python(tmp_path: Path, made: Path) -> Path:
    """A python3 whose `-m venv DIR` makes DIR/bin/python a copy of `made`."""
    python = tmp_path / "py" / "python3"
    _fake(
        python,
        f'if [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin" && cp {made} "$3/bin/python"; '
        "exit 0; fi\n"
        f'exec {sys.executable} "$@"\n',
    )
    return python


def test_a_broken_venv_up_made_is_rebuilt(project: Path, tmp_path: Path) -> None:
    working = tmp_path / "working-python"
    shutil.copy(project / ".venv" / "bin" / "python", working)  # records pip, runs the rest
    shutil.rmtree(project / ".venv")
    _fake(project / ".venv" / "bin" / "python", "exit 1\n")  # a half-made environment
    (project / ".venv" / ".made-by-up.sh").touch()
    result = run_up(project, tmp_path, env={"PYTHON": str(_venv_python(tmp_path, working))})
    assert result.returncode == 0, result.stdout + result.stderr
    assert ".venv is incomplete or too old: rebuilding it" in result.stdout
    assert (project / ".venv" / "bin" / "python").read_text() == working.read_text()
    assert (project / ".venv" / ".made-by-up.sh").exists()  # so a later run may rebuild it


def test_a_users_own_broken_venv_is_kept(project: Path, tmp_path: Path) -> None:
    """A .venv without up.sh's mark is the user's (python -m venv .venv is a habit): one
    that cannot run the program is named with the fix, and left as it is."""
    shutil.rmtree(project / ".venv")
    _fake(project / ".venv" / "bin" / "python", "exit 1\n")  # e.g. made with Python 3.10
    (project / ".venv" / "mine.txt").write_text("mine")
    result = run_up(project, tmp_path, env={"PYTHON": str(_venv_python(tmp_path, Path("/x")))})
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: .venv is not an environment scripts/up.sh made")
    assert "mv .venv .venv.mine" in line
    assert sorted(p.name for p in (project / ".venv").iterdir()) == ["bin", "mine.txt"]
    assert calls_of(tmp_path) == []


@pytest.mark.parametrize("script", ["up.sh", "down.sh"])
def test_help_prints_the_usage_and_touches_nothing(
    project: Path, tmp_path: Path, script: str
) -> None:
    """`--help` once looked for a stack named `--help`."""
    for flag in ("--help", "-h"):
        result = run_up(project, tmp_path, flag, script=script)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"usage: scripts/{script} [STACK]")
    wrong = run_up(project, tmp_path, "--stak", "dev", script=script)
    assert wrong.returncode == 2
    assert f"error: unknown option --stak; usage: scripts/{script} [STACK]" in wrong.stderr
    assert calls_of(tmp_path) == []


def _system_path(tmp_path: Path, *leave_out: str) -> str:
    """A PATH of this machine's system folders without `leave_out` (and without Go, which
    lives elsewhere), whatever the machine has installed: every other command linked into
    one folder, and python3 this interpreter."""
    system = tmp_path / "system-bin"
    system.mkdir()
    for folder in ("/usr/local/bin", "/usr/bin", "/bin"):
        for command in Path(folder).iterdir() if Path(folder).is_dir() else ():
            target = system / command.name
            if command.name not in (*leave_out, "go") and not target.exists():
                target.symlink_to(command)
    (system / "python3").unlink(missing_ok=True)
    (system / "python3").symlink_to(sys.executable)
    return str(system)


@pytest.mark.parametrize(("stack", "plugin"), [("gke", "gke-gcloud-auth-plugin"), ("eks", "aws")])
def test_a_cloud_stack_without_its_credential_plugin_stops_before_pulumi(
    project: Path, tmp_path: Path, stack: str, plugin: str
) -> None:
    system = _system_path(tmp_path, plugin)
    result = run_up(
        project,
        tmp_path,
        stack,
        env={"PULUMI_CONFIG_PASSPHRASE": "s3cret", "SYSTEM_PATH": system},
        without=(plugin,),
    )
    assert result.returncode == 1, result.stdout + result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: this stack has") and plugin in last and "install" in last
    assert not any(c.startswith("pulumi") for c in calls_of(tmp_path))


def test_a_pinned_pulumi_on_path_is_used_over_an_older_one_in_the_tools_folder(
    project: Path, tmp_path: Path
) -> None:
    """A stale CLI left in .tools/bin (an older pin) must not shadow the pinned one the
    user has on PATH: every Pulumi call goes to the one on PATH."""
    mine = tmp_path / "mine"
    _fake(
        mine / "pulumi",
        FAKE_PULUMI.replace("LOG", str(tmp_path / "calls.log")).replace(
            'echo "pulumi $*', 'echo "mine $*'
        ),
    )
    _fake(tmp_path / "tools" / "pulumi", 'echo "stale $*" >> ' + str(tmp_path / "calls.log")
          + '\n[ "$1" = version ] && echo v3.200.0\nexit 0\n')  # fmt: skip
    result = run_up(
        project,
        tmp_path,
        in_tools=("kind", "kubectl"),  # no kubectl of the machine's is needed
        tools_on_path=False,
        env={"SYSTEM_PATH": f"{mine}:{os.environ['PATH']}"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Pulumi CLI v3.274.1: {mine / 'pulumi'}" in result.stdout
    # Linked into the tools folder as well: what `mkf env` puts on a fresh shell's PATH.
    assert (tmp_path / "tools" / "pulumi").resolve() == (mine / "pulumi").resolve()
    calls = calls_of(tmp_path)
    assert any(c.startswith("mine up --yes --stack dev") for c in calls), calls
    assert not [c for c in calls if c.startswith("stale") and not c.startswith("stale version")]


def _unreachable_releases(tmp_path: Path) -> None:
    _fake(tmp_path / "bin" / "curl",
          'echo "curl: (6) Could not resolve host: github.com" >&2\nexit 6\n')  # fmt: skip


def test_without_the_release_download_or_go_kind_is_one_line_with_the_fix(
    project: Path, tmp_path: Path
) -> None:
    _unreachable_releases(tmp_path)
    machine_tmp = tmp_path / "machine-tmp"
    machine_tmp.mkdir()
    result = run_up(project, tmp_path, in_tools=("pulumi",),
                    env={"SYSTEM_PATH": _system_path(tmp_path, "kind"),
                         "TMPDIR": str(machine_tmp)})  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert list(machine_tmp.iterdir()) == []  # the download folder went with the error
    line = result.stderr.strip().splitlines()[-1]
    assert [x for x in result.stderr.splitlines() if x.startswith("error:")] == [line]
    assert line.startswith("error: kind: the release download failed (curl: (6) Could not")
    assert "Go is not installed" in line and "install Go" in line and "on PATH" in line
    assert not any(c.startswith("pulumi up") for c in calls_of(tmp_path))


def test_without_the_release_download_kind_and_pulumi_are_built_from_their_modules(
    project: Path, tmp_path: Path
) -> None:
    """Behind a firewall with Go: `python -m loopback build` makes kind and the Pulumi CLI
    (with its language host and kubernetes provider) into the tools folder, and up goes on."""
    _unreachable_releases(tmp_path)
    _fake(tmp_path / "bin" / "go", "exit 0\n")
    built = tmp_path / "built"
    log = tmp_path / "calls.log"
    _fake(built / "kind", FAKE_KIND.replace("LOG", str(log)))
    _fake(built / "pulumi", FAKE_PULUMI.replace("LOG", str(log)))
    for plugin in ("pulumi-language-python", "pulumi-resource-kubernetes"):
        _fake(built / plugin, "exit 0\n")
    result = run_up(project, tmp_path, in_tools=(),
                    env={"SYSTEM_PATH": _system_path(tmp_path, "kind", "pulumi"),
                         "FAKE_BUILT": str(built)})  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    calls = calls_of(tmp_path)
    tools = tmp_path / "tools"
    assert f"build kind into {tools}" in calls
    assert f"build pulumi pulumi-language-python pulumi-resource-kubernetes into {tools}" in calls
    assert "building it from its Go module" in result.stdout
    assert any(c.startswith("pulumi up --yes --stack dev") for c in calls)


def test_without_kubectl_anywhere_the_pinned_one_is_built_from_its_module(
    project: Path, tmp_path: Path
) -> None:
    """No kubectl on PATH and no release download: the pinned kubectl is built into the
    tools folder (which `mkf env` puts on PATH), so the commands up.sh prints work."""
    _unreachable_releases(tmp_path)
    _fake(tmp_path / "bin" / "go", "exit 0\n")
    built = tmp_path / "built"
    _fake(built / "kubectl", FAKE_KUBECTL.replace("LOG", str(tmp_path / "calls.log")))
    result = run_up(project, tmp_path, in_tools=("kind", "pulumi"),
                    env={"SYSTEM_PATH": _system_path(tmp_path, "kubectl"),
                         "FAKE_BUILT": str(built)})  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "installing kubectl v1.36.4 into .tools/bin (none on PATH)" in result.stdout
    assert f"build kubectl into {tmp_path / 'tools'}" in calls_of(tmp_path)
    assert (tmp_path / "tools" / "kubectl").exists()


def test_a_kubectl_on_path_is_the_users_and_nothing_is_installed(
    project: Path, tmp_path: Path
) -> None:
    mine = tmp_path / "mine"
    _fake(mine / "kubectl", 'echo "Client Version: v1.35.2"\n')
    result = run_up(project, tmp_path, in_tools=("kind", "pulumi"),
                    env={"SYSTEM_PATH": f"{mine}:{_system_path(tmp_path, 'kubectl')}"})  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"kubectl: {mine / 'kubectl'}" in result.stdout
    assert not (tmp_path / "tools" / "kubectl").exists()
    assert not [c for c in calls_of(tmp_path) if c.startswith("build")]


def test_the_kubectl_pin_is_the_kubernetes_the_project_builds() -> None:
    pin = re.search(r'^KUBECTL_VERSION="(v[0-9.]+)"$', (ROOT / "scripts/env.sh").read_text(), re.M)
    go_mod = (ROOT / "tools" / "go.mod").read_text()
    assert pin and f"k8s.io/kubernetes {pin.group(1)} " in go_mod


def test_the_test_script_stops_at_once_without_zsh(project: Path, tmp_path: Path) -> None:
    """The completion tests run in zsh: without it, one line before anything is built."""
    result = subprocess.run(
        ["bash", str(project / "scripts" / "test.sh")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": _system_path(tmp_path, "zsh"), "HOME": str(tmp_path)},
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: zsh is not installed") and "apt-get install zsh" in line
    assert not (project / ".venv-dev").exists()


def test_a_providers_traceback_in_pulumi_up_is_one_line_and_up_fails(
    project: Path, tmp_path: Path
) -> None:
    failure = "\n".join([
        "    error: Exception calling application: Traceback (most recent call last):",
        '      File "/p/components/resources/kind.py", line 120, in create',
        "        run([kind, 'create', 'cluster'])",
        "    components.resources.commands.CommandFailed: kind create cluster failed: no space",
    ])  # fmt: skip
    result = run_up(project, tmp_path, env={"FAKE_UP_FAILS": failure})
    assert result.returncode != 0, result.stdout
    assert "    error: kind create cluster failed: no space" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    assert "The fleet is up" not in result.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["--tier", "nope"],
            "error: --tier nope: no such tier; choose unit, emulated, real or kind",
        ),
        (["--tier"], "error: --tier needs one of: unit emulated real kind"),
    ],
)
def test_the_test_script_names_a_wrong_tier_in_one_line(
    project: Path, tmp_path: Path, args: list[str], says: str
) -> None:
    result = subprocess.run(
        ["bash", str(project / "scripts" / "test.sh"), *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": _system_path(tmp_path), "HOME": str(tmp_path)},
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines() == [says] and result.stdout == ""
    assert not (project / ".venv-dev").exists()


def test_the_test_scripts_help_names_the_fast_command(project: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        ["bash", str(project / "scripts" / "test.sh"), "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "bash scripts/test.sh --fast" in result.stdout
    assert "--tier real" in result.stdout


def test_where_nothing_can_be_pulled_up_builds_the_kind_images_and_leaves_the_stack(
    project: Path, tmp_path: Path
) -> None:
    """A fresh machine without image pulls: the pre-flight finds the node image cannot be had,
    up.sh builds it and the fleet's images (kindnode build --for-stack) into the tools folder,
    the stack's kind clusters take them from stacks/local/dev.yaml, and up goes on."""
    _fake(tmp_path / "bin" / "go", "exit 0\n")
    stack = (project / "stacks" / "Pulumi.dev.yaml").read_text()
    result = run_up(project, tmp_path, pulls=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "note: Docker cannot pull the kind node image kindest/node:" in result.stderr
    assert "== Building kind's node image and the fleet's images here" in result.stdout
    assert re.search(r"built in \d+ s", result.stdout)
    calls = calls_of(tmp_path)
    assert f"kindnode build --for-stack dev into {tmp_path / 'tools'}" in calls
    # The pre-flight again, now on the built node image; then the stack is brought up.
    assert f"docker image inspect {LOCAL_NODE}" in calls
    assert any(c.startswith("pulumi up --yes --stack dev") for c in calls), calls
    assert (project / "stacks" / "Pulumi.dev.yaml").read_text() == stack
    assert (project / "stacks" / "local" / "dev.yaml").is_file()
    # Every step says what it took.
    assert len(re.findall(r"^   \(\d+ s\)$", result.stdout, re.M)) >= 8


def test_where_nothing_can_be_pulled_and_go_is_missing_the_fix_is_named(
    project: Path, tmp_path: Path
) -> None:
    result = run_up(project, tmp_path, pulls=False, env={"SYSTEM_PATH": _system_path(tmp_path)})
    assert result.returncode == 1, result.stdout + result.stderr
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("error:")]
    assert line.startswith("error: Docker cannot pull the kind node image kindest/node:")
    assert "python -m kindnode build --for-stack STACK" in line
    calls = calls_of(tmp_path)
    assert not any(c.startswith(("kindnode", "pulumi up")) for c in calls), calls
    assert not (project / "stacks" / "local").exists()


@pytest.mark.parametrize("has_base", [True, False])
def test_not_root_up_builds_only_from_a_debian_base_built_before(
    project: Path, tmp_path: Path, has_base: bool
) -> None:
    """debootstrap needs root: without it up.sh goes on only where an earlier build left the
    Debian base under the project's own name, and else names the sudo command."""
    _fake(tmp_path / "bin" / "go", "exit 0\n")
    _fake(tmp_path / "bin" / "id", "echo 1000\n")
    env = {} if has_base else {"FAKE_NO_DEBIAN_BASE": "1"}
    result = run_up(project, tmp_path, pulls=False, env=env)
    inspected = f"docker image inspect {images.DEBIAN}"
    assert inspected in calls_of(tmp_path)
    if has_base:
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"kindnode build --for-stack dev into {tmp_path / 'tools'}" in calls_of(tmp_path)
    else:
        assert result.returncode == 1, result.stdout + result.stderr
        (line,) = [x for x in result.stderr.splitlines() if x.startswith("error:")]
        assert "sudo .venv/bin/python -m kindnode build --for-stack dev" in line
        assert not any(c.startswith("kindnode") for c in calls_of(tmp_path))


UNREACHABLE = (
    "error: kubernetes:yaml/v2:ConfigFile resource 'worker2-frameworks-jobset' has a problem: "
    "configured Kubernetes cluster is unreachable: unable to load schema information from the "
    "API server: net/http: request canceled (Client.Timeout)"
)


def test_a_cluster_that_did_not_answer_in_time_gets_one_more_up(
    project: Path, tmp_path: Path
) -> None:
    once = {"FAKE_UP_FAILS": UNREACHABLE, "FAKE_UP_FAILS_ONCE": str(tmp_path / "failed")}
    result = run_up(project, tmp_path, env=once)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "running pulumi up once more" in result.stdout
    ups = [c for c in calls_of(tmp_path) if c.startswith("pulumi up --yes")]
    assert len(ups) == 2, ups
    assert "The fleet is up, in " in result.stdout


def test_a_cluster_that_never_answers_fails_after_the_second_up(
    project: Path, tmp_path: Path
) -> None:
    result = run_up(project, tmp_path, env={"FAKE_UP_FAILS": UNREACHABLE})
    assert result.returncode != 0
    ups = [c for c in calls_of(tmp_path) if c.startswith("pulumi up --yes")]
    assert len(ups) == 2, ups
    assert "The fleet is up" not in result.stdout


def test_each_tier_runs_in_a_temporary_folder_of_its_own_removed_after(
    project: Path, tmp_path: Path
) -> None:
    """A test process that ends without its atexit hooks (an xdist worker) leaves what the
    kubernetes clients' kubeconfig loaders wrote to $TMPDIR: the tier's own folder takes it,
    and goes when the tier ends, so the machine's /tmp is as it was."""
    for name in ("requirements-dev.txt", "pyproject.toml"):
        shutil.copy(ROOT / name, project / name)
    env_dir = project / ".venv-dev"
    log = tmp_path / "tiers.log"
    _fake(
        env_dir / "bin" / "python",
        'case "$1 $2" in\n'
        '  "-m pytest") echo "$3 $TMPDIR" >> ' + str(log) + "\n"
        '    echo "-----BEGIN CERTIFICATE-----" > "$(mktemp)"; exit 0 ;;\n'
        "esac\nexit 0\n",
    )
    _fake(env_dir / "bin" / "ruff", "exit 0\n")
    (env_dir / ".made-by-test.sh").touch()
    (env_dir / ".pins").write_text(
        "".join(
            (project / n).read_text()
            for n in ("requirements-cloud.txt", "requirements-dev.txt", "requirements.txt")
        )
        + (project / "pyproject.toml").read_text()
    )
    machine_tmp = tmp_path / "machine-tmp"
    machine_tmp.mkdir()

    def fast(*pytest_args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(project / "scripts" / "test.sh"), "--fast", *pytest_args],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "TMPDIR": str(machine_tmp)},
        )

    result = fast()
    assert result.returncode == 0, result.stdout + result.stderr
    ((tier, used),) = [line.split() for line in log.read_text().splitlines()]
    assert tier == "tests/unit"
    assert Path(used).parent == machine_tmp and Path(used).name.startswith("mkf-test-unit.")
    assert list(machine_tmp.iterdir()) == []
    # A tier that fails keeps its folder for a look, and says where.
    failing = (env_dir / "bin" / "python").read_text().replace("exit 0 ;;", "exit 1 ;;")
    (env_dir / "bin" / "python").write_text(failing)
    result = fast()
    assert result.returncode == 1, result.stdout + result.stderr
    (kept,) = machine_tmp.iterdir()
    assert (
        f"tier unit failed: its temporary files (its tests' folders and logs) are kept in {kept}"
        in result.stdout
    )
    assert [p.name for p in kept.iterdir()] and kept.name.startswith("mkf-test-unit.")
    # No test collected (pytest's 5) because -k chose none passes, and keeps nothing.
    shutil.rmtree(kept)
    (env_dir / "bin" / "python").write_text(failing.replace("exit 1 ;;", "exit 5 ;;"))
    result = fast("-k", "no_such_test")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "failed" not in result.stdout and list(machine_tmp.iterdir()) == []
    result = fast()
    assert result.returncode != 0 and "tier unit failed" in result.stdout
    # A tier pytest ends interrupted (2: SIGTERM or Ctrl-C to it) ends the run there.
    shutil.rmtree(next(machine_tmp.iterdir()))
    log.unlink()
    (env_dir / "bin" / "python").write_text(failing.replace("exit 1 ;;", "exit 2 ;;"))
    no_go = _system_path(tmp_path)  # the later tiers' builds skip, saying so
    result = subprocess.run(
        ["bash", str(project / "scripts" / "test.sh")],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "TMPDIR": str(machine_tmp), "PATH": no_go, "CI": ""},
    )
    assert result.returncode != 0, result.stdout + result.stderr
    assert [line.split()[0] for line in log.read_text().splitlines()] == ["tests/unit"]
    assert "tier unit was interrupted" in result.stdout


def test_down_deletes_a_kind_cluster_whose_create_up_cut_short(
    project: Path, tmp_path: Path
) -> None:
    """Ctrl-C during up.sh kills kind's create with it; destroy skips the pending create.
    The mark the provider left (components/resources/kind_creates.py) is what down.sh reads
    after destroy: that cluster is deleted, with the stack's kubeconfig, and no other."""
    state = project / ".pulumi-state" / ".pulumi" / "stacks" / "multikueue-fleet" / "dev.json"
    state.parent.mkdir(parents=True)
    state.write_text("{}")
    log = tmp_path / "calls.log"
    kind = tmp_path / "cut-kind"
    gone = tmp_path / "deleted"  # the fake lists dev-worker1 until it is deleted
    listed = f"{{ [ -e {gone} ] || echo dev-worker1; echo someone-else; }}"
    _fake(
        kind,
        f'echo "cut-kind $*" >> {log}\n[ "$1 $2" = "get clusters" ] && {listed}\n'
        f'[ "$1 $2" = "delete cluster" ] && touch {gone}\nexit 0\n',
    )
    folder = project / ".pulumi-state" / "kind" / "dev"
    folder.mkdir(parents=True)
    kubeconfig = folder / "dev-worker1.kubeconfig"
    (folder / "dev-worker1.creating").write_text(
        json.dumps({"kind": str(kind), "name": "dev-worker1", "kubeconfig": str(kubeconfig)})
    )
    result = run_up(project, tmp_path, script="down.sh")
    assert result.returncode == 0, result.stdout + result.stderr
    calls = [c.split(" | ")[0] for c in calls_of(tmp_path)]
    destroy = calls.index("pulumi destroy --yes --stack dev --non-interactive")
    delete = calls.index(f"cut-kind delete cluster --name dev-worker1 --kubeconfig {kubeconfig}")
    assert destroy < delete
    assert [c for c in calls if c.startswith("cut-kind delete")] == [calls[delete]]
    assert "kind cluster dev-worker1: its create was cut short; deleted" in result.stdout
    assert list(folder.iterdir()) == []
