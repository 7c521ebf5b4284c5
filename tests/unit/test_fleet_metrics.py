"""The real-fleet measures (bench/fleet_metrics.py) on recorded Kueue Workloads: what a
watch on the manager and on each worker saw, as Kueue v0.19.2 writes it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import wait_parts as wait_parts_cli
from fleet_metrics import (
    ORIGIN_LABEL,
    RecordError,
    _time,
    delays,
    measure,
    preemptions_of,
    wait_parts,
)


def at(second: int) -> str:
    return f"2026-11-27T06:{second // 60:02}:{second % 60:02}Z"


def workload(
    name: str,
    created: int,
    *,
    uid: str = "",
    origin: bool = False,
    cluster: str = "",
    nominated: tuple[str, ...] = (),
    **conditions: int | tuple[int, str] | tuple[int, str, str],
) -> dict[str, Any]:
    """A Workload version: each condition True since the given second (with a reason, and a
    message)."""
    conds = []
    for kind, since in conditions.items():
        second, reason, message = (
            (*since, "", "")[:3] if isinstance(since, tuple) else (since, "", "")
        )
        conds.append(
            {"type": kind, "status": "True", "lastTransitionTime": at(second), "reason": reason,
             "message": message}
        )  # fmt: skip
    status: dict[str, Any] = {"conditions": conds}
    if cluster:
        status["clusterName"] = cluster
    if nominated:
        status["nominatedClusterNames"] = list(nominated)
    return {
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": uid or f"uid-{name}",
            "creationTimestamp": at(created),
            "labels": {ORIGIN_LABEL: "manager"} if origin else {},
        },
        "status": status,
    }


def preempted_by(uid: str) -> str:
    """The Evicted message Kueue v0.19.2 writes on a preempted workload (preemptionMessage,
    pkg/scheduler/preemption/preemption.go)."""
    return (
        f"Preempted to accommodate a workload (UID: {uid}, JobUID: job-{uid}) due to "
        "prioritization in the ClusterQueue; preemptor path: /cq; preemptee path: /cq"
    )


def test_a_run_is_measured_from_what_the_watches_saw() -> None:
    """job-a: reserved at 1 s, copies on w1 and w2, admitted on w1 at 5 s, evicted at 30 s,
    admitted again on w2 at 40 s, finished at 100 s. job-b: reserved at 2 s, nominated to w1
    only, never admitted; its copy on w3, never nominated, was admitted there: lost. On w1 a
    local workload was preempted by job-a's copy."""
    manager = [
        workload("job-a", 0),
        workload("job-a", 0, QuotaReserved=1, nominated=("w1", "w2")),
        workload("job-a", 0, cluster="w1", QuotaReserved=1, Admitted=5),
        workload("job-a", 0, QuotaReserved=1, Evicted=(30, "AdmissionCheck")),
        workload("job-a", 0, cluster="w2", QuotaReserved=35, Admitted=40),
        workload("job-a", 0, cluster="w2", QuotaReserved=35, Admitted=40, Finished=100),
        workload("job-b", 2, QuotaReserved=2, nominated=("w1",)),
    ]
    workers = {
        "w1": [
            workload("job-a", 1, uid="a-w1", origin=True),
            workload("job-a", 1, uid="a-w1", origin=True, QuotaReserved=4),
            workload("local", 0, QuotaReserved=0),
            workload("local", 0, Evicted=(3, "Preempted", preempted_by("a-w1"))),
        ],
        "w2": [
            workload("job-a", 1, uid="a-w2", origin=True),
            workload("job-a", 31, uid="a-w2-again", origin=True, QuotaReserved=39),
        ],
        "w3": [workload("job-b", 2, uid="b-w3", origin=True, QuotaReserved=3, Admitted=3)],
    }
    found = measure(manager, workers)
    assert found["workloads"] == 2
    assert found["p50"] == found["p99"] == 4.0  # one admitted workload: 1 s -> 5 s
    assert found["jct_p95"] == 100.0
    assert found["copies"] == 2.0  # four copies, two workloads
    assert found["preemptions"] == 1 and found["evictions"] == 1
    assert found["local_preemptions"] == 0
    assert found["lost"] == 1  # job-b's copy on w3
    assert found["unfinished"] == 1 and found["pending"] == 1


def test_a_copy_that_raced_where_it_was_nominated_and_lost_is_not_a_lost_admission() -> None:
    """AllAtOnce: nominated on every worker; w2's copy admitted a second after w1's won."""
    manager = [
        workload("job", 0, QuotaReserved=1, nominated=("w1", "w2")),
        workload("job", 0, cluster="w1", QuotaReserved=1, Admitted=2, Finished=9),
    ]
    workers = {
        "w1": [workload("job", 1, uid="w1", origin=True, QuotaReserved=2, Admitted=2)],
        "w2": [workload("job", 1, uid="w2", origin=True, QuotaReserved=3, Admitted=3)],
    }
    found = measure(manager, workers)
    assert (found["lost"], found["copies"]) == (0, 2)


