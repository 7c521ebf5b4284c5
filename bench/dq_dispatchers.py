"""The dispatchers the simulation compares: Kueue v0.19.2's AllAtOnce and Incremental, the
project's policy through one adapter, `policy_nominate`, and an oracle, the limit of what a
dispatcher could do in this model (see bench/dq_sim.py for the rules and their upstream
files)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from dq_sim import (
    ADMITTED,
    CQ,
    EVICTING,
    PENDING,
    Copy,
    Dispatcher,
    Settings,
    Sim,
    Wl,
    Worker,
    queue_order,
)

from controller import policy as real_policy
from controller.fit_memo import FitMemo
from controller.in_flight import FOLLOWERS_UNSEEN_SECONDS
from controller.in_flight_index import InFlightIndex
from controller.model import (
    InFlight,
    Policy,
    WorkerView,
    WorkloadView,
)

# pkg/controller/workloaddispatcher/incrementaldispatcher.go at v0.19.2: DefaultStepSize,
# used unless the configuration's incrementalDispatcher.stepSize says otherwise (stepSize(),
# feature MultiKueueIncrementalDispatcherConfig, beta and on: pkg/features/kube_features.go
# lines 862-864), and incrementalDispatcherRoundTimeout.
STEP = 3
ROUND = 300.0
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
# What the `present` bound knows of run times: the median of the traces' distribution
# (bench/dq_trace.py run_time), never a workload's own.
MEDIAN_RUN_TIME = 1200.0


class AllAtOnce(Dispatcher):
    name = "AllAtOnce"

    def nominate(self, sim: Sim, wl: Wl) -> tuple[str, ...]:
        return tuple(sim.clusters)


class Incremental(Dispatcher):
    """`step` more clusters every round, appended to the earlier ones, in the
    MultiKueueConfig's order: getNextNominatedWorkers sorts them by name only when
    MultiKueueIncrementalDispatcherRespectConfigOrder is off, and in v0.19.2 it is beta and
    on (pkg/features/kube_features.go lines 865-867)."""

    def __init__(self, step: int = STEP, config_order: bool = True) -> None:
        self.step = step
        self.config_order = config_order
        self.name = "Incremental" if step == STEP else f"Incremental (step {step})"

    def nominate(self, sim: Sim, wl: Wl) -> tuple[str, ...]:
        rest = [c for c in sim.clusters if c not in wl.nominated]
        if not self.config_order:
            rest.sort()
        if rest:
            wl.round += 1
            sim.at(sim.now + ROUND, "round", (wl, wl.round))
        return wl.nominated + tuple(rest[: self.step])


def policy_nominate(
    view: WorkloadView,
    clusters: list[str],
    workers: dict[str, WorkerView],
    policy: Policy,
    in_flight: InFlightIndex,
    now: datetime,
    memo: FitMemo | None = None,
) -> tuple[str, ...]:
    """The one call into the project's policy: `controller.policy.decide`, and the in-flight
    demand recorded the way controller/in_flight.py `InFlightDemand.record` does. Returns
    the clusters to nominate."""
    decision = real_policy.decide(view, clusters, workers, policy, in_flight, now, memo)
    if not decision.nominate:
        return ()  # the controller writes nothing (a NoFeasibleCluster Event)
    in_flight.replace(
        view.key,
        [
            InFlight(view.key, v.cluster, CQ, v.flavors, view.requests)
            for v in decision.chosen
            if real_policy.takes_room(v, workers[v.cluster].queues.get(CQ))
        ],
    )
    return decision.nominate


class OurPolicy(Dispatcher):
    """The project's policy, with the in-flight accounting of controller/in_flight.py: a
    nominated workload's demand counts on each nominated worker until the worker's view
    shows its copy holding quota there, and an admitted one's on the worker that admitted
    it until then (only there); a LeaderWorkerSet's other groups count on the worker its
    primary's copy holds quota on until the view shows each of their copies there
    (InFlightDemand._follow)."""

    refreshes = True
    reads_snapshot = True
    writes_nominations = True

    def __init__(self, policy: Policy | None = None, name: str = "policy") -> None:
        self.policy = policy or Policy()
        self.name = name
        self.widen_after = self.policy.widen_after_seconds
        self.in_flight = InFlightIndex()
        self.memo = FitMemo()  # as controller/dispatcher.py keeps one; never changes a decision
        self._workloads: dict[str, Wl] = {}  # what is in flight, by its key
        # A group counted where its primary's copy holds quota -> until when (sim time).
        self._following: dict[str, float] = {}
        self.read_at = -math.inf  # when the view last decided on was read
        self._sim: Sim | None = None

    def nominate(self, sim: Sim, wl: Wl) -> tuple[str, ...]:
        self._sim = sim
        if sim.snapshot_at != self.read_at:
            self.read_at = sim.snapshot_at
            self._counted_in_view(sim)
        # A LeaderWorkerSet group's demand is the sum of its workloads.
        requests = {r: a * wl.job.parts for r, a in wl.requests.items()}
        view = WorkloadView(
            f"team/{wl.key}",
            "user-queue",
            requests,
            wl.nominated,
            EPOCH + timedelta(seconds=wl.nominated_at) if wl.nominated_at is not None else None,
            wl.job.priority,
        )
        now = EPOCH + timedelta(seconds=sim.now)
        chosen = policy_nominate(
            view, sim.clusters, sim.snapshot, self.policy, self.in_flight, now, self.memo
        )
        if chosen:
            self._workloads[view.key] = wl
        return chosen or wl.nominated

    def _counted_in_view(self, sim: Sim) -> None:
        """A new view of the workers: where it shows a copy holding quota (admitted before
        it was read), that copy's demand stops counting in flight there
        (InFlightDemand.counted_on), and a primary's other groups start counting there."""
        for key in self.in_flight.workloads():
            wl = self._workloads[key]
            for item in self.in_flight.items(key):
                copy = wl.copies.get(item.cluster)
                if key in self._following:
                    # Not there yet: it is on its way (or gone, or past its bound).
                    if (copy is not None and _seen(copy, self.read_at)) or (
                        wl.finished_at is not None or sim.now >= self._following[key]
                    ):
                        self._forget(key)
                    continue
                if copy is None or _seen(copy, self.read_at):  # None: gone from there
                    self.in_flight.drop(key, item.cluster)
                    if copy is not None:
                        self._follow(sim, wl, item)
            if not self.in_flight.items(key):
                self._forget(key)

    def _follow(self, sim: Sim, wl: Wl, counted: InFlight) -> None:
        """`wl`'s copy holds quota on `counted.cluster`: where it is a LeaderWorkerSet's
        primary, each other group counts there on its own (controller/in_flight.py
        InFlightDemand._follow)."""
        if wl.index != 0 or wl.job.parts == 1:
            return
        for member in sim.groups[wl.job.name]:
            key = f"team/{member.key}"
            copy = member.copies.get(counted.cluster)
            if member is wl or key in self._following or (copy and _seen(copy, self.read_at)):
                continue
            self.in_flight.replace(
                key, [InFlight(key, counted.cluster, CQ, counted.flavors, member.requests)]
            )
            self._workloads[key] = member
            self._following[key] = sim.now + FOLLOWERS_UNSEEN_SECONDS

    def _forget(self, key: str) -> None:
        self.in_flight.remove(key)
        self._workloads.pop(key, None)
        self._following.pop(key, None)

    def done(self, wl: Wl) -> None:
        """Admitted (`wl.cluster`): its demand keeps counting on that worker until the view
        shows it (InFlightDemand.admitted_to), its own only where it is a LeaderWorkerSet's
        primary, whose other groups count there too; evicted: nowhere, nor its groups'."""
        key = f"team/{wl.key}"
        if key in self._following:  # a group following its primary
            if wl.cluster is None:
                self._forget(key)
            return  # else counted until the view shows its copy (`_counted_in_view`)
        kept = [i for i in self.in_flight.items(key) if i.cluster == wl.cluster]
        group = self._sim.groups[wl.job.name] if self._sim and wl.job.parts > 1 else [wl]
        for member in group:
            other = f"team/{member.key}"
            if other in self._following and (
                wl.cluster is None or self.in_flight.items(other)[0].cluster != wl.cluster
            ):
                self._forget(other)  # its primary is not (or no longer) there
        copy = wl.copies.get(wl.cluster) if wl.cluster else None
        if kept and copy is not None and self._sim is not None:
            self._follow(self._sim, wl, kept[0])
        if copy is None or _seen(copy, self.read_at):
            self._forget(key)
            return
        if len(group) > 1:
            kept = [replace(i, requests=wl.requests) for i in kept]
        self.in_flight.replace(key, kept)


