"""End to end with the real tools, on a copy of the project (nothing in the checkout is
touched). Each test skips, saying what is missing, unless its tools are present."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

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
    copy = tmp_path / "project"
    shutil.copytree(
        ROOT,
        copy,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", ".tools", ".pulumi-state", ".render", "__pycache__"
        ),
    )
    (copy / ".venv").symlink_to(ROOT / ".venv")
    return copy


def _pulumi_env(project: Path) -> dict[str, str]:
    (project / ".pulumi-state").mkdir(exist_ok=True)
    pulumi = _pulumi()
    assert pulumi
    return {
        **os.environ,
        "PULUMI_BACKEND_URL": f"file://{project}/.pulumi-state",
        "PULUMI_CONFIG_PASSPHRASE": "multikueue-fleet-dev",
        "PULUMI_SKIP_UPDATE_CHECK": "1",
        "PATH": f"{Path(pulumi).parent}:{os.environ['PATH']}",
    }


def _pulumi_run(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["pulumi", *args, "--non-interactive"],
        cwd=project,
        env=_pulumi_env(project),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def test_preview_under_the_real_engine(project: Path) -> None:
    _require(pulumi=True)
    assert _pulumi_run(project, "stack", "select", "--create", "dev").returncode == 0
    result = _pulumi_run(project, "preview", "--stack", "dev")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "fleet" in result.stdout


def test_real_engine_reports_config_errors_before_any_change(project: Path) -> None:
    _require(pulumi=True)
    stack = project / "stacks" / "Pulumi.dev.yaml"
    stack.write_text(stack.read_text().replace("cpu: 4", "cpu: lots"))
    assert _pulumi_run(project, "stack", "select", "--create", "dev").returncode == 0
    result = _pulumi_run(project, "preview", "--stack", "dev")
    assert result.returncode != 0
    assert "nominalQuota 'lots' is not a Kubernetes quantity" in result.stdout + result.stderr


def test_readme_first_command_on_a_docker_machine(project: Path) -> None:
    _require(pulumi=True, kind=True, docker=True)
    result = subprocess.run(
        ["bash", "scripts/up.sh", "dev"],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
        env={**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "1"},
    )
    # This version validates, installs the tools, creates the stack and renders the
    # fleet; it stops before provisioning with exit code 3 and says so.
    assert result.returncode == 3, result.stdout + result.stderr
    assert (project / ".render" / "dev" / "manager" / "objects.yaml").exists()