def test_every_workload_admitted_and_finished_leaves_nothing_pending() -> None:
    manager = [workload("job", 0, cluster="w1", QuotaReserved=1, Admitted=2, Finished=9)]
    found = measure(manager, {"w1": [workload("job", 1, origin=True, QuotaReserved=2)]})
    assert (found["unfinished"], found["pending"], found["lost"], found["copies"]) == (0, 0, 0, 1)


@pytest.mark.parametrize(
    ("manager", "message"),
    [
        ([], "no manager Workloads recorded"),
        ([{"metadata": {"namespace": "team-a"}}], "has no metadata.name"),
        ([{"metadata": {"name": "job"}}], "Workload /job: no time"),
        (
            [
                workload("job", 0)
                | {
                    "status": {
                        "conditions": [
                            {"type": "Admitted", "status": "True", "lastTransitionTime": "soon"}
                        ]
                    }
                }
            ],
            "condition Admitted: 'soon' is not an RFC 3339 time",
        ),
    ],
)
def test_an_unreadable_record_is_one_line_saying_what(manager: list[Any], message: str) -> None:
    with pytest.raises(RecordError, match=message) as caught:
        measure(manager, {})
    assert "\n" not in str(caught.value)


def test_a_served_leader_worker_set_ends_when_the_replay_deleted_it() -> None:
    """A LeaderWorkerSet never finishes by itself: its Workloads end at their deletion,
    only for those the replay deleted after their run time."""
    group = workload("lws-a-0", 0, cluster="w1", QuotaReserved=1, Admitted=3)
    group["metadata"]["ownerReferences"] = [{"kind": "LeaderWorkerSet", "name": "lws-a"}]
    gone = {**group, "metadata": {**group["metadata"], "deletionTimestamp": at(40)}}
    assert measure([group, gone], {})["unfinished"] == 1
    found = measure([group, gone], {}, served=["team-a/lws-a"])
    assert (found["unfinished"], found["jct_p95"]) == (0, 40.0)


def test_preemptions_for_a_copy_are_told_from_local_work_preempting_local_work() -> None:
    """As the simulation counts them: a victim of a MultiKueue copy is a preemption; local
    work preempting local work (or a preemptor no watch saw, or no message) is apart."""
    manager = [workload("job", 0, QuotaReserved=1, nominated=("w1",))]
    workers = {
        "w1": [
            workload("job", 1, uid="copy", origin=True, QuotaReserved=2, Admitted=2),
            workload("big", 1, uid="big-local", QuotaReserved=2, Admitted=2),
            workload("a", 0, uid="a", Evicted=(2, "Preempted", preempted_by("copy"))),
            workload("b", 0, uid="b", Evicted=(2, "Preempted", preempted_by("big-local"))),
            workload("c", 0, uid="c", Evicted=(2, "Preempted", preempted_by("unseen"))),
            workload("d", 0, uid="d", Evicted=(2, "Preempted")),
            workload("e", 0, uid="e", Evicted=(2, "InactiveWorkload")),
        ],
        # The same preemptor UID on another worker is not that worker's copy.
        "w2": [workload("f", 0, uid="f", Evicted=(2, "Preempted", preempted_by("copy")))],
    }
    found = measure(manager, workers)
    assert (found["preemptions"], found["local_preemptions"]) == (1, 4)


def test_who_preempted_whom_is_listed_by_the_jobs_names_as_the_simulation_lists_it() -> None:
    def owned(obj: dict[str, Any], job: str) -> dict[str, Any]:
        obj["metadata"]["ownerReferences"] = [{"kind": "Job", "name": job}]
        return obj

    local = "local-w1-0000"
    evicted = [(5, "copy"), (5, "copy"), (30, "x")]  # two versions of one eviction, a second
    # MultiKueue's copy has no owner on its worker: it is named by its manager Workload's.
    manager = [owned(workload("job-a-1f2e3", 1, QuotaReserved=1), "a")]
    workers = {
        "w1": [
            workload("job-a-1f2e3", 1, uid="copy", origin=True, Admitted=9),
            owned(workload("job-l0", 0, uid="l0", Admitted=1), local),
            *(
                owned(
                    workload("job-l0", 0, uid="l0", Evicted=(t, "Preempted", preempted_by(u))),
                    local,
                )
                for t, u in evicted
            ),
        ],
    }
    assert preemptions_of(manager, workers) == [
        (_time(at(5), "t"), "w1", local, "a"),
        (_time(at(30), "t"), "w1", local, ""),
    ]