def _seen(copy: Copy, read_at: float) -> bool:
    """The view read at `read_at` counts `copy`'s quota on its worker (or it is over)."""
    return copy.admitted_at is not None and copy.admitted_at <= read_at


# (delay, moment or 0, new preemptions, share left free): see Oracle._estimate
Estimate = tuple[float, float, int, float]


class Oracle(Dispatcher):
    """The best single cluster, as far as anything in this model can know it: it reads
    every worker's live state (no watch lag; it looks again every second), orders each
    worker's queue as its Kueue will, knows which preemptions would succeed and when running
    work ends, and nominates the one cluster where the workload is admitted soonest (ties:
    fewest new preemptions, then the tightest fit, against fragmenting big workers). What
    it cannot know is the future: arrivals and local work yet to come. It moves a waiting
    workload only to a cluster where it would be admitted sooner by more than a worker's
    cycle, never away from an admitted copy."""

    name = "oracle"
    refreshes = True
    writes_nominations = True

    def period(self, settings: Settings) -> float:
        return settings.sync_delay

    def __init__(self) -> None:
        self._ahead: dict[tuple[str, int, int], tuple[dict[str, dict[str, int]], bool]] = {}
        self._prefixes: dict[
            tuple[str, int, int | None], tuple[list[Copy], list[dict[str, dict[str, int]]]]
        ] = {}
        self._estimates: dict[tuple[str, int, object], Estimate | None] = {}

    def nominate(self, sim: Sim, wl: Wl) -> tuple[str, ...]:
        requests = {r: a * wl.job.parts for r, a in wl.requests.items()}
        current = wl.nominated[0] if wl.nominated else None
        copy = wl.copies.get(current) if current is not None else None
        if copy is not None and copy.state == ADMITTED:
            return wl.nominated  # admitted there: the manager is about to take it
        best: tuple[tuple[float, int, float], str] | None = None
        estimates: dict[str, tuple[float, int, float]] = {}
        shape = (wl.job.priority, tuple(sorted(requests.items())))
        for name in sim.clusters:
            worker = sim.workers[name]
            if name in wl.copies:  # its own copy's place in that queue decides
                found = self._estimate(sim, worker, wl, requests)
            else:  # the same for every new copy of this shape while the worker is unchanged
                key = (name, worker.version, shape)
                if key not in self._estimates:
                    if len(self._estimates) > 65536:
                        self._estimates.clear()
                    self._estimates[key] = self._estimate(sim, worker, wl, requests)
                found = self._estimates[key]
            if found is None:
                continue
            # Waiting for running work to end is known as a moment, the rest as a delay.
            delay, at, new, left = found
            estimate = (max(at - sim.now, 0.0) + delay if at else delay, new, left)
            estimates[name] = estimate
            if best is None or estimate < best[0]:
                best = (estimate, name)
        if best is None:
            return wl.nominated
        if current in estimates and estimates[current][0] <= best[0][0] + sim.s.admission_delay:
            return wl.nominated
        return (best[1],)

    def _usage_after_queue(
        self, sim: Sim, worker: Worker, wl: Wl
    ) -> tuple[dict[str, dict[str, int]], bool]:
        """Quota in use once the worker's next cycle has admitted what is ahead of the
        workload's copy (a new copy, or the one already queued there), and whether a
        StrictFIFO head stops the queue before it."""
        own = wl.copies.get(worker.spec.name)
        cache_key = (worker.spec.name, worker.version, wl.job.priority)
        if own is None and cache_key in self._ahead:
            return self._ahead[cache_key]
        usage = {f: dict(u) for f, u in worker.used.items()}
        stuck = False
        mine = queue_order(own) if own is not None else (-wl.job.priority, math.inf, 0.0)
        for other in sorted(worker.pending, key=queue_order):
            if other is own or other.state != PENDING or queue_order(other) >= mine:
                continue
            flavors = worker.assign(other.requests, usage)
            if flavors is None:
                if worker.spec.queueing == "StrictFIFO":
                    stuck = True
                    break
                continue
            _add(usage, other.requests, flavors, 1)
        if own is None:
            if len(self._ahead) > 4096:
                self._ahead.clear()
            self._ahead[cache_key] = (usage, stuck)
        return usage, stuck

    def _estimate(
        self, sim: Sim, worker: Worker, wl: Wl, requests: dict[str, int]
    ) -> Estimate | None:
        """When the workload would be admitted on `worker` (a delay from now, plus the
        moment running work ends if it must wait for that), the new preemptions it takes
        and the share left free; None where it can never fit."""
        usage, stuck = self._usage_after_queue(sim, worker, wl)
        flavors = worker.assign(requests, usage)
        if flavors is not None and not stuck:
            return (0.0, 0.0, 0, _left(worker, usage, requests, flavors))
        s = sim.s
        if not stuck and worker.spec.preemption == "LowerPriority":
            # Victims in CandidatesOrdering (dq_sim.Sim._preempt), taken until it fits.
            victims = self._prefix(
                (worker.spec.name, worker.version, wl.job.priority),
                lambda: sorted(
                    (
                        c
                        for c in worker.running
                        if c.priority < wl.job.priority and c.state in (ADMITTED, EVICTING)
                    ),
                    key=lambda c: (c.state != EVICTING, c.priority, -(c.admitted_at or 0.0)),
                ),
            )
            k = _first_fit(worker, requests, usage, victims)
            if k is not None:
                new = sum(c.state != EVICTING for c in victims[0][: k + 1])
                return (s.release_delay + s.admission_delay, 0.0, new, 0.0)
        return self._wait_for_ends(sim, worker, requests, usage)

    def _wait_for_ends(
        self, sim: Sim, worker: Worker, requests: dict[str, int], usage: dict[str, dict[str, int]]
    ) -> Estimate | None:
        """Waits for running work to end, soonest first: the moment enough has ended."""
        s = sim.s
        ending = self._prefix(
            (worker.spec.name, worker.version, None),
            lambda: sorted(
                worker.running,
                key=lambda c: (
                    (c.admitted_at or 0.0) + c.duration
                    if c.state == ADMITTED
                    else sim.now + s.release_delay
                ),
            ),
        )
        k = _first_fit(worker, requests, usage, ending)
        if k is None:
            return None
        c = ending[0][k]
        end = (
            (c.admitted_at or 0.0) + c.duration
            if c.state == ADMITTED
            else sim.now + s.release_delay
        )
        return (s.admission_delay, end, 0, 0.0)

    def _prefix(
        self, key: tuple[str, int, int | None], ordered: Callable[[], list[Copy]]
    ) -> tuple[list[Copy], list[dict[str, dict[str, int]]]]:
        """The copies `ordered` gives and, for each k, the quota freed by the first k + 1 of
        them (cached while the worker is unchanged)."""
        if key not in self._prefixes:
            copies = ordered()
            freed: dict[str, dict[str, int]] = {}
            steps = []
            for c in copies:
                freed = {f: dict(u) for f, u in freed.items()}
                for r, a in c.requests.items():
                    flavor = c.flavors.get(r)
                    if flavor is not None:
                        bucket = freed.setdefault(flavor, {})
                        bucket[r] = bucket.get(r, 0) + a
                steps.append(freed)
            if len(self._prefixes) > 4096:
                self._prefixes.clear()
            self._prefixes[key] = (copies, steps)
        return self._prefixes[key]


