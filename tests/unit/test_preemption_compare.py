"""bench/preemption_compare.py: one kept run's preemptions beside the simulation's."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import preemption_compare
from fleet_metrics import ORIGIN_LABEL


def _workload(
    name: str, uid: str, owner: str = "", created: int = 0, **status: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "team-a", "uid": uid, "labels": {},
                            "creationTimestamp": f"2026-11-30T10:00:{created:02}Z"}  # fmt: skip
    if owner:
        meta["ownerReferences"] = [{"kind": "Job", "name": owner}]
    return {"metadata": meta, "status": status}


def _condition(kind: str, second: int, reason: str = "", message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": "True", "reason": reason, "message": message,
            "lastTransitionTime": f"2026-11-30T10:00:{second:02}Z"}  # fmt: skip


def test_a_kept_run_is_compared_with_the_simulation_of_its_stream(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manager = _workload("job-job-0007-a1", "m", "job-0007",
                        conditions=[_condition("QuotaReserved", 1)])  # fmt: skip
    # Created 1 s after the manager reserved it, reserved within the second.
    copy = _workload("job-job-0007-a1", "c", created=2, conditions=[_condition("QuotaReserved", 2)])
    copy["metadata"]["labels"][ORIGIN_LABEL] = "manager"
    evicted = _condition(
        "Evicted", 2, "Preempted", "Preempted to accommodate a workload (UID: c, JobUID: j)"
    )
    victim = _workload("job-local-1", "v", "local-worker1-0000", conditions=[evicted])
    kept = tmp_path / "1-AllAtOnce.json"
    kept.write_text(json.dumps({"": [manager], "worker1": [copy, victim]}))
    assert preemption_compare.main([str(kept)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| preemptions by a copy"))
    real, simulated, _ = (cell.strip() for cell in row.split("|")[2:5])
    assert real == "1"
    assert int(simulated) > 0  # seed 1's stream preempts under AllAtOnce
    # The way to a worker is the clients' model now, not a delay of its own.
    assert "| sync | 1.00 | 1 | clients: 5 QPS, burst 10 | worker_qps, worker_burst |" in out
    # A copy that preempted is no reading of how fast a worker admits.
    assert "| admission | nan | 0 | 0.1 | admission_delay |" in out


def test_a_file_that_is_not_a_kept_run_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        preemption_compare.main([str(tmp_path / "runs.json")])
    assert exited.value.code == 2
    capsys.readouterr()
    broken = tmp_path / "2-policy.json"
    broken.write_text("[1, 2]")
    assert preemption_compare.main([str(broken)]) == 2
    assert capsys.readouterr().err.startswith(f"error: {broken}: not a file of --keep-workloads")