def test_the_delays_a_run_shows_are_read_from_its_copies() -> None:
    manager = [
        workload("a", 0, QuotaReserved=10, Admitted=13, cluster="w1"),
        workload("b", 0, QuotaReserved=20, Admitted=40, cluster="w1"),
    ]
    workers = {
        "w1": [
            # Created 1 s after the manager reserved it, reserved at once, admitted at 12.
            workload("a", 11, uid="ca", origin=True, QuotaReserved=11, Admitted=12),
            # Waited 15 s for quota: a sync reading, not an admission one.
            workload("b", 20, uid="cb", origin=True, QuotaReserved=35, Admitted=35),
            workload("local", 0, uid="l", Admitted=1),
        ],
        # A copy that lost the race counts for sync, and for admission, not for back.
        "w2": [workload("a", 12, uid="ca2", origin=True, QuotaReserved=12, Admitted=12)],
    }
    found = delays(manager, workers)
    assert sorted(found["sync"]) == [0.0, 1.0, 2.0]
    assert sorted(found["admission"]) == [0.0, 0.0]
    assert sorted(found["back"]) == [1.0, 5.0]


def test_the_wait_ends_at_the_admission_on_the_worker_its_copy_won_on() -> None:
    # Reserved at 10; admitted on w1 at 12 (the copy it took), on w2 at 11 (a copy that
    # lost: not the one it took); the manager saw it at 14.
    manager = [workload("a", 0, QuotaReserved=10, Admitted=14, cluster="w1")]
    workers = {
        "w1": [workload("a", 10, uid="c1", origin=True, QuotaReserved=12, Admitted=12)],
        "w2": [workload("a", 10, uid="c2", origin=True, QuotaReserved=11, Admitted=11)],
    }
    assert measure(manager, workers)["p50"] == 2.0
    # No copy it took was seen: the manager's Admitted.
    assert measure(manager, {"w2": workers["w2"]})["p50"] == 4.0


def test_a_workload_the_manager_finished_without_admitting_it_waited_for_its_copy() -> None:
    # Seen with ten KWOK workers on two cores: the copy ran and finished on w1 while the
    # manager's MultiKueue check stayed Pending; the manager then took Finished over.
    manager = [workload("a", 0, QuotaReserved=10, Finished=40)]
    workers = {
        "w1": [workload("a", 11, uid="c1", origin=True, Admitted=17, Finished=37)],
        "w2": [workload("a", 11, uid="c2", origin=True)],
    }
    found = measure(manager, workers)
    assert (found["p50"], found["pending"], found["unfinished"]) == (7.0, 0.0, 0.0)


def test_each_wait_is_split_where_it_went_on_the_copy_it_took() -> None:
    manager = [
        # Waited 5 s for the manager's quota, its copy made 3 s after, admitted 2 s after.
        workload("a", 0, QuotaReserved=5, Admitted=11, cluster="w1"),
        # A LeaderWorkerSet's other group: reserved at once, its copy made 20 s later (once
        # its primary was admitted), then at once.
        workload("g", 0, QuotaReserved=1, Admitted=22, cluster="w2"),
        # Never taken by a worker: no parts.
        workload("p", 0, QuotaReserved=2),
    ]
    workers = {
        "w1": [
            workload("a", 8, uid="a1", origin=True, QuotaReserved=10, Admitted=10),
            workload("local", 0, uid="l", QuotaReserved=0, Admitted=0),
        ],
        # A copy that lost the race does not count, though admitted sooner.
        "w2": [
            workload("a", 6, uid="a2", origin=True, QuotaReserved=6, Admitted=6),
            workload("g", 21, uid="g2", origin=True, QuotaReserved=21, Admitted=21),
        ],
    }
    parts = wait_parts(manager, workers)
    assert parts == {"team-a/a": (5.0, 3.0, 2.0), "team-a/g": (1.0, 20.0, 0.0)}
    # The parts after the manager's queue add up to the wait measure() takes.
    waits = sorted(p[1] + p[2] for p in parts.values())
    assert measure(manager, workers)["p50"] == waits[0]


def test_the_wait_parts_of_a_kept_run_print_as_tables(tmp_path: Path) -> None:
    manager = [workload("a", 0, QuotaReserved=5, Admitted=11, cluster="w1")]
    worker = [workload("a", 8, uid="a1", origin=True, QuotaReserved=10, Admitted=10)]
    kept = tmp_path / "5-policy.json"
    kept.write_text(json.dumps({"": manager, "w1": worker}))
    text = wait_parts_cli.report(kept, longest=3)
    assert "| to the worker | 3.0 | 3.0 | 3.0 | 3.0 | 3.0 |" in text
    assert "| worker queue | 2.0 |" in text
    assert "| a | 5 | 3 | 2 | 5 |" in text


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("[]", "no manager Workloads"),
        ('{"": [], "w1": []}', "no workload with its taken copy"),
        ("{", "Expecting"),
    ],
)
def test_a_file_that_is_no_kept_run_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, says: str
) -> None:
    kept = tmp_path / "1-policy.json"
    kept.write_text(content)
    assert wait_parts_cli.main([str(kept)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {kept}: not a file of --keep-workloads") and says in err
    assert err.count("\n") == 1