class Present(Oracle):
    """The bound a dispatcher could reach: the oracle's exact view of every worker's
    present (its queue in Kueue's order, which preemptions would succeed, no watch lag)
    but no run times, not even of work already running. Where the workload must wait for
    running work to end, which copy ends first is unknown, so every running copy is as
    likely to end next as any other (memoryless, at the trace's median run time): the
    expected wait until `m` of the `n` running copies have ended is that run time times
    H(n) - H(n - m) (the harmonic numbers), with `m` the fewest copies, taken in the order
    they were admitted, whose ending makes it fit. Everything else is the oracle's."""

    name = "present"

    def _wait_for_ends(
        self, sim: Sim, worker: Worker, requests: dict[str, int], usage: dict[str, dict[str, int]]
    ) -> Estimate | None:
        # Copies being evicted or deleted are seen going: their quota is back within the
        # release delay. Of the rest, none is known to end before another.
        running = self._prefix(
            (worker.spec.name, worker.version, None),
            lambda: sorted(
                worker.running, key=lambda c: (c.state == ADMITTED, c.admitted_at or 0.0)
            ),
        )
        k = _first_fit(worker, requests, usage, running)
        if k is None:
            return None
        s = sim.s
        going = sum(c.state != ADMITTED for c in running[0])
        if k < going:
            return (s.release_delay + s.admission_delay, 0.0, 0, 0.0)
        n, m = len(running[0]) - going, k + 1 - going
        expected = MEDIAN_RUN_TIME * sum(1.0 / (n - i) for i in range(m))
        return (s.admission_delay + expected, 0.0, 0, 0.0)


