"""Stack file texts for tests, kept here so that no test depends on the live stacks/ folder
(a work-in-progress stack there must not fail unrelated tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

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


def write_stack(folder: Path, name: str, text: str) -> Path:
    path = folder / f"Pulumi.{name}.yaml"
    path.write_text(text)
    return path


def cli(*args: str, cwd: Path = ROOT, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`python -m components ARGS` in a fresh process, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "components", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
