"""The CI fleet on the kind tier: `mkf run --base ci -- scripts/sample-jobs.sh`, as
.github/workflows/fleet-e2e.yaml runs it, brings up a throw-away fleet, runs the sample jobs
to completion and leaves nothing behind, when the command succeeds and when the run is
sent SIGTERM half-way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.kind_tier import (
    copy_project,
    fleet_containers,
    kind_clusters,
    require_kind_tier,
    run,
    tool_env,
    use_kind_tier,
)

pytestmark = pytest.mark.kind
PASSPHRASE = "kind-tier-ci"


@pytest.fixture(scope="module")
def ci_project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    manifest = require_kind_tier()
    project = copy_project(tmp_path_factory.mktemp("kind-ci") / "project")
    use_kind_tier(project / "stacks" / "Pulumi.ci.yaml", manifest)
    env = tool_env(project, PASSPHRASE)
    venv = run(["bash", "-c", "python3 -m venv .venv && .venv/bin/pip install -q -r "
                "requirements.txt && .venv/bin/pip install -q --no-deps -e ."],
               project, env, timeout=900)  # fmt: skip
    assert venv.returncode == 0, venv.stderr
    return project, env


def _mkf_run(name: str, *command: str) -> list[str]:
    return [".venv/bin/mkf", "run", "--base", "ci", "--name", name, "--out", ".fleet", "--",
            *command]  # fmt: skip


def _nothing_left(project: Path, env: dict[str, str], name: str) -> None:
    assert not fleet_containers(f"{name}-"), "node containers left"
    assert not [c for c in kind_clusters() if c.startswith(f"{name}-")], "kind clusters left"
    stacks = run(["pulumi", "stack", "ls", "--json"], project, env)
    assert stacks.returncode == 0, stacks.stderr
    assert not [s for s in json.loads(stacks.stdout or "[]") if s["name"] == name]
    assert not list((project / "stacks").glob(f"Pulumi.{name}.yaml"))


def test_ci_fleet_runs_the_sample_jobs_and_leaves_nothing(
    ci_project: tuple[Path, dict[str, str]],
) -> None:
    project, env = ci_project
    name = f"kt{uuid.uuid4().hex[:6]}"
    result = run(_mkf_run(name, "bash", "scripts/sample-jobs.sh"), project, env, timeout=2400)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-6000:]
    assert "the Job and the JobSet completed on a worker" in result.stdout
    _nothing_left(project, env, name)


def test_sigterm_mid_run_tears_the_fleet_down(ci_project: tuple[Path, dict[str, str]]) -> None:
    project, env = ci_project
    name = f"kt{uuid.uuid4().hex[:6]}"
    log = project / f"{name}.log"
    with log.open("w") as out:
        child = subprocess.Popen(
            _mkf_run(name, "sleep", "1200"), cwd=project, env=env, stdout=out, stderr=out
        )
        # SIGTERM once the first node container exists: the fleet is half made.
        deadline = time.monotonic() + 900
        while not fleet_containers(f"{name}-") and child.poll() is None:
            assert time.monotonic() < deadline, "no cluster was ever created"
            time.sleep(2)
        time.sleep(20)
        os.kill(child.pid, signal.SIGTERM)
        code = child.wait(timeout=1800)
    assert code == 143, log.read_text()[-6000:]
    _nothing_left(project, env, name)
