"""End to end with the real tools, on a copy of the project (nothing in the checkout is
touched). Each test skips, saying what is missing, unless its tools are present."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from components.resources.program_env import CLOUD_SDKS, cloud_modules, missing_cloud_sdks

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.e2e


def _pulumi() -> str | None:
    local = ROOT / ".tools" / "bin" / "pulumi" / "pulumi"
    return str(local) if local.exists() else shutil.which("pulumi")


def _kind() -> str | None:
    local = ROOT / ".tools" / "bin" / "kind"
    return str(local) if local.exists() else shutil.which("kind")


def _docker_running() -> bool:
    if not shutil.which("docker"):
        return False
    return subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0


def _require(pulumi: bool = False, kind: bool = False, docker: bool = False) -> None:
    missing = []
    if pulumi and not _pulumi():
        missing.append("the Pulumi CLI (run scripts/up.sh once, or put pulumi on PATH)")
    if kind and not _kind():
        missing.append("kind")
    if docker and not _docker_running():
        missing.append("a running Docker engine")
    if missing:
        pytest.skip("needs " + ", ".join(missing))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy without environments: Pulumi's (.venv) is made from requirements.txt alone,
    as scripts/up.sh makes it, never the tests' .venv-dev with the cloud SDKs."""
    copy = tmp_path / "project"
    shutil.copytree(
        ROOT,
        copy,
        ignore=shutil.ignore_patterns(
            ".git", ".venv*", ".tools", ".pulumi-state", ".render", ".fleet", "__pycache__"
        ),
    )
    return copy


@functools.cache
def _shared_program_env() -> Path:
    """One program environment (requirements.txt only) for the tests that do not check
    how it is made; built on first use, after a test found its tools."""
    env = Path(tempfile.mkdtemp(prefix="mkf-e2e-venv-")) / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True, timeout=300)
    subprocess.run(
        [str(env / "bin" / "python"), "-m", "pip", "install", "-q", "-r", "requirements.txt"],
        cwd=ROOT,
        check=True,
        timeout=1200,
    )
    return env


def _with_program_env(project: Path) -> Path:
    (project / ".venv").symlink_to(_shared_program_env())
    return project


DEV_PASSPHRASE = "multikueue-fleet-dev"  # scripts/env.sh; the dev stack's salt needs it
CI_PASSPHRASE = "e2e"  # any: the ci stack's salt is made by its first `stack init`


def _pulumi_env(project: Path, passphrase: str = DEV_PASSPHRASE) -> dict[str, str]:
    """The project's local backend, with pulumi and kind on PATH (the driver and the
    program call plain `kind`, found through PATH)."""
    (project / ".pulumi-state").mkdir(exist_ok=True)
    pulumi, kind = _pulumi(), _kind()
    assert pulumi
    tools = [str(Path(pulumi).parent)] + ([str(Path(kind).parent)] if kind else [])
    environment = {
        **os.environ,
        "PULUMI_BACKEND_URL": f"file://{project}/.pulumi-state",
        "PULUMI_CONFIG_PASSPHRASE": passphrase,
        "PULUMI_SKIP_UPDATE_CHECK": "1",
        "PATH": os.pathsep.join([*tools, os.environ["PATH"]]),
    }
    # Pulumi reads PULUMI_CONFIG_PASSPHRASE first, but a file set for other stacks is noise.
    environment.pop("PULUMI_CONFIG_PASSPHRASE_FILE", None)
    return environment


