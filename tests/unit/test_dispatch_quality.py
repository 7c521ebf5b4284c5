"""The dispatch-quality simulation (bench/dispatch_quality.py) keeps Kueue v0.19.2's rules
and runs the project's real policy. Small seeded runs; no timing is asserted."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import dispatch_quality  # noqa: E402
import dq_sim  # noqa: E402
from dq_dispatchers import AllAtOnce, Incremental, Oracle, OurPolicy, Present  # noqa: E402
from dq_sim import ADMITTED, EVICTING, Copy, Dispatcher, Settings, Sim, Worker  # noqa: E402
from dq_trace import (  # noqa: E402
    SCENARIOS,
    Job,
    LocalJob,
    Scenario,
    TraceError,
    WorkerSpec,
    fleet,
    read_csv,
    res,
    scenario,
)

import controller.in_flight_index  # noqa: E402
import controller.policy  # noqa: E402
from controller.model import Policy  # noqa: E402


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


@pytest.fixture(params=["AllAtOnce", "Incremental", "policy", "present", "oracle"])
def dispatcher(request: pytest.FixtureRequest) -> Dispatcher:
    return {
        "AllAtOnce": AllAtOnce,
        "Incremental": Incremental,
        "policy": OurPolicy,
        "present": Present,
        "oracle": Oracle,
    }[request.param]()


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


def test_incremental_adds_its_step_per_five_minute_round_in_config_order() -> None:
    """incrementaldispatcher.go: DefaultStepSize 3, a 5-minute round; the MultiKueueConfig's
    order (MultiKueueIncrementalDispatcherRespectConfigOrder is on in v0.19.2)."""
    workers = tuple(reversed(fleet(10)))  # the config lists worker-09 first
    # 100 cores: within the manager's quota (the fleet's 640), on no single worker (64).
    job = Job("job-00", 0.0, res(100, 100), 60.0)
    sc = Scenario("never-fits", "", workers, (job,))
    for step, sizes in ((3, [3, 6, 9, 10]), (4, [4, 8, 10])):
        sim = Sim(sc, Incremental(step), Settings())
        sim.s.horizon = 3600.0
        sim.run()
        rounds = [(t, chosen) for t, _, chosen in sim.stats.nominations]
        assert [len(c) for _, c in rounds] == sizes
        assert [t for t, _ in rounds] == [300.0 * i for i in range(len(sizes))]
        assert rounds[0][1] == tuple(w.name for w in workers[:step])
        assert rounds[-1][1][: 2 * step] == rounds[1][1]  # appended, never replaced
        assert sim.wls[0].admitted_at is None
    by_name = Sim(sc, Incremental(config_order=False), Settings())
    by_name.s.horizon = 10.0
    assert by_name.run().stats.nominations[0][2] == ("worker-00", "worker-01", "worker-02")


def two_workers(preemption: str = "LowerPriority") -> tuple[WorkerSpec, ...]:
    return (
        WorkerSpec("worker-00", 8, 32, preemption=preemption),
        WorkerSpec("worker-01", 8, 32, preemption=preemption),
    )


def test_copies_admitted_in_the_same_second_win_at_random_by_seed() -> None:
    """bestMatchByCondition (workload.go): the earliest Admitted lastTransitionTime, to
    the second, ties to Go's map order: over seeds, either worker wins."""
    winners = set()
    for seed in range(12):
        job = Job("job-00", 0.0, res(4, 4), 60.0)
        sc = Scenario("tie", "", two_workers(), (job,), seed=seed)
        sim = Sim(sc, AllAtOnce(), Settings()).run()
        assert len(sim.stats.admitted) == 1
        winners.add(sim.stats.admitted[0][1])
        assert sim.stats.admitted == Sim(sc, AllAtOnce(), Settings()).run().stats.admitted
    assert winners == {"worker-00", "worker-01"}


