"""Stack file texts for tests, kept here so that no test depends on the live stacks/ folder
(a work-in-progress stack there must not fail unrelated tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A small valid fleet: kind manager, two workers, one ClusterQueue.
SMALL = """\
config:
  multikueue-fleet:fleetName: small
  multikueue-fleet:manager:
    name: manager
    provider: kind
  multikueue-fleet:workers:
    - name: worker1
      labels:
        region: a
    - name: worker2
      labels:
        region: b
  multikueue-fleet:frameworks: [batch, jobset]
  multikueue-fleet:queues:
    flavors:
      - name: default-flavor
    clusterQueues:
      - name: cq
        resourceGroups:
          - coveredResources: [cpu, memory]
            flavors:
              - name: default-flavor
                resources:
                  cpu: 4
                  memory: 8Gi
    localQueues:
      - namespace: team-a
        name: lq
        clusterQueue: cq
"""

# The shipped dev stack as it was when these tests were written (a frozen copy: a change
# to stacks/Pulumi.dev.yaml must not fail tests of render itself).
DEV = """\
# The default stack: one manager and two workers on kind, on this machine's Docker.
# Bring it up with scripts/up.sh (passphrase for this stack only: see README).
config:
  multikueue-fleet:manager:
    name: manager
    provider: kind
  multikueue-fleet:workers:
    - name: worker1
      labels:
        region: local-a
    - name: worker2
      labels:
        region: local-b
  multikueue-fleet:frameworks: [batch, jobset, leaderworkerset]
  multikueue-fleet:queues:
    flavors:
      - name: default-flavor
    clusterQueues:
      - name: cluster-queue
        resourceGroups:
          - coveredResources: [cpu, memory]
            flavors:
              - name: default-flavor
                resources:
                  cpu: 4
                  memory: 8Gi
    localQueues:
      - namespace: default
        name: user-queue
        clusterQueue: cluster-queue
      - namespace: team-a
        name: user-queue
        clusterQueue: cluster-queue
"""


def write_stack(folder: Path, name: str, text: str) -> Path:
    path = folder / f"Pulumi.{name}.yaml"
    path.write_text(text)
    return path


def cli(
    *args: str, cwd: Path = ROOT, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m components ARGS` in a fresh process, as a user runs it (`env`: more
    variables than the bare PYTHONPATH and PATH)."""
    return subprocess.run(
        [sys.executable, "-m", "components", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", **measured(), **(env or {})},
    )


def measured() -> dict[str, str]:
    """The variables that have coverage measure a Python subprocess too, into the run's data
    file, when the run measures (scripts/test.sh; [tool.coverage.run] in pyproject.toml)."""
    return {
        k: v for k, v in os.environ.items() if k in ("COVERAGE_PROCESS_CONFIG", "COVERAGE_FILE")
    }
