"""The parts of `mkf job` and `mkf logs` that need no cluster: names as written, a Workload's
state, durations as kubectl writes them, which pods and containers are read. The commands
themselves run against emulated clusters (tests/emulated/test_job_trail.py) and on kind."""

from __future__ import annotations

import argparse

import pytest

from components.cli.job_args import JOB_KINDS, duration
from components.cli.job_logs import NotYet, Source, choose
from components.cli.job_trail import (
    JobTrail,
    JobTrailError,
    Pod,
    WorkerSide,
    WorkloadTrail,
    split_name,
    workload_state,
)


def test_names_as_written() -> None:
    assert split_name("default/sample-job", None) == ("default", "sample-job")
    assert split_name("sample-job", None) == ("default", "sample-job")
    assert split_name("sample-job", "team-a") == ("team-a", "sample-job")
    assert split_name("team-a/sample-job", "team-a") == ("team-a", "sample-job")
    for bad, namespace, said in (
        ("team-a/x", "team-b", "names namespace team-a and --namespace says team-b"),
        ("team-a/", None, "is not a job's NAME or NAMESPACE/NAME"),
        ("a/b/c", None, "is not a job's NAME or NAMESPACE/NAME"),
    ):
        with pytest.raises(JobTrailError, match=said):
            split_name(bad, namespace)


def _wl(*conditions: tuple[str, str, str]) -> dict:
    return {
        "status": {"conditions": [{"type": t, "status": s, "reason": r} for t, s, r in conditions]}
    }


def test_a_workloads_state_is_its_most_telling_true_condition() -> None:
    assert workload_state({}) == "Pending"
    assert workload_state(_wl(("QuotaReserved", "False", "Pending"))) == "Pending"
    assert workload_state(_wl(("QuotaReserved", "True", "QuotaReserved"))) == "QuotaReserved"
    admitted = _wl(("QuotaReserved", "True", "x"), ("Admitted", "True", "Admitted"))
    assert workload_state(admitted) == "Admitted"
    failed = _wl(("Admitted", "True", "x"), ("Finished", "True", "Failed"))
    assert workload_state(failed) == "Finished (Failed)"
    assert workload_state(_wl(("Evicted", "True", "Preempted"))) == "Evicted (Preempted)"


def test_durations_as_kubectl_writes_them() -> None:
    assert [duration(t) for t in ("30s", "5m", "1h", "1h30m", "2m5s")] == [30, 300, 3600, 5400, 125]
    for bad in ("", "5", "soon", "-5m", "0s", "5d"):
        with pytest.raises(argparse.ArgumentTypeError):
            duration(bad)


def test_every_kind_has_a_pod_selector_from_its_copy_on_the_worker() -> None:
    copy = {"metadata": {"name": "x", "uid": "u-1"}}
    selectors = {k.key: k.pods(copy) for k in JOB_KINDS}
    assert selectors["job"] == "batch.kubernetes.io/controller-uid=u-1"
    assert selectors["jobset"] == selectors["trainjob"] == "jobset.sigs.k8s.io/jobset-name=x"
    assert selectors["leaderworkerset"] == "leaderworkerset.sigs.k8s.io/name=x"
    assert selectors["pytorchjob"] == selectors["mpijob"] == "training.kubeflow.org/job-name=x"
    assert len({k.key for k in JOB_KINDS}) == len(JOB_KINDS)


def _pod(name: str, phase: str = "Running", containers: tuple[str, ...] = ("main",)) -> Pod:
    return Pod(name, phase, 0, "node", list(containers), containers[-1], "t")


def _trail(*pods: Pod, admitted: str = "w1", finished: bool = False) -> JobTrail:
    since = {"Finished": "t"} if finished else {}
    side = WorkerSide(admitted, "Admitted", True, list(pods))
    wl = WorkloadTrail("wl", "q", "Admitted", [], admitted, since, [side] if admitted else [])
    return JobTrail("default", "job", "Job", "manager", "t", [wl], [])


def test_which_pods_and_containers_are_read() -> None:
    notes: list[str] = []
    two = _trail(_pod("a"), _pod("b"))
    assert choose(two, None, False, None, notes.append) == [Source("w1", "a", "main")]
    assert notes == [
        "note: showing pod a, the first of 2: --all-pods shows every pod, --pod NAME one"
    ]
    assert [s.pod for s in choose(two, None, True, None, notes.append)] == ["a", "b"]
    assert choose(two, "b", False, None, notes.append) == [Source("w1", "b", "main")]
    # Several containers: the pod's default one, said, unless -c names one.
    notes.clear()
    sidecar = _trail(_pod("a", containers=("init", "main")))
    assert choose(sidecar, None, False, None, notes.append) == [Source("w1", "a", "main")]
    assert notes == ['note: defaulted container "main" out of: init, main (-c NAME picks one)']
    assert choose(sidecar, None, False, "init", notes.append) == [Source("w1", "a", "init")]
    # Not yet: waited for; gone: said why.
    with pytest.raises(NotYet, match="has not been admitted on any worker yet"):
        choose(_trail(admitted=""), None, False, None, notes.append)
    with pytest.raises(NotYet, match="has no pods there yet"):
        choose(_trail(), None, False, None, notes.append)
    with pytest.raises(NotYet, match="pod a of Job default/job is Pending"):
        choose(_trail(_pod("a", "Pending")), None, False, None, notes.append)
    with pytest.raises(JobTrailError, match="MultiKueue removed its copy there") as gone:
        choose(_trail(finished=True), None, False, None, notes.append)
    assert not isinstance(gone.value, NotYet)
