"""The controller image builds from controller/Dockerfile and runs. Needs a Docker engine;
skips, saying so, without one."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _docker_reason() -> str:
    if not shutil.which("docker"):
        return "needs the docker CLI"
    if subprocess.run(["docker", "info"], capture_output=True, check=False).returncode != 0:
        return "needs a running Docker engine (docker info failed)"
    return ""


@pytest.mark.e2e
@pytest.mark.skipif(bool(_docker_reason()), reason=_docker_reason() or "ok")
def test_controller_image_builds_and_runs() -> None:
    tag = "multikueue-fleet-dispatcher:test"
    build = subprocess.run(
        ["docker", "build", "-f", "controller/Dockerfile", "-t", tag, "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    help_text = subprocess.run(
        ["docker", "run", "--rm", "--read-only", tag, "--help"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert help_text.returncode == 0, help_text.stderr
    assert "explain" in help_text.stdout
    user = subprocess.run(
        ["docker", "image", "inspect", "-f", "{{.Config.User}}", tag],
        capture_output=True,
        text=True,
        check=True,
    )
    assert user.stdout.strip() == "65532:65532"