def _first_fit(
    worker: Worker,
    requests: dict[str, int],
    usage: dict[str, dict[str, int]],
    prefix: tuple[list[Copy], list[dict[str, dict[str, int]]]],
) -> int | None:
    """The smallest k such that freeing the first k + 1 copies makes `requests` fit (fit
    only grows as more is freed, so a binary search), or None."""

    def fits(k: int) -> bool:
        trial = {f: dict(u) for f, u in usage.items()}
        for flavor, freed in prefix[1][k].items():
            for r, a in freed.items():
                trial[flavor][r] = trial[flavor].get(r, 0) - a
        return worker.assign(requests, trial) is not None

    lo, hi = 0, len(prefix[0]) - 1
    if hi < 0 or not fits(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _add(
    usage: dict[str, dict[str, int]], requests: dict[str, int], flavors: dict[str, str], sign: int
) -> None:
    for r, a in requests.items():
        flavor = flavors.get(r)
        if flavor is not None:
            usage[flavor][r] = usage[flavor].get(r, 0) + sign * a


def _left(
    worker: Worker,
    usage: dict[str, dict[str, int]],
    requests: dict[str, int],
    flavors: dict[str, str],
) -> float:
    """The smallest share of a requested flavor left free after placing `requests`: lower
    is a tighter fit."""
    left = 1.0
    for group in worker.groups:
        for flavor, nominal in group:
            for r, a in requests.items():
                if flavors.get(r) == flavor and nominal.get(r):
                    free = nominal[r] - usage[flavor].get(r, 0) - a
                    left = min(left, free / nominal[r])
    return left