def test_the_managers_queue_keeps_no_order_of_a_set_created_in_one_second() -> None:
    """baseCompareFunc (pkg/cache/queue/cluster_queue.go, v0.19.2): priority, then the
    creation time, whole seconds, then UID. A LeaderWorkerSet's workloads, created in the
    same second, come in no order of the set's (its primary is not always first); a job
    created a second later is behind them all."""
    orders = set()
    for seed in range(16):
        jobs = (
            Job("lws-00", 0.2, res(16, 16), 60.0, 100, "lws", 3),  # fits nowhere: stays queued
            Job("job-01", 1.0, res(16, 16), 60.0),
        )
        sc = Scenario("set", "", (WorkerSpec("worker-00", 8, 32),), jobs, seed=seed)
        sim = Sim(sc, AllAtOnce(), Settings()).run()
        queued = [w.key for w in sim.manager_queue]
        assert queued[-1] == "job-01-0"
        orders.add(tuple(queued[:-1]))
        assert queued == [w.key for w in Sim(sc, AllAtOnce(), Settings()).run().manager_queue]
    assert len(orders) > 2
    assert any(order[0] != "lws-00-0" for order in orders)


def test_a_workload_its_worker_evicted_queues_behind_what_arrived_before_that() -> None:
    """GetQueueOrderTimestamp (pkg/workload/workload.go, v0.19.2): a workload evicted by
    its admission check (MultiKueue's Retry, when its copy is evicted on the worker) is
    ordered by the time of that eviction, not its creation. job-00 holds the manager's
    whole quota until local work of priority 200 preempts its copy at 100 s; job-01, which
    arrived at 50 s, takes the quota first."""
    worker = (WorkerSpec("worker-00", 8, 32),)
    jobs = (Job("job-00", 0.0, res(8, 8), 600.0), Job("job-01", 50.0, res(8, 8), 600.0))
    local = (LocalJob("worker-00", 100.0, res(8, 8), 300.0, 200),)
    sim = Sim(Scenario("requeue", "", worker, jobs, local), AllAtOnce(), Settings()).run()
    first, second = sim.wls
    assert first.evictions == 1 and first.queued is not None and first.queued > 100.0
    assert second.first_reserved == pytest.approx(first.queued)
    assert first.finished_at is not None and second.finished_at is not None
    assert second.finished_at < first.finished_at  # job-01 ran first


