"""The model of Kueue v0.19.2's clients from the manager to its workers
(bench/dq_clients.py) and what the simulation does with it (bench/dq_sim.py): requests
wait for a token bucket's tokens in the order asked, as client-go's flowcontrol does with
golang.org/x/time/rate, and a copy's pods start once the manager has made its job."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from dq_clients import JOB, METADATA, Bucket, Clients  # noqa: E402
from dq_dispatchers import AllAtOnce  # noqa: E402
from dq_sim import BATCH, Copy, Settings, Sim  # noqa: E402
from dq_trace import Job, Scenario, WorkerSpec, res  # noqa: E402


def test_a_bucket_serves_its_burst_at_once_then_its_rate_in_the_order_asked() -> None:
    bucket = Bucket(qps=5.0, burst=10)
    assert [bucket.reserve(0.0) for _ in range(10)] == [0.0] * 10
    # Into debt: the 11th and 12th wait one and two fifths of a second.
    assert bucket.reserve(0.0) == pytest.approx(0.2)
    assert bucket.reserve(0.0) == pytest.approx(0.4)
    # Three seconds later 15 tokens came back, less the 2 owed, up to the burst.
    assert bucket.reserve(3.0, 10) == 0.0
    assert bucket.reserve(3.0, 5) == pytest.approx(1.0)


def test_a_reconcile_reads_from_every_worker_in_turn() -> None:
    clients = Clients(["w1", "w2"], qps=1.0, burst=1)
    assert clients.read_group(0.0) == 0.0  # each bucket's one token
    # w1's read waits a second; w2's, asked for only then, finds its token back.
    assert clients.read_group(0.0) == pytest.approx(1.0)
    assert clients.requests == {"w1": 2, "w2": 2}
    unlimited = Clients(["w1", "w2"], qps=0.0, burst=10)
    assert [unlimited.read_group(5.0) for _ in range(100)] == [5.0] * 100


def _burst(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> tuple[Sim, list[Copy]]:
    """The run, and every copy it made (their `created`: when they reached the worker)."""
    made: list[Copy] = []
    copy = Sim._copy

    def spy(self: Sim, *args: Any, **kwargs: Any) -> Copy:
        made.append(copy(self, *args, **kwargs))
        return made[-1]

    monkeypatch.setattr(Sim, "_copy", spy)
    workers = tuple(WorkerSpec(f"worker-{i:02}", 64, 256) for i in range(2))
    jobs = tuple(Job(f"job-{i:02}", 0.0, res(1, 1), 60.0) for i in range(40))
    return Sim(Scenario("burst", "", workers, jobs, ()), AllAtOnce(), settings).run(), made


def test_copies_made_in_a_burst_reach_their_workers_at_the_clients_rate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """40 workloads at once, AllAtOnce on two workers: each nomination's reconcile reads
    both workers and creates a copy on each, so each worker's client is asked for 80
    requests at once; past its burst of 10 they go out at 5 a second, the last copy no
    sooner than 14 s after the first. Unlimited, every copy is made at once."""
    limited, made = _burst(Settings(worker_qps=5.0, worker_burst=10), monkeypatch)
    created = sorted(c.created for c in made)
    assert len(made) == 80 and created[0] == 0.0 and created[-1] >= (80 - 10) / 5
    assert all(n >= 80 for n in limited.clients.requests.values())
    _, made = _burst(Settings(), monkeypatch)
    assert len(made) == 80 and {c.created for c in made} == {0.0}
    # Everything still runs: the limit delays, it loses nothing.
    assert all(wl.finished_at is not None for wl in limited.wls)


def test_a_copys_pods_start_when_the_manager_has_made_its_job() -> None:
    """Nominated at 0, admitted on the worker at 2 (admission_delay), seen by the manager
    at 3 (sync_delay): with job_on_seen its job is made then and runs its 10 s from there;
    without, it ran from the admission."""
    workers = (WorkerSpec("worker-00", 8, 32),)
    scenario = Scenario("one", "", workers, (Job("job-00", 0.0, res(1, 1), 10.0),), ())
    before = Sim(scenario, AllAtOnce(), Settings()).run().wls[0]
    after = Sim(scenario, AllAtOnce(), Settings(job_on_seen=True)).run().wls[0]
    assert (before.admitted_at, before.finished_at) == (2.0, 12.0)
    assert (after.admitted_at, after.finished_at) == (2.0, 13.0)


def _read_groups(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """When each read group of the runs that follow starts."""
    reads: list[float] = []
    read_group = Clients.read_group

    def spy(self: Clients, at: float) -> float:
        reads.append(at)
        return read_group(self, at)

    monkeypatch.setattr(Clients, "read_group", spy)
    return reads


def test_an_external_dispatchers_nomination_comes_its_delay_after_the_reservation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ours nominates `nomination_delay` after the manager reserves (the watch, the decision
    and the write), and the reconcile the reservation started has read every worker by then;
    AllAtOnce's nomination is that reconcile. Without the delay ours nominates at the
    reservation, as section 4's model has it."""
    from dq_dispatchers import OurPolicy

    reads = _read_groups(monkeypatch)
    workers = (WorkerSpec("worker-00", 8, 32), WorkerSpec("worker-01", 8, 32))
    scenario = Scenario("one", "", workers, (Job("job-00", 0.0, res(1, 1), 10.0),), ())
    limited = {"worker_qps": 5.0, "worker_burst": 10}
    ours = Sim(scenario, OurPolicy(), Settings(nomination_delay=2.5, **limited)).run()
    assert ours.wls[0].nominated_at == 2.5
    assert ours.wls[0].admitted_at == 2.5 + 2.0  # its worker's Kueue, admission_delay on
    # Its creation's reconcile, into which its reservation's folded (asked for before that
    # one ran), then the nomination's.
    assert reads[:2] == [0.0, 2.5]
    kueue = Sim(scenario, AllAtOnce(), Settings(nomination_delay=2.5, **limited)).run()
    assert kueue.wls[0].nominated_at == 0.0
    at_once = Sim(scenario, OurPolicy(), Settings(**limited)).run()
    assert at_once.wls[0].nominated_at == 0.0


