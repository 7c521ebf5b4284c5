"""The CI driver with Pulumi's Automation API faked (no CLI here): the calls it makes, the
stack it names, the config it copies, that `run` always tears down, and exit codes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.cli import automation as driver_module
from components.cli.automation import (
    Driver,
    DriverError,
    Options,
    kind_only_config,
    require_tools,
    stack_name,
)
from components.cli.status import Check, FleetStatus
from components.model import host_local, stack_yaml
from components.resources.commands import CommandFailed
from components.resources.kind_creates import stack_folder

ROOT = Path(__file__).resolve().parents[2]


class FakeOutput:
    def __init__(self, value: Any) -> None:
        self.value = value


class FakeStack:
    def __init__(self, auto: FakeAutomation, name: str) -> None:
        self.auto, self.name = auto, name
        self.workspace = self
        self.config: dict[str, Any] = {}

    def up(self, config_file: str, on_output: Any = None, show_secrets: bool = True) -> None:
        assert not show_secrets  # see the real-API test below
        self.auto.calls.append(("up", self.name))
        self.config = yaml.safe_load(Path(config_file).read_text())["config"]
        if self.auto.fail_up:
            raise RuntimeError("pulumi up failed: kind create cluster: exit status 1")

    def outputs(self) -> dict[str, FakeOutput]:
        kubeconfig = yaml.safe_dump({"apiVersion": "v1", "kind": "Config"})
        return {
            "fleet": FakeOutput(self.name),
            "clusters": FakeOutput(
                [{"name": "manager", "role": "manager"}, {"name": "worker1", "role": "worker"}]
            ),
            "kubeconfigs": FakeOutput({"manager": kubeconfig, "worker1": kubeconfig}),
            "checks": FakeOutput(["kubectl ..."]),
        }

    def destroy(
        self, on_output: Any = None, config_file: str | None = None, show_secrets: bool = True
    ) -> None:
        assert not show_secrets
        self.auto.calls.append(("destroy", self.name))

    def remove_stack(self, name: str, preserve_config: bool = False) -> None:
        self.auto.calls.append(("remove_stack", name))
        self.auto.existing.discard(name)

    def preview(self, diff: bool = False, on_output: Any = None, **_: Any) -> Any:
        self.auto.calls.append(("preview", self.name))
        return type("Result", (), {"stdout": "no changes"})()

    def cancel(self) -> None:
        self.auto.calls.append(("cancel", self.name))


class FakeAutomation:
    class StackNotFoundError(Exception):
        pass

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.existing: set[str] = set()
        self.fail_up = False
        self.env: dict[str, str] = {}

    def LocalWorkspaceOptions(self, work_dir: str, env_vars: dict[str, str]) -> Any:
        self.env = env_vars
        return env_vars

    def ConfigValue(self, value: str, secret: bool = False) -> Any:
        return FakeOutput(value)

    def create_or_select_stack(self, stack_name: str, work_dir: str, opts: Any) -> FakeStack:
        self.calls.append(("create_or_select_stack", stack_name))
        self.existing.add(stack_name)  # like the real one: the stack exists from here on
        return FakeStack(self, stack_name)

    def select_stack(self, stack_name: str, work_dir: str, opts: Any) -> FakeStack:
        self.calls.append(("select_stack", stack_name))
        if stack_name not in self.existing:
            raise self.StackNotFoundError(stack_name)
        return FakeStack(self, stack_name)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    auto = FakeAutomation()
    ready = FleetStatus([Check("manager", "ClusterQueue", "cq", True, "Ready")])

    async def wait(self: Driver, summary: dict[str, Any]) -> FleetStatus:
        auto.calls.append(("wait_ready", summary["stack"]))
        return auto.status if hasattr(auto, "status") else ready

    monkeypatch.setattr(Driver, "_wait_ready", wait)
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "ci-secret")
    monkeypatch.delenv("GITHUB_RUN_ID", raising=False)

    def make(name: str | None = "ci-test", **kw: Any) -> Driver:
        options = Options(
            base="ci", name=name, out=tmp_path / "out", backend=tmp_path / "state", **kw
        )
        return Driver(
            options,
            automation=auto,
            log=lambda _: None,
            tools=lambda *_: None,
            host_check=lambda _: [],
        )

    auto.make = make
    return auto


def test_up_copies_the_base_stack_and_names_the_fleet_after_the_stack(
    fake: Any, tmp_path: Path
) -> None:
    summary = fake.make().up()
    assert [c[0] for c in fake.calls] == ["create_or_select_stack", "up", "wait_ready"]
    assert fake.env["PULUMI_BACKEND_URL"] == f"file://{tmp_path / 'state'}"
    assert fake.env["PULUMI_CONFIG_PASSPHRASE"] == "ci-secret"
    out = tmp_path / "out"
    written = json.loads((out / "summary.json").read_text())
    assert written["stack"] == "ci-test" and written["ready"] is True
    assert summary["clusters"][0]["kubeconfig"] == "kubeconfigs/manager.yaml"
    assert (out / "kubeconfigs" / "worker1.yaml").stat().st_mode & 0o777 == 0o600


def _recorded_stacks(fake: Any) -> list[FakeStack]:
    """Every stack the driver creates or selects from here on, in order."""
    stacks: list[FakeStack] = []
    original = fake.create_or_select_stack

    def record(**kw: Any) -> FakeStack:
        stacks.append(original(**kw))
        return stacks[-1]

    fake.create_or_select_stack = record
    return stacks


def test_copied_config(fake: Any) -> None:
    driver = fake.make()
    stacks = _recorded_stacks(fake)
    driver.up()
    config = stacks[0].config
    assert config["multikueue-fleet:fleetName"] == "ci-test"
    # Native YAML in the config file: Pulumi hands object values to the program as JSON.
    assert config["multikueue-fleet:workers"][0]["name"] == "worker1"


def test_a_fleet_made_from_a_base_uses_this_hosts_settings_for_the_base(
    fake: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`kindnode build --for-stack ci` writes stacks/local/ci.yaml; `mkf up --base ci` makes
    a stack of another name, whose program would read stacks/local/<name>.yaml (none) and
    pull the published node image. The settings go into the new stack's config instead,
    and what the fleet's checks read is what it gets."""
    monkeypatch.delenv(host_local.SWITCH, raising=False)
    monkeypatch.setattr(host_local, "project_root", lambda: tmp_path)
    image = "127.0.0.1:5001/kindest/node:v1.36.4@sha256:" + "a" * 64
    host_local.write_host_settings(
        "ci", image, {"registry.k8s.io": "http://mkf-registry:5000"}, root=tmp_path
    )
    lines: list[str] = []
    driver = fake.make()
    driver.log = lines.append
    stacks = _recorded_stacks(fake)
    driver.up()
    config = stacks[0].config
    clusters = [config["multikueue-fleet:manager"], *config["multikueue-fleet:workers"]]
    assert [c["kind"]["nodeImage"] for c in clusters] == [image] * len(clusters)
    mirrors = {"registry.k8s.io": "http://mkf-registry:5000"}
    assert all(c["kind"]["registryMirrors"] == mirrors for c in clusters)
    assert any("this host's, from" in line and "ci.yaml" in line for line in lines), lines
    # Without the host's file the config is the base stack's own.
    (tmp_path / "stacks" / "local" / "ci.yaml").unlink()
    stacks.clear()
    fake.make(name="ci-other").up()
    manager = stacks[0].config["multikueue-fleet:manager"]
    assert "nodeImage" not in (manager.get("kind") or {})