def test_preemption_admits_only_after_the_victims_quota_is_released(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """scheduler.go 493-497: preempting is not admitting; the preemptor waits for its
    victims to go, and what is behind it does not take the room meanwhile (its usage is
    held for the rest of each cycle)."""
    worker = (WorkerSpec("worker-00", 8, 32),)
    local = (
        LocalJob("worker-00", 0.0, res(6, 6), 3600.0, 0),
        LocalJob("worker-00", 11.0, res(2, 2), 600.0, 0),  # fits in the 2 cores left free
    )
    job = Job("job-00", 10.0, res(8, 8), 60.0)
    admitted: dict[int, float] = {}  # cores -> first admission
    charge = Worker.charge

    def spy(self: Worker, copy: Copy, sign: int) -> None:
        if sign > 0 and copy.state == ADMITTED:
            admitted.setdefault(copy.requests["cpu"], sim.now)
        charge(self, copy, sign)

    monkeypatch.setattr(Worker, "charge", spy)
    sim = Sim(Scenario("p", "", worker, (job,), local), OurPolicy(), Settings(release_delay=20.0))
    sim.run()
    assert sim.stats.preemptions == 1
    # Who preempted whom, as bench/fleet_metrics.py preemptions_of lists a real run's.
    assert sim.stats.victims == [(12.0, "worker-00", "local/1", "job-00-0")]
    # Nominated at 10 s; the cycle at 12 s evicts; the victim's pods are gone at 32 s; the
    # cycle that release starts admits it at 34 s.
    assert sim.wls[0].admitted_at == pytest.approx(10.0 + 2.0 + 20.0 + 2.0)
    assert admitted[2000] > sim.wls[0].admitted_at


def test_a_victim_already_being_evicted_is_not_evicted_again() -> None:
    sim = Sim(Scenario("x", "", (WorkerSpec("worker-00", 8, 32),), ()), AllAtOnce(), Settings())
    worker = sim.workers["worker-00"]
    victim = Copy("local/1", "worker-00", res(8, 8), 0, 0.0, 3600.0)
    victim.flavors = {"cpu": "default", "memory": "default"}
    victim.state, victim.admitted_at = ADMITTED, 0.0
    worker.charge(victim, 1)
    worker.running.append(victim)
    first = Copy("local/2", "worker-00", res(8, 8), 100, 1.0, 60.0)
    worker.pending.append(first)
    sim._pass(worker)
    assert victim.state == EVICTING and first.state == "pending"
    evicted_at = [e for e in sim.events if e[2] == "release"]
    sim._pass(worker)  # the next cycle: the same victim, already on its way out
    assert [e for e in sim.events if e[2] == "release"] == evicted_at


def test_a_deleted_copy_holds_its_quota_until_its_pods_are_gone() -> None:
    """Losing copies are deleted, not vanished: an admitted loser releases its quota
    `release_delay` after the deletion reaches its worker."""
    job = Job("job-00", 0.0, res(8, 8), 600.0)
    sc = Scenario("tie", "", two_workers(), (job,), seed=3)
    settings = Settings(release_delay=30.0)
    sim = Sim(sc, AllAtOnce(), settings)
    held: list[tuple[float, int]] = []
    release = sim._release

    def spy(copy: Copy) -> None:
        held.append((sim.now, copy.requests["cpu"]))
        release(copy)

    sim._release = spy  # type: ignore[method-assign]
    sim.run()
    # Both admitted at 2 s; the manager picks one at 3 s and deletes the other, which its
    # worker sees at 4 s and whose pods are gone at 34 s.
    assert held == [(2.0 + 1.0 + 1.0 + 30.0, 8000)]
    assert sim.stats.wasted_admissions == 1


def test_the_oracle_nominates_one_cluster_where_it_is_admitted_soonest() -> None:
    """worker-00 is full of work that ends at 600 s, worker-01 of work ending at 60 s:
    the oracle waits on worker-01, as no dispatcher reading quota alone could know."""
    workers = two_workers("Never")
    local = (
        LocalJob("worker-00", 0.0, res(8, 8), 600.0, 0),
        LocalJob("worker-01", 0.0, res(8, 8), 60.0, 0),
    )
    job = Job("job-00", 10.0, res(8, 8), 60.0)
    sim = Sim(Scenario("wait", "", workers, (job,), local), Oracle(), Settings()).run()
    assert {chosen for _, _, chosen in sim.stats.nominations} == {("worker-01",)}
    assert sim.stats.admitted == [("job-00-0", "worker-01")]


@pytest.mark.parametrize("short", ["worker-00", "worker-01"])
def test_the_present_bound_knows_no_run_times(short: str) -> None:
    """The same fleet as above, whichever worker's work ends first: `present` sees one
    copy running on each, as likely to end next, and waits where the config lists first
    (the oracle follows the short one). With two copies running on worker-00 and one on
    worker-01, either ending frees worker-00's share only half as likely: it waits on
    worker-01."""
    workers = two_workers("Never")
    local = tuple(
        LocalJob(w, 0.0, res(8, 8), 60.0 if w == short else 600.0, 0)
        for w in ("worker-00", "worker-01")
    )
    job = Job("job-00", 10.0, res(8, 8), 60.0)
    for dispatcher, waits_on in ((Present(), "worker-00"), (Oracle(), short)):
        sim = Sim(Scenario("wait", "", workers, (job,), local), dispatcher, Settings()).run()
        assert sim.stats.nominations[0][2] == (waits_on,), dispatcher.name
    halves = (
        LocalJob("worker-00", 0.0, res(4, 4), 600.0, 0),
        LocalJob("worker-00", 0.0, res(4, 4), 600.0, 0),
        LocalJob("worker-01", 0.0, res(8, 8), 600.0, 0),
    )
    sim = Sim(Scenario("wait", "", workers, (job,), halves), Present(), Settings()).run()
    assert sim.stats.nominations[0][2] == ("worker-01",)


def test_the_real_policy_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    real = controller.policy.decide
    calls = []

    def spy(*args: object, **kwargs: object) -> object:
        calls.append(args[0])
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(controller.policy, "decide", spy)
    sim = Sim(small(), OurPolicy(), Settings()).run()
    assert calls and sim.stats.decisions >= len({v.key for v in calls})
    # The in-flight demand is the controller's own index, emptied as workloads are admitted
    # and a view that shows them is decided on: what is left was admitted after the last
    # view decided on was read, and counts only on the worker that admitted it.
    index = sim.d.in_flight  # type: ignore[attr-defined]
    assert isinstance(index, controller.in_flight_index.InFlightIndex)
    by_key = {f"team/{w.key}": w for w in sim.wls}
    for key in index.workloads():
        wl = by_key[key]
        assert wl.cluster and index.clusters_of(key) == {wl.cluster}
        assert wl.admitted_at is not None and wl.admitted_at > sim.d.read_at  # type: ignore[attr-defined]
    assert len(index) <= 1


def test_an_admitted_workload_counts_on_its_worker_until_the_view_shows_it() -> None:
    """The controller's accounting (controller/in_flight.py): admitted between two reads of
    the workers, a workload's demand still counts there, and only there; once a view read
    after the admission is decided on, nowhere."""
    workers = two_workers("Never")
    jobs = (Job("job-00", 0.0, res(4, 4), 600.0), Job("job-01", 30.0, res(4, 4), 600.0))
    policy = OurPolicy()
    counted: list[set[str]] = []
    real = policy.nominate

    def spy(sim: Sim, wl: dq_sim.Wl) -> tuple[str, ...]:
        chosen = real(sim, wl)
        counted.append(policy.in_flight.clusters_of("team/job-00-0"))
        return chosen

    policy.nominate = spy  # type: ignore[method-assign]
    Sim(Scenario("seen", "", workers, jobs, ()), policy, Settings()).run()
    assert counted[0] == {"worker-00"}  # nominated where it fits
    assert set() in counted[1:]  # gone once a view read after its admission is decided on


def test_a_sets_other_groups_count_where_its_primary_was_admitted() -> None:
    """The controller's accounting of a LeaderWorkerSet (controller/in_flight.py
    InFlightDemand._follow): once its primary's copy holds quota on a worker, the other
    groups' demand counts there, each until a view shows its own copy; so a job of 4 cores
    arriving meanwhile goes to the other worker, not to the one the set is filling. Here
    the manager's clients are slow enough (Kueue v0.19.2's 5 requests/s) that the groups
    reach the worker seconds after their primary."""
    workers = two_workers("Never")
    jobs = (
        Job("lws-00", 0.0, res(2, 2), 600.0, 100, "lws", 3),
        Job("job-01", 5.0, res(4, 4), 600.0),
    )
    policy = OurPolicy()
    seen: dict[str, set[str]] = {}
    real = policy.nominate

    def spy(sim: Sim, wl: dq_sim.Wl) -> tuple[str, ...]:
        chosen = real(sim, wl)
        if wl.key == "job-01-0" and "job" not in seen:
            seen["job"] = set(chosen)
            seen["lws"] = {m.cluster or "" for m in sim.groups["lws-00"]}
            seen["following"] = {
                i.cluster
                for m in ("team/lws-00-1", "team/lws-00-2")
                for i in policy.in_flight.items(m)
            }
        return chosen

    policy.nominate = spy  # type: ignore[method-assign]
    sim = Sim(Scenario("set", "", workers, jobs, ()), policy, Settings(staleness=1.0)).run()
    (primary,) = seen["lws"] - {""}
    assert seen["following"] == {primary}  # counted there before their copies are seen
    assert seen["job"] and primary not in seen["job"]
    assert {m.cluster for m in sim.groups["lws-00"]} == {primary}
    assert not policy.in_flight.workloads() and not policy._following


def test_runs_are_reproducible_and_seeds_differ() -> None:
    sc = scenario("balanced-3")
    assert sc == scenario("balanced-3")
    assert scenario("balanced-3", 2).jobs != sc.jobs
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
        (["--scenarios"], "error: nothing to run; name --scenario or give --csv FILE\n"),
        (["--staleness", "0"], "error: --staleness must be more than 0 s"),
        (["--csv-workers", "0"], "--csv-workers, --seeds and --jobs at least 1\n"),
        (["--seeds", "0"], "--csv-workers, --seeds and --jobs at least 1\n"),
        (["--hedge-clusters", "0"], "error: --hedge-clusters takes whole numbers from 1 (off)"),
        (["--hedge-clusters", "21"], "error: --hedge-clusters takes whole numbers from 1 (off)"),
        (["--hedge-share-percent", "0"], "--hedge-share-percent one from 1 to 100\n"),
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


def test_seeds_give_medians_with_their_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chart = tmp_path / "chart.png"
    args = ["--scenario", "balanced-3", "--seeds", "2", "--jobs", "1", "--chart", str(chart)]
    assert dispatch_quality.main(args) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith(("| AllAtOnce", "| oracle"))]
    assert len(rows) == 2 and "2 seeds" in out
    # Every cell but the name and µs/decision is "median (min-max)".
    assert all(cell.count("(") == 1 for cell in rows[0].split("|")[2:-2])
    assert "| balanced-3 |" in out and chart.read_bytes().startswith(b"\x89PNG")