def _pulumi_run(
    project: Path, *args: str, passphrase: str = DEV_PASSPHRASE
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["pulumi", *args, "--non-interactive"],
        cwd=project,
        env=_pulumi_env(project, passphrase),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def test_preview_under_the_real_engine(project: Path) -> None:
    """On a new stack every cluster's kubeconfig is unknown, yet the preview lists the
    fleet's own objects by cluster, kind and name, with their fields (--diff)."""
    _require(pulumi=True)
    _with_program_env(project)
    assert _pulumi_run(project, "stack", "select", "--create", "dev").returncode == 0
    result = _pulumi_run(project, "preview", "--stack", "dev", "--diff")
    assert result.returncode == 0, result.stdout + result.stderr
    for name in (
        "manager:ClusterQueue:cluster-queue",
        "manager:MultiKueueConfig:multikueue",
        "worker1:ClusterQueue:cluster-queue",
        "worker2:LocalQueue:team-a/user-queue",
    ):
        assert name in result.stdout, name
    assert "nominalQuota" in result.stdout  # the objects' fields, not just their names


def test_real_engine_reports_config_errors_before_any_change(project: Path) -> None:
    _require(pulumi=True)
    _with_program_env(project)
    stack = project / "stacks" / "Pulumi.dev.yaml"
    stack.write_text(stack.read_text().replace("cpu: 4", "cpu: lots"))
    assert _pulumi_run(project, "stack", "select", "--create", "dev").returncode == 0
    result = _pulumi_run(project, "preview", "--stack", "dev")
    assert result.returncode != 0
    assert "nominalQuota 'lots' is not a Kubernetes quantity" in result.stdout + result.stderr


JOBS = ROOT / "examples" / "sample-jobs.yaml"  # the same ones the CI workflow submits


def _kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    result = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _wait(check, what: str, timeout: float = 600) -> None:  # type: ignore[no-untyped-def]
    import time

    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(5)


def _script(
    project: Path, env: dict[str, str], script: str, timeout: float
) -> subprocess.CompletedProcess[str]:
    """scripts/SCRIPT for the ci stack, bounded by `timeout` (a hang fails the test)."""
    return subprocess.run(
        ["bash", f"scripts/{script}", "ci"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )


def test_ci_fleet_runs_a_job_a_jobset_and_a_leaderworkerset(project: Path) -> None:
    _require(pulumi=True, kind=True, docker=True)
    if not shutil.which("kubectl"):
        pytest.skip("needs kubectl")
    import uuid

    stack_file = project / "stacks" / "Pulumi.ci.yaml"
    name = f"e2e{uuid.uuid4().hex[:6]}"  # kind cluster names are global on a Docker host
    stack_file.write_text(
        stack_file.read_text().replace(
            "config:\n", f"config:\n  multikueue-fleet:fleetName: {name}\n", 1
        )
    )
    env = {**os.environ, "PULUMI_CONFIG_PASSPHRASE": CI_PASSPHRASE, "PULUMI_SKIP_UPDATE_CHECK": "1"}
    try:
        up = _script(project, env, "up.sh", timeout=3600)
        assert up.returncode == 0, up.stdout[-4000:] + up.stderr[-4000:]
        outputs = json.loads(
            _pulumi_run(
                project,
                *("stack", "output", "--json", "--show-secrets", "--stack", "ci"),
                passphrase=CI_PASSPHRASE,
            ).stdout
        )
        manager = project / "manager.kubeconfig"
        manager.write_text(outputs["kubeconfigs"]["manager"])
        _kubectl(manager, "apply", "-f", str(JOBS))

        def admitted_on_worker(kind: str, obj: str) -> bool:
            listing = json.loads(
                _kubectl(manager, "get", "workloads", "-n", "default", "-o", "json")
            )
            return any(
                w["metadata"]["ownerReferences"][0]["name"] == obj
                and (w.get("status") or {}).get("clusterName") == "worker1"
                for w in listing["items"]
                if w["metadata"].get("ownerReferences")
            )

        for kind, obj in (
            ("Job", "sample-job"),
            ("JobSet", "sample-jobset"),
            ("LeaderWorkerSet", "sample-lws"),
        ):
            _wait(lambda kind=kind, obj=obj: admitted_on_worker(kind, obj), f"{kind} on worker1")
        _wait(
            lambda: (
                "Complete"
                in _kubectl(
                    manager,
                    "get",
                    "job",
                    "sample-job",
                    "-n",
                    "default",
                    "-o",
                    "jsonpath={.status.conditions[*].type}",
                )
            ),
            "the Job to complete (status mirrored from the worker)",
        )
        preview = _pulumi_run(
            project, "preview", "--stack", "ci", "--expect-no-changes", passphrase=CI_PASSPHRASE
        )
        assert preview.returncode == 0, preview.stdout[-4000:]
        # The LeaderWorkerSet sleeps for an hour and holds quota: on kind the objects go
        # with their clusters, so teardown does not wait on Kueue's finalizers (a hang
        # here runs into the timeout, about a minute per cluster is what kind needs).
        down = _script(project, env, "down.sh", timeout=600)
        assert down.returncode == 0, down.stdout[-4000:] + down.stderr[-4000:]
    finally:
        _script(project, env, "down.sh", timeout=1800)


def test_readme_first_command_on_a_docker_machine(project: Path, tmp_path: Path) -> None:
    """scripts/up.sh on a copy with no environment and an empty Pulumi home, as on a fresh
    laptop: it makes Pulumi's .venv without the cloud SDKs, so Pulumi fetches no GCP, AWS
    or EKS plugin for this kind stack; and the tracked dev stack file stays as committed."""
    _require(pulumi=True, kind=True, docker=True)
    home = tmp_path / "pulumi-home"
    env = {**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "1", "PULUMI_HOME": str(home)}
    env.pop("PULUMI_CONFIG_PASSPHRASE", None)
    env.pop("PULUMI_CONFIG_PASSPHRASE_FILE", None)
    stack_file = project / "stacks" / "Pulumi.dev.yaml"
    stack_file.write_text(
        stack_file.read_text().replace(
            "config:\n", "config:\n  multikueue-fleet:fleetName: e2edev\n", 1
        )
    )
    try:
        result = subprocess.run(
            ["bash", "scripts/up.sh", "dev"],
            cwd=project,
            capture_output=True,
            text=True,
            check=False,
            timeout=3600,
            env=env,
        )
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
        assert "The fleet is up" in result.stdout
        modules = cloud_modules(CLOUD_SDKS)
        assert missing_cloud_sdks(project, CLOUD_SDKS) == modules  # none in .venv
        plugins = sorted(p.name for p in (home / "plugins").iterdir())
        assert any(p.startswith("resource-kubernetes-") for p in plugins), plugins
        assert not [
            p for p in plugins if p.startswith(("resource-gcp", "resource-aws", "resource-eks"))
        ]
        # Only the fleetName line this test added differs: stack init kept the committed salt.
        committed = (ROOT / "stacks" / "Pulumi.dev.yaml").read_text()
        assert stack_file.read_text() == committed.replace(
            "config:\n", "config:\n  multikueue-fleet:fleetName: e2edev\n", 1
        )
    finally:
        subprocess.run(
            ["bash", "scripts/down.sh", "dev"],
            cwd=project,
            capture_output=True,
            text=True,
            check=False,
            timeout=1800,
            env=env,
        )


def test_run_gives_the_command_a_fleet_and_tears_it_down(project: Path) -> None:
    _require(pulumi=True, kind=True, docker=True)
    if not shutil.which("kubectl"):
        pytest.skip("needs kubectl")
    _with_program_env(project)
    env = {**_pulumi_env(project), "PULUMI_CONFIG_PASSPHRASE": "e2e-run"}
    result = subprocess.run(
        [
            str(project / ".venv" / "bin" / "python"),
            "-m",
            "components",
            "run",
            "--base",
            "ci",
            "--out",
            str(project / ".fleet"),
            "--",
            "bash",
            "scripts/sample-jobs.sh",
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=5400,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "the Job and the JobSet completed on a worker" in result.stdout
    stacks = _pulumi_run(project, "stack", "ls", "--json", passphrase="e2e-run")
    assert stacks.returncode == 0, stacks.stderr
    assert not [s for s in json.loads(stacks.stdout) if s["name"].startswith("ci-")]
