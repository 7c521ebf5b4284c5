"""The real Pulumi engine on the dev stack, on a copy of the project (nothing in the checkout is
touched): preview and its config errors, with no cluster. The dev stack brought up on kind is
tests/kind/test_kind_tier.py; the CI fleet, tests/kind/test_kind_ci_fleet.py."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.upstream import toolchain
from tests.helpers.ambient import as_a_user

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e


@functools.cache
def _pulumi() -> str | None:
    """The Pulumi CLI with its Python language host and kubernetes provider beside it: built
    from tools/pulumi* where Go is (as the real tier does), else one on PATH."""
    try:
        return str(toolchain.build(list(toolchain.PULUMI_ENGINE), log=lambda _l: None)["pulumi"])
    except toolchain.ToolchainError:
        return shutil.which("pulumi")


def _require(pulumi: bool = False) -> None:
    if pulumi and not _pulumi():
        pytest.skip(
            "needs the Pulumi CLI: install Go 1.26.8 or later (it is built from tools/pulumi)"
        )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy without environments: Pulumi's (.venv) is made from requirements.txt alone,
    as scripts/up.sh makes it, never the tests' .venv-dev with the cloud SDKs."""
    copy = tmp_path / "project"
    shutil.copytree(
        ROOT,
        copy,
        ignore=shutil.ignore_patterns(
            ".git",
            ".venv*",
            ".tools",
            ".pulumi-state",
            ".render",
            ".fleet",
            ".cache",
            "__pycache__",
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
        [
            str(env / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-compile",
            "-r",
            "requirements.txt",
        ],
        cwd=ROOT,
        check=True,
        timeout=1200,
    )
    return env


@pytest.fixture(scope="module", autouse=True)
def _remove_the_shared_program_env() -> Iterator[None]:
    """Some 400 MB, gone with the module's last test (the run's check for what is left in
    the temporary folder comes after: tests/conftest.py)."""
    yield
    if _shared_program_env.cache_info().currsize:
        shutil.rmtree(_shared_program_env().parent, ignore_errors=True)
        _shared_program_env.cache_clear()


def _with_program_env(project: Path) -> Path:
    (project / ".venv").symlink_to(_shared_program_env())
    return project


DEV_PASSPHRASE = "multikueue-fleet-dev"  # scripts/env.sh; the dev stack's salt needs it


def _pulumi_env(project: Path, passphrase: str = DEV_PASSPHRASE) -> dict[str, str]:
    """The project's local backend, with pulumi and its plugins on PATH."""
    (project / ".pulumi-state").mkdir(exist_ok=True)
    pulumi = _pulumi()
    assert pulumi
    tools = [str(Path(pulumi).parent)]
    # pulumi-kubernetes leaves each provider's kubeconfig in $TMPDIR (engine_tmp.py): here,
    # beside the copy, not in the machine's /tmp.
    tmp = project.parent / f"{project.name}-tmp"
    tmp.mkdir(exist_ok=True)
    environment = {
        **os.environ,
        "TMPDIR": str(tmp),
        "PULUMI_BACKEND_URL": f"file://{project}/.pulumi-state",
        "PULUMI_CONFIG_PASSPHRASE": passphrase,
        "PULUMI_SKIP_UPDATE_CHECK": "1",
        # The program's environment first: the language host built from its module runs
        # the first python3 on PATH (components/resources/program_env.py program_path).
        "PATH": os.pathsep.join([str(project / ".venv" / "bin"), *tools, os.environ["PATH"]]),
    }
    return as_a_user(environment)


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