def test_run_returns_the_command_exit_code_and_always_tears_down(fake: Any) -> None:
    code = fake.make().run(
        [
            sys.executable,
            "-c",
            "import os, sys; "
            "sys.exit(0 if os.environ['KUBECONFIG'].endswith('manager.yaml') "
            "else 9)",
        ]
    )
    assert code == 0
    assert [c[0] for c in fake.calls][-3:] == ["select_stack", "destroy", "remove_stack"]
    failing = fake.make(name="ci-fails").run([sys.executable, "-c", "raise SystemExit(7)"])
    assert failing == 7
    assert ("destroy", "ci-fails") in fake.calls


def test_run_tears_down_when_up_fails(fake: Any) -> None:
    fake.fail_up = True
    with pytest.raises(DriverError, match=r"pulumi up of ci-broken failed: .*kind create cluster"):
        fake.make(name="ci-broken").run(["true"])
    # up never finished, yet the stack may hold clusters: down ran all the same.
    assert ("destroy", "ci-broken") in fake.calls
    assert ("remove_stack", "ci-broken") in fake.calls


def test_run_tears_down_when_the_fleet_never_gets_ready(fake: Any) -> None:
    fake.status = FleetStatus([Check("worker1", "ClusterQueue", "cq", False, "Inactive")])
    with pytest.raises(DriverError, match="up but not ready"):
        fake.make(name="ci-unready").run(["true"])
    assert ("destroy", "ci-unready") in fake.calls
    assert ("remove_stack", "ci-unready") in fake.calls


