"""The dispatch-quality simulation (bench/dispatch_quality.py) keeps Kueue v0.19.2's rules
and runs the project's real policy. Small seeded runs; no timing is asserted."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import dispatch_quality  # noqa: E402
import dq_sim  # noqa: E402
from dq_dispatchers import AllAtOnce, Dispatcher, Incremental, OurPolicy  # noqa: E402
from dq_sim import Settings, Sim, Worker  # noqa: E402
from dq_trace import (  # noqa: E402
    Job,
    LocalJob,
    Scenario,
    TraceError,
    fleet,
    read_csv,
    res,
    scenario,
)

import controller.policy  # noqa: E402


def small(n: int = 4, jobs: int = 30) -> Scenario:
    """`n` workers, local work of both priorities, and jobs big enough to queue and preempt."""
    workers = fleet(n, gpu_workers=(0,))
    js = tuple(
        Job(
            f"job-{i:02}",
            i * 20.0,
            res(8 + 8 * (i % 4), 32),
            600.0 + 60 * i,
            100,
            "lws" if i % 7 == 0 else "cpu",
            2 if i % 7 == 0 else 1,
        )
        for i in range(jobs)
    )
    local = tuple(
        LocalJob(w.name, i * 30.0, res(16, 64), 900.0, 200 if i % 3 == 0 else 0)
        for w in workers
        for i in range(8)
    )
    return Scenario("small", "test", workers, js, local)


@pytest.fixture(params=["AllAtOnce", "Incremental", "policy"])
def dispatcher(request: pytest.FixtureRequest) -> Dispatcher:
    return {"AllAtOnce": AllAtOnce, "Incremental": Incremental, "policy": OurPolicy}[
        request.param
    ]()


def test_quota_is_never_over_committed_on_a_worker(
    dispatcher: Dispatcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    charged = Worker.charge
    checked = []

    def charge(self: Worker, copy: dq_sim.Copy, sign: int) -> None:
        charged(self, copy, sign)
        for group in self.groups:
            for flavor, nominal in group:
                for r, a in self.used[flavor].items():
                    assert 0 <= a <= nominal[r], f"{self.spec.name} {flavor} {r}: {a}"
        checked.append(sign)

    monkeypatch.setattr(Worker, "charge", charge)
    Sim(small(), dispatcher, Settings()).run()
    assert 1 in checked and -1 in checked


def test_every_admitted_workload_is_admitted_once_per_eviction(
    dispatcher: Dispatcher,
) -> None:
    sim = Sim(small(), dispatcher, Settings()).run()
    admissions: dict[str, list[str]] = {}
    for key, cluster in sim.stats.admitted:
        admissions.setdefault(key, []).append(cluster)
    assert admissions, "nothing was admitted"
    for wl in sim.wls:
        if wl.admitted_at is not None:
            assert len(admissions[wl.key]) == wl.evictions + 1, wl.key
    # A LeaderWorkerSet group runs on one cluster (workload.go syncToSingleCluster).
    for name, members in sim.groups.items():
        clusters = {m.cluster for m in members if m.cluster}
        assert len(clusters) <= 1, name


def test_all_at_once_creates_a_copy_on_every_worker() -> None:
    sim = Sim(small(5), AllAtOnce(), Settings()).run()
    first: dict[str, tuple[str, ...]] = {}
    for _, key, chosen in sim.stats.nominations:
        first.setdefault(key, chosen)
    primaries = [w for w in sim.wls if w.index == 0 and w.key in first]
    assert primaries
    for wl in primaries:
        assert sorted(first[wl.key]) == [f"worker-{i:02}" for i in range(5)]
    assert sim.stats.copies >= 5 * len(primaries)


def test_incremental_adds_three_clusters_per_five_minute_round() -> None:
    """incrementaldispatcher.go: DefaultStepSize 3, a 5-minute round, alphabetical order."""
    workers = tuple(reversed(fleet(10)))  # config order must not matter, names do
    # 100 cores: within the manager's quota (the fleet's 640), on no single worker (64).
    job = Job("job-00", 0.0, res(100, 100), 60.0)
    sim = Sim(Scenario("never-fits", "", workers, (job,)), Incremental(), Settings())
    sim.s.horizon = 3600.0
    sim.run()
    rounds = [(t, chosen) for t, _, chosen in sim.stats.nominations]
    assert [len(c) for _, c in rounds] == [3, 6, 9, 10]
    assert [t for t, _ in rounds] == [0.0, 300.0, 600.0, 900.0]
    assert rounds[0][1] == ("worker-00", "worker-01", "worker-02")
    assert rounds[-1][1][:6] == rounds[1][1]  # appended, never replaced
    assert sim.wls[0].admitted_at is None


def test_the_real_policy_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    real = controller.policy.decide
    calls = []

    def spy(*args: object, **kwargs: object) -> object:
        calls.append(args[0])
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(controller.policy, "decide", spy)
    sim = Sim(small(), OurPolicy(), Settings()).run()
    assert calls and sim.stats.decisions >= len({v.key for v in calls})
    # The in-flight demand is the controller's own index, emptied as workloads are admitted.
    assert isinstance(sim.d.in_flight, controller.policy.InFlightIndex)  # type: ignore[attr-defined]
    assert len(sim.d.in_flight) == 0  # type: ignore[attr-defined]


def test_runs_are_reproducible() -> None:
    sc = scenario("balanced-3")
    assert sc == scenario("balanced-3")
    a = dispatch_quality.measure(Sim(small(), OurPolicy(), Settings()).run())
    b = dispatch_quality.measure(Sim(small(), OurPolicy(), Settings()).run())
    for key in ("waits", "copies", "preemptions", "never", "makespan"):
        assert a[key] == b[key]


GOOD = "arrival,cpu,memory,gpu,pods,duration,priority\n0,2,8Gi,0,1,600,100\n5,500m,1Gi,1,4,60,0\n"


def test_the_csv_reader_replays_a_trace(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(GOOD)
    sc = read_csv(path, fleet(3, gpu_workers=(1,)))
    assert [j.arrival for j in sc.jobs] == [0.0, 5.0]
    assert sc.jobs[1].requests == res(2, 4, 4)
    sim = Sim(sc, AllAtOnce(), Settings()).run()
    assert all(w.finished_at is not None for w in sim.wls)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a,b\n", "trace.csv:1: the header is a,b; write arrival,cpu,memory"),
        ("", "trace.csv:1: the header is missing"),
        (GOOD + "9,2,8Gx,0,1,60,0\n", "trace.csv:4: column memory: '8Gx' is not valid; write 8Gi"),
        (GOOD + "9,2,8Gi,0,1\n", "trace.csv:4: 5 columns, expected 7"),
        (GOOD + "9,2,8Gi,0,0,60,0\n", "trace.csv:4: column pods: must be at least 1"),
        (GOOD + "9,2,8Gi,0.5,1,60,0\n", "trace.csv:4: column gpu: '0.5' is not a whole number"),
        (GOOD + "9,2,8Gi,0,1,0,0\n", "trace.csv:4: column duration: must be more than 0"),
        (GOOD + "-1,2,8Gi,0,1,6,0\n", "trace.csv:4: column arrival: '-1' is not valid"),
    ],
)
def test_the_csv_reader_says_what_is_wrong_and_where(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(text)
    with pytest.raises(TraceError) as err:
        read_csv(path, fleet(3))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_a_bad_trace_is_one_line_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "trace.csv"
    path.write_text("nope\n")
    assert dispatch_quality.main(["--scenarios", "--csv", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "trace.csv:1: the header is nope" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--scenarios"], "error: nothing to run; name --scenarios or give --csv FILE\n"),
        (["--staleness", "0"], "error: --staleness must be more than 0 s"),
        (["--csv-workers", "0"], "--csv-workers at least 1\n"),
    ],
)
def test_bad_options_are_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert dispatch_quality.main(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_the_command_writes_tables_targets_and_a_chart(tmp_path: Path) -> None:
    """The whole report on a tiny trace: every dispatcher has a row, the chart is a PNG."""
    path = tmp_path / "trace.csv"
    path.write_text(GOOD)
    chart = tmp_path / "chart.png"
    assert dispatch_quality.main(["--scenarios", "--csv", str(path), "--chart", str(chart)]) == 0
    assert chart.read_bytes().startswith(b"\x89PNG")


def test_the_policy_sees_each_worker_queues_strategy_and_preemption() -> None:
    """The snapshot the policy reads carries what the controller reads from a worker's
    ClusterQueue: spec.queueingStrategy, spec.preemption.withinClusterQueue and
    status.pendingWorkloads (local work included)."""
    sc = small()
    for spec in sc.workers:
        queue = Worker(spec).view().queues["cq"]
        assert queue.strict_fifo == (spec.queueing == "StrictFIFO")
        assert queue.preempts == (spec.preemption != "Never")
    assert {Worker(s).view().queues["cq"].strict_fifo for s in sc.workers} == {True, False}
    assert {Worker(s).view().queues["cq"].preempts for s in sc.workers} == {True, False}