def test_each_kind_has_a_rate_limiter_of_its_own() -> None:
    """client-go gives every REST client its own token bucket, and controller-runtime makes
    one per kind and one for metadata reads: a worker's Job requests do not wait behind its
    Workload requests."""
    clients = Clients(["w1"], qps=1.0, burst=1)
    assert clients.send("w1", 0.0) == 0.0
    assert clients.send("w1", 0.0, 1, JOB) == 0.0
    assert clients.send("w1", 0.0, 1, METADATA) == 0.0
    assert clients.send("w1", 0.0) == pytest.approx(1.0)  # the Workload bucket's second
    # A removal: the ownership GET, the job's Delete, then the Workload's, each in its turn.
    assert clients.remove("w1", 0.0, job=True) == pytest.approx(2.0)
    assert clients.requests == {"w1": 7}


def _one_job(clients: dict[str, Any]) -> Sim:
    workers = (WorkerSpec("worker-00", 8, 32), WorkerSpec("worker-01", 8, 32))
    scenario = Scenario("one", "", workers, (Job("job-00", 0.0, res(1, 1), 10.0),), ())
    return Sim(scenario, AllAtOnce(), Settings(**clients))


def test_worker_events_fold_into_one_reconcile_and_wait_for_the_one_running() -> None:
    """Events of a workload's objects on the workers within a second are one reconcile a
    second after the first (UpdatesBatchPeriod); one asked for while a reconcile of the
    same workload still waits for its tokens starts when that one ends."""
    sim = _one_job({"worker_qps": 5.0, "worker_burst": 10})
    sim.run()
    wl = sim.wls[0]
    sim.events.clear()
    sim.queued.clear()
    sim.busy.clear()
    sim.now = 100.0
    sim._request(wl, BATCH)
    sim.now = 100.5
    sim._request(wl, BATCH)
    assert [(t, kind) for t, _, kind, _ in sim.events] == [(101.0, "reconcile")]
    sim.events.clear()
    sim.queued.clear()
    sim.busy[wl.key] = 107.0
    sim.now = 102.0
    sim._request(wl, 0.0)  # an update of the manager's Workload, while one runs
    assert [(t, kind) for t, _, kind, _ in sim.events] == [(107.0, "reconcile")]
    # Unlimited, a reconcile that changes nothing costs nothing, and is not run.
    free = _one_job({}).run()
    free.events.clear()
    free._request(free.wls[0], BATCH)
    assert free.events == []


def test_a_workloads_life_reads_every_worker_on_each_of_its_reconciles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One Job, AllAtOnce on two workers, nothing else running. A reconcile reads its
    Workload from both workers: at 0 the nomination's (copies made on both) and its
    creation's, into which its reservation, Kueue's own write of the list and the copies'
    creation fold; at 3 each copy's admission seen (both were admitted at 2), then the
    manager's two writes that follow (clusterName, Admitted) folded into one; at 4 a second
    after its job was made, the losing copy's deletion folded in; at 13, the job having
    ended at 12, the manager's Finished and the worker's events; at 14 the deletions'."""
    reads = _read_groups(monkeypatch)
    sim = _one_job({"worker_qps": 5.0, "worker_burst": 10}).run()
    assert (sim.wls[0].admitted_at, sim.wls[0].finished_at) == (2.0, 12.0)
    assert reads == [0.0, 0.0, 3.0, 3.0, 3.0, 4.0, 13.0, 13.0, 14.0]
    assert sim.clients.reads == 2 * len(reads)