def test_down_drains_lasting_clusters_first_and_stops_past_the_bound(
    fake: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from components.cli import teardown

    original = FakeStack.outputs

    def lasting(self: FakeStack) -> dict[str, FakeOutput]:
        outputs = original(self)
        outputs["clusters"].value[1]["provider"] = "existing"
        return outputs

    drained: list[list[str]] = []

    async def drain(
        kubeconfigs: dict[str, Any], fleet: str, bound: float, wait_on: set[str], **_: Any
    ) -> None:
        drained.append([*sorted(kubeconfigs), "waits on", *sorted(wait_on)])
        if fake.stuck:
            raise teardown.DrainTimeout("workloads still hold quota: team/job-a")

    monkeypatch.setattr(FakeStack, "outputs", lasting)
    monkeypatch.setattr(teardown, "stop_and_drain", drain)
    driver = fake.make(name="ci-drain")
    driver.up()
    fake.stuck = True
    with pytest.raises(DriverError, match=r"teardown stopped before destroy: .*team/job-a"):
        driver.down("ci-drain")
    assert ("destroy", "ci-drain") not in fake.calls
    fake.stuck = False
    driver.down("ci-drain")
    # The kind manager is held too (it would go on placing copies on the lasting worker)
    # but not waited on: its work goes with it.
    assert drained == [["manager", "worker1", "waits on", "worker1"]] * 2
    assert ("destroy", "ci-drain") in fake.calls


def test_the_drain_bound_is_user_settable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MKF_DRAIN_TIMEOUT", "42")
    assert Options().drain_timeout == 42
    monkeypatch.setenv("MKF_DRAIN_TIMEOUT", "soon")
    with pytest.raises(DriverError, match="MKF_DRAIN_TIMEOUT='soon' is not a number"):
        Options()


def test_down_is_safe_twice(fake: Any) -> None:
    driver = fake.make(name="ci-twice")
    driver.up()
    driver.down("ci-twice")
    driver.down("ci-twice")
    assert fake.calls.count(("destroy", "ci-twice")) == 1


def test_a_kind_fleet_skips_checkpoints_in_up_and_in_a_later_down(fake: Any) -> None:
    fake.make(name="ci-kind").up()
    assert fake.env["PULUMI_SKIP_CHECKPOINTS"] == "true"
    fake.env = {}
    # `mkf down` in another process reads no base stack: the config `up` wrote says kind.
    fake.make(name="ci-kind").down("ci-kind")
    assert fake.env["PULUMI_SKIP_CHECKPOINTS"] == "true"


@pytest.mark.parametrize(
    ("text", "kind_only"),
    [
        ("config:\n  multikueue-fleet:manager: {provider: kind}\n", True),
        (
            "config:\n  multikueue-fleet:manager: {}\n  multikueue-fleet:workers: [{name: w}]\n",
            True,
        ),
        ("config:\n  multikueue-fleet:workers: [{name: w, provider: gke}]\n", False),
        ("config:\n  multikueue-fleet:manager: {provider: existing}\n", False),
        ("config: [unreadable\n", False),
        (None, False),
    ],
)
def test_only_a_fleet_of_kind_clusters_skips_checkpoints(
    tmp_path: Path, text: str | None, kind_only: bool
) -> None:
    path = tmp_path / "Pulumi.x.yaml"
    if text is not None:
        path.write_text(text)
    assert kind_only_config(path) is kind_only


def test_a_passphrase_is_required(fake: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE")
    with pytest.raises(DriverError, match="set PULUMI_CONFIG_PASSPHRASE or"):
        fake.make().up()
    assert not any(c[0] == "up" for c in fake.calls)


def test_unique_names() -> None:
    assert stack_name("ci", "123456789-2") == "ci-123456789-2"
    assert len(stack_name("a-long-base-name", "deadbeef" * 3)) <= 24


def test_missing_tools_are_named() -> None:
    with pytest.raises(DriverError) as info:
        require_tools(True, which=lambda _: None)
    assert "the Pulumi CLI" in str(info.value) and "kind" in str(info.value)
    with pytest.raises(DriverError, match="a running Docker engine"):
        require_tools(True, which=lambda n: f"/usr/bin/{n}", docker_running=lambda: False)
    require_tools(False, which=lambda n: "/x" if n == "pulumi" else None)
    # A cloud stack that builds the dispatcher image needs Docker, not kind.
    with pytest.raises(DriverError) as info:
        require_tools(False, True, which=lambda n: "/x" if n == "pulumi" else None)
    assert str(info.value) == "cannot create the fleet: missing docker"
    with pytest.raises(DriverError, match="a running Docker engine"):
        require_tools(False, True, which=lambda n: f"/usr/bin/{n}", docker_running=lambda: False)
    require_tools(False, True, which=lambda n: f"/usr/bin/{n}", docker_running=lambda: True)


@pytest.mark.parametrize(
    ("provider", "command"), [("gke", "gke-gcloud-auth-plugin"), ("eks", "aws")]
)
def test_a_cloud_stack_needs_its_credential_plugin_before_anything_is_created(
    provider: str, command: str
) -> None:
    """Its kubeconfigs run it: without it, `up` created the clusters and then failed at the
    first Kubernetes call."""
    with pytest.raises(DriverError) as info:
        require_tools(False, False, {provider}, which=lambda n: None if n == command else "/x")
    (line,) = str(info.value).splitlines()
    assert f"missing {command}, which {provider} kubeconfigs run: install" in line
    require_tools(False, False, {provider}, which=lambda n: f"/usr/bin/{n}")
    require_tools(
        True, False, {"kind"}, which=lambda n: f"/usr/bin/{n}", docker_running=lambda: True
    )


def test_the_driver_asks_for_docker_when_the_stack_builds_the_image(
    fake: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(driver_module, "missing_cloud_sdks", lambda *_: [])
    seen: list[tuple[bool, ...]] = []
    options = Options(base="gke", name="gke-t", out=tmp_path / "out", backend=tmp_path / "s")
    Driver(
        options,
        automation=fake,
        log=lambda _: None,
        tools=lambda *a: seen.append(a),
        host_check=lambda _: [],
    ).up()
    # gke: no kind; the image is built from controller/; GKE's credential plugin.
    assert seen == [(False, True, {"gke"})]


def test_an_existing_context_this_machines_kubeconfig_lacks_stops_up_first(
    fake: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`validate` leaves the default kubeconfig alone (it is the reviewing machine's, not
    the deploying one's); `mkf up` checks it before it creates a stack."""
    kubeconfig = "contexts:\n- {name: other, context: {cluster: c, user: u}}\n"
    line = _existing_up_refused(fake, tmp_path, monkeypatch, kubeconfig)
    assert line.startswith("manager.existing.context: the kubeconfig ")
    assert "has no context 'lab-manager' (it has: other)" in line and "fix: " in line


def _existing_up_refused(
    fake: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kubeconfig: str
) -> str:
    """`mkf up --base existing` with `kubeconfig` as this machine's: the one line it is
    refused with, once it is seen to have created nothing."""
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig)
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.setattr(driver_module, "missing_cloud_sdks", lambda *_: [])
    options = Options(base="existing", name="ex-t", out=tmp_path / "out", backend=tmp_path / "s")
    driver = Driver(
        options, automation=fake, log=lambda _: None, tools=lambda *_: None, host_check=lambda _: []
    )
    with pytest.raises(DriverError) as info:
        driver.up()
    assert driver.stack_touched is False  # nothing was created
    (line,) = str(info.value).splitlines()
    return line


def test_a_kubeconfig_client_go_would_refuse_stops_up_before_anything_is_created(
    fake: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every context the stack names is there, but a worker's cluster names a CA file that
    is not: client-go would refuse to load it (tools/clientcmd/validation.go at v0.36.4), so
    `mkf up` stops on that line before it creates a stack."""
    contexts = ["lab-manager", "lab-a", "lab-b"]
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": n, "cluster": {"server": f"https://{n}.example.com:6443", **(
                {"certificate-authority": str(tmp_path / "gone-ca.crt")} if n == "lab-a" else {}
            )}}
            for n in contexts
        ],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": n, "context": {"cluster": n, "user": "u"}} for n in contexts],
    }  # fmt: skip
    line = _existing_up_refused(fake, tmp_path, monkeypatch, yaml.safe_dump(kubeconfig))
    assert line.startswith("workers[0].existing: ") and "gone-ca.crt" in line, line
    assert "fix: " in line


def test_cli_exit_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    from components.cli.main import main

    def refuse(*_: Any, **__: Any) -> None:
        raise DriverError("missing the Pulumi CLI")

    monkeypatch.setattr(driver_module.Driver, "up", refuse)
    monkeypatch.setattr(driver_module.Driver, "__init__", lambda self, *a, **k: None)
    assert main(["up"]) == 1
    assert main(["down"]) == 2  # needs --name
    assert main(["run"]) == 2  # needs a command


# --- the real Automation API against a fake Pulumi CLI on PATH ------------------------------

FAKE_CLI = r"""
import signal, time

got = []
# First thing, so an interrupt is never lost to the interpreter's start.
signal.signal(signal.SIGINT, lambda *_: got.append(time.monotonic()))
import json, os, sys
from pathlib import Path

state = Path(os.environ["FAKE_STATE"])
args = [a for a in sys.argv[1:] if a != "--non-interactive"]


def say(line):
    with (state / "calls.log").open("a") as f:
        f.write(line + "\n")


say(" ".join(args))
stack = args[args.index("--stack") + 1] if "--stack" in args else None
if args[:1] in (["up"], ["preview"], ["destroy"]):
    # Like pulumi-kubernetes: a provider's kubeconfig left in $TMPDIR (engine_tmp.py).
    import tempfile
    tempfile.mkstemp(prefix="kubeconfig")
    say(f"{args[0]} TMPDIR={tempfile.gettempdir()}")
if args[:1] == ["version"]:
    print("v3.274.1")
elif args[:2] == ["stack", "select"]:
    if not (state / f"stack-{stack}").exists():
        sys.exit(print(f"error: no stack named '{stack}' found", file=sys.stderr) or 255)
elif args[:2] == ["stack", "init"]:
    # Like the real CLI with a passphrase: the salt lands in the project's stack file.
    (state / f"stack-{args[2]}").touch()
    Path("stacks").mkdir(exist_ok=True)
    Path(f"stacks/Pulumi.{args[2]}.yaml").write_text("encryptionsalt: v1:c2FsdA==\n")
elif args[:2] == ["stack", "rm"]:
    (state / f"stack-{args[-1]}").unlink()
elif args[:1] == ["up"]:
    config = Path(args[args.index("--config-file") + 1]).read_text()
    say("up config: " + ("salt" if "encryptionsalt" in config else "no salt"))
    say("up passphrase: " + os.environ.get("PULUMI_CONFIG_PASSPHRASE_FILE", "-"))
    mode = os.environ.get("FAKE_UP", "ok")
    if mode != "ok":
        # Busy "creating resources"; a graceful cancel takes a while after the interrupt;
        # a deaf one never cancels.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if got and mode != "deaf":
                say("up: SIGINT")
                time.sleep(1.0)
                say("up: cancelled")
                sys.exit(255)
            time.sleep(0.05)
        sys.exit(1)
elif args[:2] == ["stack", "output"]:
    kubeconfig = "apiVersion: v1\nkind: Config\n"
    print(json.dumps({
        "fleet": stack,
        "clusters": [{"name": "manager", "role": "manager"}],
        "kubeconfigs": {"manager": kubeconfig},
        "checks": [],
    }))
elif args[:2] == ["stack", "history"]:
    if "--show-secrets" in args and "--config-file" not in args:
        # Like the real CLI: no salt in the default stack file, so it makes one there.
        Path(f"stacks/Pulumi.{stack}.yaml").write_text("encryptionsalt: v1:bmV3\n")
    print(json.dumps([{
        "kind": "update", "startTime": "2026-01-01T00:00:00.000Z", "message": "",
        "environment": {}, "config": {}, "result": "succeeded",
    }]))
"""


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A fake `pulumi` first on PATH, and a driver using the real Automation API with it."""
    bin_dir, state, project = tmp_path / "bin", tmp_path / "fake-state", tmp_path / "project"
    for folder in (bin_dir, state, project / "stacks"):
        folder.mkdir(parents=True)
    (project / "Pulumi.yaml").write_text("name: multikueue-fleet\nruntime: python\n")
    fake = bin_dir / "pulumi"
    fake.write_text(f"#!{sys.executable}\n{FAKE_CLI}")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_STATE", str(state))
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "ci-secret")

    async def ready(self: Driver, summary: dict[str, Any]) -> FleetStatus:
        return FleetStatus([Check("manager", "ClusterQueue", "cq", True, "Ready")])

    monkeypatch.setattr(Driver, "_wait_ready", ready)
    lines: list[str] = []

    def make(**kw: Any) -> Driver:
        options = Options(
            base="ci",
            name="ci-fake",
            out=tmp_path / "out",
            backend=tmp_path / "backend",
            project=project,
            **kw,
        )
        return Driver(options, log=lines.append, tools=lambda *_: None, host_check=lambda _: [])

    def calls() -> list[str]:
        return (state / "calls.log").read_text().splitlines()

    return type(
        "Cli",
        (),
        {
            "make": staticmethod(make),
            "calls": staticmethod(calls),
            "lines": lines,
            "project": project,
            "tmp": tmp_path,
        },
    )


def test_a_run_through_the_real_automation_api(cli: Any) -> None:
    code = cli.make().run([sys.executable, "-c", "raise SystemExit(5)"])
    assert code == 5
    calls = [c.split(" --")[0] for c in cli.calls()]
    assert calls.index("up") < calls.index("destroy") < calls.index("stack rm")
    # The salt stack init wrote went with the config into the file passed to up, and no
    # ephemeral stack file is left in stacks/.
    assert "up config: salt" in cli.calls()
    assert list((cli.project / "stacks").iterdir()) == []
    assert [c for c in cli.calls() if c.startswith("stack history")]
    # `stack output --show-secrets` reads only the state (stack_output.go); `stack history
    # --show-secrets` would load the stack file and write a salt there.
    assert not [c for c in cli.calls() if c.startswith("stack history --show-secrets")]
    assert not (cli.tmp / "backend" / "stack-config" / "Pulumi.ci-fake.yaml").exists()


def test_the_engine_leaves_no_kubeconfig_in_tmp(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each command gives the engine a TMPDIR of its own under the backend and removes it;
    one that a killed command left (its process gone) goes too."""
    host_tmp, engine_tmp = tmp_path / "host-tmp", tmp_path / "backend" / "tmp"
    host_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(host_tmp))
    killed = engine_tmp / "engine-999999999-abc"
    killed.mkdir(parents=True)
    assert cli.make().run([sys.executable, "-c", "pass"]) == 0
    used = [c.split("TMPDIR=")[1] for c in cli.calls() if " TMPDIR=" in c]
    assert [c.split()[0] for c in cli.calls() if " TMPDIR=" in c] == ["up", "destroy"]
    assert all(Path(folder).parent == engine_tmp for folder in used), used
    assert list(host_tmp.iterdir()) == []
    assert list(engine_tmp.iterdir()) == []


def test_up_alone_leaves_no_stack_file_in_stacks(cli: Any) -> None:
    """Nothing the driver or the SDK runs after `stack init` writes into stacks/, so a run
    whose teardown fails leaves nothing there either."""
    cli.make().up()
    assert list((cli.project / "stacks").iterdir()) == []


def test_up_of_a_fleet_that_exists_keeps_its_salt(cli: Any) -> None:
    """A second `up --name` updates the fleet in place: `stack select` writes no salt, so the
    one the first `up` moved out of stacks/ must stay, or the state's secrets stop opening."""
    cli.make().up()
    cli.make().up()
    assert [c for c in cli.calls() if c.startswith("up config")] == ["up config: salt"] * 2
    assert [c for c in cli.calls() if c.startswith("stack init")][1:] == []
    assert list((cli.project / "stacks").iterdir()) == []


def test_timeout_interrupts_up_waits_for_it_then_tears_down(
    cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_UP", "slow-cancel")
    code = cli.make(up_timeout=2).run(["true"])
    assert code == 124
    calls = cli.calls()
    # up saw SIGINT, took its time to cancel, and exited before destroy started.
    assert calls.index("up: SIGINT") < calls.index("up: cancelled")
    assert calls.index("up: cancelled") < [c.split(" ")[0] for c in calls].index("destroy")
    assert not any(c.startswith("cancel") for c in calls)  # no lock to remove
    assert list((cli.project / "stacks").iterdir()) == []


def test_a_child_deaf_to_sigint_is_terminated_and_its_lock_removed(
    cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_UP", "deaf")
    code = cli.make(up_timeout=2, interrupt_grace=0.5).run(["true"])
    assert code == 124
    calls = [c.split(" ")[0] for c in cli.calls()]
    assert "up: cancelled" not in cli.calls()
    assert calls.index("cancel") < calls.index("destroy")
    assert any("sending SIGTERM" in line for line in cli.lines)


def test_sigterm_to_the_driver_tears_down_and_says_so(
    cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A driver process (as CI runs it) gets SIGTERM while `pulumi up` runs."""
    monkeypatch.setenv("FAKE_UP", "slow-cancel")
    script = f"""
import sys
from pathlib import Path
from components.cli.automation import Driver, Options
options = Options(base="ci", name="ci-term", out=Path({str(cli.tmp / "out")!r}),
                  backend=Path({str(cli.tmp / "backend")!r}), project=Path({str(cli.project)!r}))
sys.exit(Driver(options, tools=lambda *_: None, host_check=lambda _: []).run(["true"]))
"""
    driver = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    log = cli.tmp / "fake-state" / "calls.log"
    while not log.exists() or "up config: salt" not in log.read_text():
        assert driver.poll() is None, driver.communicate()
        time.sleep(0.05)
    driver.send_signal(signal.SIGTERM)
    out, err = driver.communicate(timeout=120)
    assert driver.returncode == 143, out + err
    assert "Traceback" not in err
    calls = [c.split(" ")[0] for c in cli.calls()]
    assert cli.calls().index("up: cancelled") < calls.index("destroy")
    assert "SIGTERM received" in out


def test_passphrase_file_reaches_the_cli(
    cli: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE")
    secret = tmp_path / "passphrase"
    secret.write_text("s3cret\n")
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE_FILE", str(secret))
    assert cli.make().run(["true"]) == 0
    assert f"up passphrase: {secret}" in cli.calls()
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE_FILE", str(tmp_path / "missing"))
    with pytest.raises(DriverError, match=r"PULUMI_CONFIG_PASSPHRASE_FILE=.* cannot be read"):
        cli.make().down("ci-fake")


@pytest.mark.parametrize(
    "command",
    [
        ["run", "--out", "OUT", "--", "true"],
        ["down", "--name", "ci-x"],
        ["preview", "--name", "ci-x"],
        ["up", "--out", "OUT"],
    ],
)
def test_no_pulumi_cli_is_one_line(command: list[str], tmp_path: Path) -> None:
    # Neither on PATH nor in a tools folder (this checkout's .tools/bin would be used).
    env = {**os.environ, "PATH": "/nonexistent", "PULUMI_CONFIG_PASSPHRASE": "x",
           "MKF_TOOLS_DIR": str(tmp_path / "no-tools")}  # fmt: skip
    command = [str(tmp_path) if word == "OUT" else word for word in command]
    result = subprocess.run(
        [sys.executable, "-m", "components", *command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "Pulumi CLI" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_cloud_base_needs_the_cloud_sdks_in_pulumis_environment(
    fake: Any, tmp_path: Path
) -> None:
    """Pulumi would make the missing .venv from requirements.txt alone and the program
    would stop at its first GKE cluster; the driver says so before creating anything."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    options = Options(
        base="gke", name="gke-t", out=tmp_path / "out", backend=tmp_path / "s", project=project
    )
    driver = Driver(
        options, automation=fake, log=lambda _: None, tools=lambda *_: None, host_check=lambda _: []
    )
    with pytest.raises(DriverError) as info:
        driver.up()
    assert str(info.value) == (
        "stack 'gke' has gke clusters, and Pulumi's environment for this program (.venv) "
        "lacks pulumi_gcp; install them with "
        "`.venv/bin/python -m pip install -r requirements-cloud.txt`"
    )
    assert fake.calls == []


def test_preview_of_a_fleet_that_does_not_exist_says_what_to_do(fake: Any) -> None:
    with pytest.raises(DriverError) as caught:
        fake.make().preview("mine")
    message = str(caught.value)
    assert message.startswith("no fleet named mine in ")
    assert "`mkf render --diff --stack mine`" in message
    assert "\n" not in message


USERS_STACK = "config:\n  multikueue-fleet:workers:\n    - name: w1\n"


def test_down_of_a_stack_that_does_not_exist_keeps_the_users_stack_file(cli: Any) -> None:
    """`down --name ci` where the backend has no stack `ci` must not take the project's own
    stacks/Pulumi.ci.yaml with it; a salt `stack init` left behind goes."""
    users = cli.project / "stacks" / "Pulumi.ci.yaml"
    users.write_text(USERS_STACK)
    leftover = cli.project / "stacks" / "Pulumi.ci-left.yaml"
    leftover.write_text("encryptionsalt: v1:c2FsdA==\n")
    cli.make().down("ci")
    cli.make().down("ci-left")
    assert users.read_text() == USERS_STACK
    assert not leftover.exists()
    assert any("nothing to tear down" in line for line in cli.lines)


def test_a_salt_the_user_committed_is_theirs(cli: Any) -> None:
    """A stack file holding only a salt is what `stack init` leaves, unless git tracks it: a
    team commits a stack's salt to share it. `down` keeps it and `up --name` refuses it."""
    salt = "encryptionsalt: v1:c2FsdA==\n"
    committed = cli.project / "stacks" / "Pulumi.ci-fake.yaml"
    committed.write_text(salt)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for args in (["init", "-q"], ["add", "stacks"], ["commit", "-q", "-m", "salt"]):
        subprocess.run([*git, *args], cwd=cli.project, check=True, capture_output=True)
    cli.make().down("ci-fake")
    assert committed.read_text() == salt
    with pytest.raises(DriverError, match="is a stack file of this project"):
        cli.make().up()
    assert committed.read_text() == salt
    assert not [c for c in cli.calls() if c.startswith("stack init")]


def test_the_config_pulumi_reads_keeps_every_value_as_read(cli: Any) -> None:
    """The ephemeral stack's config goes to Pulumi, which reads YAML 1.2 (yaml.v3): a text
    that 1.2 would read as a number or a date is quoted, so each value comes back as it was
    read from the base stack."""
    values = {
        "labels": {"a": "08", "b": "1e3", "c": "0o17", "d": "0x1F", "e": "2026-01-01", "f": "no"},
        "workers": 2,
        "flag": True,
        "ratio": 0.5,
    }
    path = cli.make()._write_config("ci-fake", values)
    read = stack_yaml.load(path.read_text()).data["config"]
    assert read == {f"multikueue-fleet:{k}": v for k, v in values.items()}
    assert "a: '08'" in path.read_text()


@pytest.mark.parametrize("text", [USERS_STACK, "", "encryptionsalt: [not, a, salt\n"])
def test_up_refuses_a_name_that_is_a_users_stack_file(cli: Any, text: str) -> None:
    users = cli.project / "stacks" / "Pulumi.ci-fake.yaml"
    users.write_text(text)
    with pytest.raises(DriverError) as info:
        cli.make().up()
    (line,) = str(info.value).splitlines()
    assert line.startswith("--name ci-fake: stacks/Pulumi.ci-fake.yaml is a stack file")
    assert "choose another --name" in line
    assert users.read_text() == text
    assert not [c for c in cli.calls() if c.startswith("stack init")]


def test_run_refuses_a_users_stack_file_and_keeps_every_file_beside_its_own(cli: Any) -> None:
    """`run` creates and deletes an ephemeral stack: under a name that is a stack file of the
    user's it runs nothing and deletes nothing; under its own name the files beside it in
    stacks/ (the base stack, a user's other stack) are as they were after the teardown."""
    users = cli.project / "stacks" / "Pulumi.ci-fake.yaml"
    users.write_text(USERS_STACK)
    with pytest.raises(DriverError, match="is a stack file of this project"):
        cli.make().run([sys.executable, "-c", "raise SystemExit(0)"])
    assert users.read_text() == USERS_STACK
    assert not [c for c in cli.calls() if c.split()[0] in ("up", "destroy", "stack")]
    users.unlink()
    beside = {
        cli.project / "stacks" / "Pulumi.ci.yaml": "config:\n  multikueue-fleet:fleetName: ci\n",
        cli.project / "stacks" / "Pulumi.mine.yaml": USERS_STACK,
    }
    for path, text in beside.items():
        path.write_text(text)
    assert cli.make().run([sys.executable, "-c", "raise SystemExit(0)"]) == 0
    assert {p: p.read_text() for p in beside} == beside
    assert sorted((cli.project / "stacks").iterdir()) == sorted(beside)


def test_down_removes_the_kind_clusters_a_cut_short_create_left_after_destroy(
    fake: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """destroy skips a pending create; the stack's own marks (kind_creates.py) say what it
    began to make, and go after destroy, before the stack is removed. kind unable to delete
    one: down fails, naming it and the command."""
    seen: list[Path] = []

    def remove(folder: Path, log: Any) -> list[str]:
        fake.calls.append(("remove_cut_short", folder.name))
        seen.append(folder)
        return []

    monkeypatch.setattr(driver_module, "remove_cut_short", remove)
    driver = fake.make(name="ci-cut")
    driver.up()
    driver.down("ci-cut")
    assert [c[0] for c in fake.calls][-3:] == ["destroy", "remove_cut_short", "remove_stack"]
    assert seen == [stack_folder("ci-cut")]

    def refuse(folder: Path, log: Any) -> list[str]:
        raise CommandFailed("kind cluster ci-cut2-worker1 was left half made by an "
                            "interrupted create and could not be deleted (no docker); delete "
                            "it with `kind delete cluster --name ci-cut2-worker1`")  # fmt: skip

    monkeypatch.setattr(driver_module, "remove_cut_short", refuse)
    driver = fake.make(name="ci-cut2")
    driver.up()
    with pytest.raises(DriverError, match=r"kind delete cluster --name ci-cut2-worker1"):
        driver.down("ci-cut2")


def test_the_interrupt_grace_is_user_settable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MKF_INTERRUPT_GRACE", "5")
    assert Options().interrupt_grace == 5
    monkeypatch.setenv("MKF_INTERRUPT_GRACE", "-1")
    with pytest.raises(DriverError, match="MKF_INTERRUPT_GRACE='-1' is not a number"):
        Options()