def test_a_hedged_policy_gets_its_own_row_and_targets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--hedge-clusters 1 3 5` runs the policy hedging off and on 3 beside its default, each
    a row of every table and a targets table of its own; 5 is the default's own row."""
    chart = tmp_path / "chart.png"
    args = ["--scenario", "one-gpu-worker", "--seeds", "1", "--jobs", "1", "--chart", str(chart)]
    assert dispatch_quality.main([*args, "--hedge-clusters", "1", "3", "5", "3"]) == 0
    out = capsys.readouterr().out
    names = [line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| ")]
    assert names.count("policy, hedge 1") == 1 and names.count("policy, hedge 3") == 1
    assert "policy, hedge 5" not in names
    assert "| P95 policy, hedge 3 / AllAtOnce (≤ 1) |" in out
    assert "| P95 policy / AllAtOnce (≤ 1) |" in out


def test_a_strategy_gets_its_rows_and_they_use_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--strategy MostFreeQuota --hedge-clusters 1 5`: the policy spreading (hedging as the
    default does), and spreading without hedging (the default before issue 39), each a row
    beside the default's; the rows are those policies', not the default's."""
    chart = tmp_path / "chart.png"
    args = ["--scenario", "balanced-10", "--seeds", "1", "--jobs", "1", "--chart", str(chart)]
    argv = [*args, "--strategy", "MostFreeQuota", "--hedge-clusters", "1", "5"]
    assert dispatch_quality.main(argv) == 0
    out = capsys.readouterr().out
    rows = {
        cells[0]: cells[1:]
        for line in out.splitlines()
        if line.startswith("| ")
        for cells in [[c.strip() for c in line.strip("| ").split("|")]]
    }
    assert "policy, MostFreeQuota" in rows and "policy, MostFreeQuota, hedge 1" in rows
    assert "policy, MostFreeQuota, hedge 5" not in rows  # "policy, MostFreeQuota" again
    assert "| P99 policy, MostFreeQuota, hedge 1 / AllAtOnce (≤ 1) |" in out
    # Spreading places balanced-10's first seed otherwise than packing: P99 differs.
    assert rows["policy, MostFreeQuota, hedge 1"][2] != rows["policy"][2]
    assert dispatch_quality.variants("BestFit", [5], 0.9) == ()  # the default itself
    assert dispatch_quality.variants("MostFreeQuota", [1], 0.9) == (
        ("policy, MostFreeQuota", Policy(strategy="MostFreeQuota")),
        ("policy, MostFreeQuota, hedge 1", Policy(strategy="MostFreeQuota", hedge_clusters=1)),
    )


