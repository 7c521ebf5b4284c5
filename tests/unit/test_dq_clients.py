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

from dq_clients import Bucket, Clients  # noqa: E402
from dq_dispatchers import AllAtOnce  # noqa: E402
from dq_sim import Copy, Settings, Sim  # noqa: E402
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


def test_an_external_dispatchers_nomination_comes_its_delay_after_the_reservation() -> None:
    """Ours nominates `nomination_delay` after the manager reserves (the watch, the decision
    and the write), and the reconcile the reservation started has read every worker by then:
    one read more per worker than AllAtOnce, whose nomination is that reconcile. Without the
    delay ours nominates at the reservation, as section 4's model has it."""
    from dq_dispatchers import OurPolicy

    workers = (WorkerSpec("worker-00", 8, 32), WorkerSpec("worker-01", 8, 32))
    scenario = Scenario("one", "", workers, (Job("job-00", 0.0, res(1, 1), 10.0),), ())
    limited = {"worker_qps": 5.0, "worker_burst": 10}
    ours = Sim(scenario, OurPolicy(), Settings(nomination_delay=2.5, **limited)).run()
    kueue = Sim(scenario, AllAtOnce(), Settings(nomination_delay=2.5, **limited)).run()
    assert ours.wls[0].nominated_at == 2.5 and kueue.wls[0].nominated_at == 0.0
    assert ours.wls[0].admitted_at == 2.5 + 2.0  # its worker's Kueue, admission_delay on
    at_once = Sim(scenario, OurPolicy(), Settings(**limited)).run()
    assert at_once.wls[0].nominated_at == 0.0
    more = {w: n - at_once.clients.requests[w] for w, n in ours.clients.requests.items()}
    assert more == {"worker-00": 1, "worker-01": 1}