def test_the_new_scenarios_are_drawn_as_described() -> None:
    assert {"kueue-defaults", "mixed-gpu"} <= set(SCENARIOS)
    defaults = scenario("kueue-defaults", 3)
    assert {(w.queueing, w.preemption) for w in defaults.workers} == {("BestEffortFIFO", "Never")}
    mixed = scenario("mixed-gpu", 3)
    assert sorted(w.gpu for w in mixed.workers) == [1] * 16 + [8] * 4
    assert {j.requests.get("nvidia.com/gpu") for j in mixed.jobs} == {1000, 4000, 8000}
    assert mixed.uneven and mixed.seed == 3


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


def _rows(**p99: float) -> dispatch_quality.Rows:
    """One seed per dispatcher; P95 a tenth of P99, 1.2 copies, no preemptions."""
    return {
        name: [{"p95": p / 10, "p99": p, "copies": 1.2, "preemptions": 0.0}]
        for name, p in {"Incremental": 600.0, **p99}.items()
    }


@pytest.mark.parametrize(
    ("ours", "verdicts"),
    [
        (600.0, ["met", "met", "met", "met"]),  # the same tail as AllAtOnce, 1.2x the bound
        (660.0, ["met", "**missed**", "met", "met"]),  # P99 past AllAtOnce's; P95 not
        (1200.0, ["**missed**", "**missed**", "met", "**missed**"]),  # and past 1.5x the bound
    ],
)
def test_the_targets_hold_the_tail_to_all_at_once_and_to_the_present_bound(
    ours: float, verdicts: list[str]
) -> None:
    sc = scenario("balanced-3")
    rows = _rows(AllAtOnce=600.0, policy=ours, present=500.0)
    rows["policy"][0]["p95"] = 60.0 if ours < 1200 else 120.0
    line = dispatch_quality.targets({"balanced-3": (sc, rows)}).splitlines()[-1]
    cells = line.split("|")[2:-1]
    found = ["**missed**" if "**missed**" in c else "met" for c in (cells[0], cells[1], cells[2])]
    found.append("**missed**" if "**missed**" in cells[5] else "met")
    assert found == verdicts, line
    assert "0 / 0 (no preemption)" in cells[3]


def test_the_command_the_dispatcher_page_shows_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/dispatcher.md's command for measuring the strategies on your own trace, as the
    page writes it (the trace and the chart in a temporary folder)."""
    page = (ROOT / "docs" / "dispatcher.md").read_text()
    (line,) = [x for x in page.splitlines() if "bench/dispatch_quality.py --scenarios --csv" in x]
    argv = shlex.split(line)[2:]
    trace = tmp_path / "trace.csv"
    trace.write_text(GOOD)
    argv = [str(trace) if a == "trace.csv" else a for a in argv]
    assert dispatch_quality.main([*argv, "--chart", str(tmp_path / "chart.png")]) == 0
    names = {x.split("|")[1].strip() for x in capsys.readouterr().out.splitlines() if x[:2] == "| "}
    assert {"policy", "policy, MostFreeQuota", "policy, MostFreeQuota, hedge 1"} <= names
