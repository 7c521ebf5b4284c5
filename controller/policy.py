"""The dispatch policy: filter, score, choose. Pure: plain data in, plain data out.

For one workload it looks at every cluster of the MultiKueue check's config, says for
each why it is out or how well the workload fits there, and picks the clusters to
nominate. Fit is judged against each worker's Kueue quota (nominal minus reserved minus
what is already in flight to it), the way Kueue on that worker will judge it: resource
group by resource group, the first flavor in order that holds every requested resource
of the group. Borrowing from a cohort is not counted: the estimate stays on the safe side.

A cluster the workload is already nominated to stays nominated while the MultiKueue check
is Pending unless admission there became impossible or unwanted (it left the config, it is
disconnected, unreachable for longer than Kueue's workerLostTimeout, the policy's selector
excludes it, its queue is gone or can never hold the workload). Being full is no such
reason: the worker may be admitting this very workload, and Kueue v0.19.2 accepts
`status.clusterName` only when it is in the *old* `nominatedClusterNames`
(validateClusterNameUpdate in pkg/webhooks/workload_webhook.go), so dropping it throws
that admission away.

Two things the quota alone does not say, read from the worker's ClusterQueue: a StrictFIFO
queue with workloads pending admits nothing new until its head is admitted, so its free
quota is not there to take (it counts as full); and when nothing fits, a queue that can
preempt lower-priority work for the workload is a better place to wait than one that
cannot, whatever the deficits. "Can": with withinClusterQueue LowerPriority, Kueue
v0.19.2 takes as candidates only the workloads holding quota in the queue whose priority
is below the preemptor's (SatisfiesPreemptionPolicy in
pkg/scheduler/preemption/common/preemption_policy.go, over the ClusterQueue's workloads in
findCandidates, pkg/scheduler/preemption/preemption.go) and that use a flavor and resource
it is short of (WorkloadUsesResources there); it preempts only if evicting them makes the
workload fit (classicalPreemptions). So a queue can preempt for a workload where, in the
flavor it lands on, what is free plus what lower-priority work holds covers every
resource it asks for. Such queues come first; then queues that preempt but cannot for it
now (they still rank above queues that never preempt: lower-priority work admitted there
later becomes preemptible, and measured in the simulation, bench/dispatch_quality.py,
ranking them with the queues that never preempt made P95 worse: BENCHMARKS.md section
4); a queue that preempts with nothing admitted has nothing to preempt and ranks with
those that never do. Where the worker's admitted work is not known, a queue that
preempts counts as one that can, as before.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from functools import partial
from typing import Any, NamedTuple, Protocol

from controller.model import (
    CORDONED_LABEL,
    MAX_NOMINATIONS,
    MILLI,
    Decision,
    FlavorCapacity,
    InFlight,
    Judged,
    Policy,
    QueueCapacity,
    Resources,
    Standing,
    Verdict,
    WorkerView,
    WorkloadView,
)

_ZERO = 0
_EMPTY: Resources = {}
Missing = dict[tuple[str, str], int]  # (flavor, resource) -> amount short
_NO_USAGE: dict[str, Resources] = {}
CHANGES_KEPT = 100_000  # in-flight changes remembered for memos to catch up from


_BINARY_UNITS = (("Ti", 1024**4), ("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024))


def show(resource: str, amount: int) -> str:
    """Milli-unit amounts in the units people write in a quota or a pod: bytes in the
    largest binary unit that keeps a number of at least 1 (64Mi, 1.5Gi), cores as a number
    or in millicores below one (500m), other resources as plain counts."""
    if resource == "memory" or resource.endswith("storage") or resource.startswith("hugepages-"):
        size = amount / MILLI
        for unit, factor in _BINARY_UNITS:
            if size >= factor:
                return f"{size / factor:.4g}{unit}"
        return f"{size:.4g}"
    if resource == "cpu" and amount % MILLI:
        return f"{amount}m"
    return f"{amount / MILLI:.6g}"


class InFlightIndex:
    """Demand nominated but not yet admitted, summed per (cluster, ClusterQueue, flavor) as
    nominations come and go, so a decision reads its totals instead of scanning every
    in-flight workload (the scan was 63% of decision time at 1,000 pending)."""

    def __init__(self) -> None:
        self._by_workload: dict[str, list[InFlight]] = {}
        self._totals: dict[tuple[str, str], dict[str, Resources]] = {}
        # The clusters whose demand in flight changed, in order: a memo catches up from
        # where it was. `_dropped` entries were forgotten to keep the log bounded.
        self._changes: list[str] = []
        self._dropped = 0

    @classmethod
    def of(cls, items: Iterable[InFlight]) -> InFlightIndex:
        index = cls()
        for item in items:
            index.add(item)
        return index

    def _apply(self, item: InFlight, sign: int) -> None:
        self._changes.append(item.cluster)
        if len(self._changes) > CHANGES_KEPT:
            half = len(self._changes) // 2
            del self._changes[:half]
            self._dropped += half
        bucket = self._totals.setdefault((item.cluster, item.cluster_queue), {})
        for resource, amount in item.requests.items():
            flavor = item.flavors.get(resource)
            if flavor is not None:
                totals = bucket.setdefault(flavor, {})
                totals[resource] = totals.get(resource, _ZERO) + sign * amount

    def add(self, item: InFlight) -> None:
        self._by_workload.setdefault(item.workload, []).append(item)
        self._apply(item, 1)

    def remove(self, workload: str) -> None:
        for item in self._by_workload.pop(workload, []):
            self._apply(item, -1)

    def replace(self, workload: str, items: Iterable[InFlight]) -> None:
        self.remove(workload)
        for item in items:
            self.add(item)

    @property
    def position(self) -> int:
        """How many changes there have been."""
        return self._dropped + len(self._changes)

    def knows(self, position: int) -> bool:
        """Whether the changes since `position` are still known."""
        return position >= self._dropped

    def changed_since(self, position: int) -> set[str]:
        return set(self._changes[position - self._dropped :])

    def workloads(self) -> list[str]:
        """The keys of the workloads whose demand is counted."""
        return list(self._by_workload)

    def items(self, workload: str) -> tuple[InFlight, ...]:
        """What is counted of `workload`, one entry per cluster."""
        return tuple(self._by_workload.get(workload, ()))

    def drop(self, workload: str, cluster: str) -> bool:
        """Stop counting `workload`'s demand on `cluster` (only there); whether any was."""
        items = self._by_workload.get(workload)
        if not items or not any(i.cluster == cluster for i in items):
            return False
        self.replace(workload, [i for i in items if i.cluster != cluster])
        return True

    def clusters_of(self, workload: str) -> set[str]:
        """The clusters where `workload`'s own demand is in flight."""
        return {i.cluster for i in self._by_workload.get(workload, ())}

    def __len__(self) -> int:
        return len(self._by_workload)

    def totals(self, cluster: str, cluster_queue: str) -> dict[str, Resources]:
        """flavor -> resource -> all the demand in flight there."""
        return self._totals.get((cluster, cluster_queue), _NO_USAGE)

    def usage(self, cluster: str, cluster_queue: str, excluding: str) -> dict[str, Resources]:
        """flavor -> resource -> demand in flight there, not counting `excluding`'s own."""
        totals = self.totals(cluster, cluster_queue)
        own = [
            i
            for i in self._by_workload.get(excluding, ())
            if i.cluster == cluster and i.cluster_queue == cluster_queue
        ]
        if not own:
            return totals
        adjusted = {flavor: dict(resources) for flavor, resources in totals.items()}
        for item in own:
            for resource, amount in item.requests.items():
                flavor = item.flavors.get(resource)
                if flavor is not None:
                    adjusted[flavor][resource] -= amount
        return adjusted


def _free(nominal: Resources, reserved: Resources, in_flight: Resources, resource: str) -> int:
    return (
        nominal.get(resource, _ZERO)
        - reserved.get(resource, _ZERO)
        - in_flight.get(resource, _ZERO)
    )


def _less(reserved: Resources, own: Resources) -> Resources:
    """A reservation without what may be the workload's own share of it."""
    return {r: max(a - own.get(r, _ZERO), 0) for r, a in reserved.items()}


class _Fit:
    """How a workload's requests land on one ClusterQueue. `own`: demand of the workload
    that the queue's reservation may already include (it is admitting there), counted as
    the workload's own rather than as competition."""

    def __init__(
        self,
        queue: QueueCapacity,
        requests: Resources,
        in_flight: dict[str, Resources],
        own: Resources = _EMPTY,
    ) -> None:
        self.own = own
        self.flavors: dict[str, str] = {}
        self.fits = True
        self.possible = True
        self.headroom = 1.0  # smallest share of a flavor left free after placement
        # The smallest quota of a device the workload requests (extended resources:
        # nvidia.com/gpu, google.com/tpu) in the flavor it lands on; None when it requests
        # none.
        self.device_quota: int | None = None
        self.deficit = 0.0  # largest share of a flavor missing to fit now
        # Where it does not fit now: (flavor, resource) -> the amount beyond what is free, in
        # the flavor each resource would land on.
        self.missing: Missing = {}
        self.blocker: str | Callable[[], str] = ""
        for group in queue.groups:
            wanted = {r: a for r, a in requests.items() if r in group[0].nominal and a > 0}
            if wanted:
                self._place(group, wanted, in_flight)

    def _place(
        self, group: Sequence[FlavorCapacity], wanted: Resources, in_flight: dict[str, Resources]
    ) -> None:
        # One pass per flavor, in order (as Kueue tries them): the largest share of the
        # flavor's quota the workload is short of. <= 0 means it fits, and then its
        # negation is the smallest share left free after placement.
        best: tuple[float, FlavorCapacity, str] | None = None
        own = self.own
        for flavor in group:
            nominal = flavor.nominal
            reserved = _less(flavor.reserved, own) if own else flavor.reserved
            used = in_flight.get(flavor.name) or _EMPTY
            short, tightest = -1.0, ""
            for r, amount in wanted.items():
                n = nominal.get(r, 0)
                if n < amount:
                    break  # this flavor can never hold it
                ratio = (amount - (n - reserved.get(r, 0) - used.get(r, 0))) / n
                if ratio > short or not tightest:
                    short, tightest = ratio, r
            else:
                if short <= 0:
                    self.headroom = min(self.headroom, 0.0 - short)  # never -0.0
                    for r in wanted:
                        if "/" in r:  # an extended resource: a device
                            n = nominal[r]
                            if self.device_quota is None or n < self.device_quota:
                                self.device_quota = n
                    for r in wanted:
                        self.flavors[r] = flavor.name
                    return
                if best is None or short < best[0]:
                    best = (short, flavor, tightest)
        self.fits = False
        if best is None:
            self.possible = False
            biggest = {r: max(f.nominal.get(r, 0) for f in group) for r in wanted}
            larger = [r for r, a in wanted.items() if biggest[r] < a]
            if larger:
                r = larger[0]
                self.blocker = (
                    f"never fits: needs {r} {show(r, wanted[r])}, the largest flavor "
                    f"offers {show(r, biggest[r])}"
                )
            else:
                # Each resource fits in some flavor, but none holds them all: Kueue assigns
                # one flavor per resource group, so this is as final.
                needs = " and ".join(f"{r} {show(r, a)}" for r, a in wanted.items())
                flavors = ", ".join(f.name for f in group)
                self.blocker = f"never fits: no flavor of {flavors} offers {needs} at once"
            return
        short, flavor, r = best
        self.deficit = max(self.deficit, short)
        reserved = _less(flavor.reserved, own) if own else flavor.reserved
        used = in_flight.get(flavor.name) or _EMPTY
        for res, amount in wanted.items():
            beyond = amount - _free(flavor.nominal, reserved, used, res)
            if beyond > 0:
                self.missing[(flavor.name, res)] = beyond
        free = max(_free(flavor.nominal, reserved, used, r), 0)
        # The numbers now, the words only if someone reads them.
        self.blocker = partial(_full_now, r, wanted[r], free, flavor.name)
        for res in wanted:
            self.flavors[res] = flavor.name


def _full_now(resource: str, wanted: int, free: int, flavor: str) -> str:
    return (
        f"full now: needs {resource} {show(resource, wanted)}, {show(resource, free)} free "
        f"in {flavor}"
    )


def _fits(flavors: dict[str, str], headroom: float) -> str:
    where = ", ".join(sorted(set(flavors.values()))) or "no quota needed"
    return f"fits in {where}; {headroom:.0%} of the tightest flavor left free after it"


def _load(queue: QueueCapacity, in_flight: dict[str, Resources]) -> float:
    """Share of the queue's quota in use or in flight, over all flavors and resources."""
    shares = [
        (f.reserved.get(r, _ZERO) + in_flight.get(f.name, {}).get(r, _ZERO)) / nominal
        for group in queue.groups
        for f in group
        for r, nominal in f.nominal.items()
        if nominal > 0
    ]
    return max(shares, default=0.0)


def _wanted(requests: Resources) -> tuple[str, ...]:
    """The resources a workload asks a positive amount of, in its order: all the fit reads."""
    return tuple(r for r, a in requests.items() if a > 0)


def _filter(
    worker: WorkerView | None, local_queue: str, wanted: tuple[str, ...], policy: Policy
) -> tuple[str, str, QueueCapacity | None]:
    """(category, reason) of why the cluster is out, or ("", "", its ClusterQueue). Reads
    no amount, only which resources are wanted: the same for every workload of the queue
    that asks for the same resources."""
    if worker is None:
        return "unknown-cluster", "no MultiKueueCluster of this name", None
    if worker.cordoned:
        # Out like a filtered cluster: a nomination there that was not admitted yet moves
        # on; what it admitted is no longer the dispatcher's to decide and runs there.
        return "cordoned", f"cordoned (label {CORDONED_LABEL}=true on its MultiKueueCluster)", None
    if not worker.connected:
        return "disconnected", "not connected (its MultiKueueCluster is not Active)", None
    if not worker.healthy:
        reason = f"unreachable for the dispatcher: {worker.health_reason or 'no data'}"
        return "unreachable", reason, None
    if policy.cluster_selector:
        labels = worker.labels
        mismatch = [f"{k}={v}" for k, v in policy.cluster_selector.items() if labels.get(k) != v]
        if mismatch:
            reason = f"labels do not match {', '.join(mismatch)} (policy {policy.name})"
            return "selector", reason, None
    cq_name = worker.local_queues.get(local_queue)
    if cq_name is None:
        return "no-local-queue", f"no LocalQueue {local_queue} on this worker", None
    queue = worker.queues.get(cq_name)
    if queue is None:
        reason = f"its LocalQueue points to ClusterQueue {cq_name}, which does not exist"
        return "no-cluster-queue", reason, None
    if not queue.active:
        return "inactive-queue", f"ClusterQueue {cq_name} is not active", None
    missing = sorted(r for r in wanted if r not in queue.covered)
    if missing:
        return "not-covered", f"ClusterQueue {cq_name} does not cover {', '.join(missing)}", None
    return "", "", queue


def widened_count(policy: Policy, workload: WorkloadView, now: datetime) -> int:
    """How many clusters to nominate: the policy's count, grown by that much again for
    every `widenAfter` the workload has waited on its nominations without admission."""
    count = policy.clusters_to_nominate
    if workload.nominated and workload.nominated_at is not None and policy.widen_after_seconds > 0:
        waited = (now - workload.nominated_at).total_seconds()
        count *= 1 + int(waited // policy.widen_after_seconds)
    return min(count, MAX_NOMINATIONS)


_FITS, _WAITS, _OUT = 0, 1, 2


# How promising a cluster where the workload waits is, best first (the first part of its
# rank): its queue can preempt for it now, it preempts but cannot now, it never preempts
# (or has nothing admitted), its StrictFIFO queue is stuck.
_CAN_PREEMPT, _MAY_PREEMPT, _NO_PREEMPTION, _STUCK = 0, 1, 2, 3

Key = tuple[int, float, float]  # rank among the clusters of the same standing (lower first)
_NO_KEY: Key = (0, 0.0, 0.0)
# A cluster's place in ranking: its key, then its place in the config, then its name.
Ranked = tuple[Key, int, str]


class _Judged(NamedTuple):
    """One cluster's verdict on one workload."""

    verdict: Verdict
    standing: int  # _FITS, _WAITS or _OUT
    key: Key


def _stuck(queue: QueueCapacity, cluster: str, workload: WorkloadView) -> int:
    """How many workloads wait ahead of this one in a StrictFIFO ClusterQueue (0 for
    BestEffortFIFO). Kueue v0.19.2 puts a StrictFIFO head that cannot be admitted straight
    back at the head (RequeueIfNotPresent in pkg/cache/queue/cluster_queue.go requeues it
    "immediately"; QueueingStrategy in apis/kueue/v1beta2/clusterqueue_types.go: older
    workloads that cannot be admitted block newer ones even if they fit), so a queue with
    workloads pending admits nothing new, whatever quota it has free. Its own copy, if it is
    nominated there, is one of those pending; the others' priorities are not in the
    ClusterQueue's status, so all of them count as ahead."""
    if not queue.strict_fifo:
        return 0
    return max(queue.pending - (cluster in workload.nominated), 0)


def _verdict(name: str, queue: QueueCapacity, fit: _Fit, ahead: int) -> tuple[Verdict, int]:
    """The verdict on a cluster whose queue the filter kept, and its standing."""
    if ahead:
        why = (
            f"queue stuck: StrictFIFO ClusterQueue {queue.name} has {ahead} workload(s) "
            "pending ahead, nothing behind its head is admitted"
        )
        # Scored as short of its whole quota at least: nothing gets in before the head does.
        return Verdict(name, "waits", why, float(-max(fit.deficit, 1.0)), fit.flavors), _WAITS
    if fit.fits:
        why = partial(_fits, fit.flavors, fit.headroom)
        return Verdict(name, "fits", why, float(fit.headroom), fit.flavors), _FITS
    if fit.possible:
        return Verdict(name, "waits", fit.blocker, float(-fit.deficit), fit.flavors), _WAITS
    return Verdict(name, "filtered", fit.blocker, category="too-large"), _OUT


def _fit_key(strategy: str, headroom: float, device: int | None) -> Key:
    """Rank among the clusters where the workload fits."""
    if strategy == "MostFreeQuota":
        # Most free quota, but a workload asking for devices goes first to the clusters
        # with the fewest of them that hold it: 1-GPU jobs do not take one GPU from each
        # 8-GPU worker while 1-GPU workers stand idle, leaving no worker for an 8-GPU
        # job. Where every worker has the same devices, this is most free quota alone
        # (both measured in BENCHMARKS.md section 4: mixed-gpu, balanced-10).
        return (0, -headroom, 0.0) if device is None else (0, device, -headroom)
    return (0, headroom if strategy == "BestFit" else 0.0, 0.0)


def _wait_key(policy: Policy, first: int, deficit: float, load: Callable[[], float]) -> Key:
    """Rank among the clusters where the workload waits. `first`: where the queue may
    preempt, the workload can get in before anything ends there; elsewhere it waits for
    running work to finish, however small its deficit; behind a stuck queue's head, last."""
    return (first, deficit if policy.when_nothing_fits == "WaitOnBest" else load(), 0.0)


def _first(queue: QueueCapacity, ahead: int, priority: int, missing: Missing) -> int:
    if ahead:
        return _STUCK
    if not _may_preempt(queue):
        return _NO_PREEMPTION
    return _CAN_PREEMPT if _can_preempt(queue, priority, missing) else _MAY_PREEMPT


def _may_preempt(queue: QueueCapacity) -> bool:
    """Whether the queue may preempt for some workload: it preempts, and has admitted work
    or its admitted work is not known."""
    return queue.preempts and queue.held != ()


def _can_preempt(queue: QueueCapacity, priority: int, missing: Missing) -> bool:
    """Whether evicting the queue's work of lower priority than `priority` would free
    what a workload is `missing` (flavor, resource -> amount beyond what is free; see the
    module docstring). Where the admitted work is not known, whether it may preempt."""
    if not _may_preempt(queue):
        return False
    if queue.held is None:
        return True
    below = queue.held_below(priority)
    return bool(below) and all(
        (below.get(flavor) or _EMPTY).get(r, _ZERO) >= amount
        for (flavor, r), amount in missing.items()
    )


def _judge(
    name: str,
    worker: WorkerView | None,
    local_queue: str,
    wanted: tuple[str, ...],
    workload: WorkloadView,
    policy: Policy,
    in_flight: InFlightIndex,
) -> _Judged:
    """One cluster judged from scratch."""
    category, reason, queue = _filter(worker, local_queue, wanted, policy)
    if queue is None:
        return _Judged(Verdict(name, "filtered", reason, category=category), _OUT, _NO_KEY)
    used = in_flight.usage(name, queue.name, workload.key)
    # Nominated there and nothing waits in the ClusterQueue: the worker's Kueue has taken
    # the workload's copy, so its reservation may already hold this workload's own demand
    # (the manager learns of the admission only later, through clusterName).
    own = workload.requests if queue.pending == 0 and name in workload.nominated else _EMPTY
    fit = _Fit(queue, workload.requests, used, own)
    ahead = _stuck(queue, name, workload) if fit.possible else 0
    verdict, standing = _verdict(name, queue, fit, ahead)
    if standing == _FITS:
        key = _fit_key(policy.strategy, fit.headroom, fit.device_quota)
    elif standing == _WAITS:
        first = _first(queue, ahead, workload.priority, fit.missing)
        key = _wait_key(policy, first, fit.deficit, lambda: _load(queue, used))
    else:
        key = _NO_KEY
    return _Judged(verdict, standing, key)


class _Judgement(Judged, Protocol):
    """Every cluster's standing on one workload: the best places where it fits, and where it
    waits, ranked, and the verdicts."""

    position: dict[str, int]  # cluster -> its (first) place in the config

    def fits(self) -> bool: ...  # anywhere

    def best(self, count: int) -> list[Ranked]: ...  # where it fits, best first

    def waits(self) -> bool: ...  # anywhere

    def best_waiting(self, count: int) -> list[Ranked]: ...  # where it waits, best first

    def standing(self, name: str) -> int: ...

    def preempts_now(self, name: str) -> bool: ...  # waits there, but can preempt for it now


def _pick(rank: Sequence[Any], top: Any, unranked: Any, count: int) -> list[int]:
    """The places of the `count` smallest ranks, smallest first, the first place first among
    equals; none that is `unranked`. `top`: the smallest rank."""
    if top == unranked:
        return []
    if count == 1:
        return [rank.index(top)]
    return [
        k
        for k in heapq.nsmallest(count, range(len(rank)), key=rank.__getitem__)
        if rank[k] != unranked
    ]


def _smallest(count: int, ranked: list[Ranked]) -> list[Ranked]:
    if count == 1 and ranked:
        return [min(ranked)]
    return heapq.nsmallest(count, ranked)


class _EachJudged:
    """Every cluster judged from scratch, one by one."""

    def __init__(self, names: list[str], judged: list[_Judged]) -> None:
        # A cluster listed twice (no valid config does) counts at its first place.
        self.position = {name: order for order, name in reversed(list(enumerate(names)))}
        self.judged = judged
        self._fitting = [
            (j.key, o, j.verdict.cluster) for o, j in enumerate(judged) if j.standing == _FITS
        ]
        self._waiting = [
            (j.key, o, j.verdict.cluster) for o, j in enumerate(judged) if j.standing == _WAITS
        ]

    def fits(self) -> bool:
        return bool(self._fitting)

    def best(self, count: int) -> list[Ranked]:
        return _smallest(count, self._fitting)

    def waits(self) -> bool:
        return bool(self._waiting)

    def best_waiting(self, count: int) -> list[Ranked]:
        return heapq.nsmallest(count, self._waiting)

    def standing(self, name: str) -> int:
        return self.judged[self.position[name]].standing

    def preempts_now(self, name: str) -> bool:
        j = self.judged[self.position[name]]
        return j.standing == _WAITS and j.key[0] == _CAN_PREEMPT

    def verdict(self, name: str) -> Verdict:
        return self.judged[self.position[name]].verdict

    def verdicts(self) -> tuple[Verdict, ...]:
        return tuple(j.verdict for j in self.judged)

    def standings(self) -> tuple[Standing, ...]:
        return tuple((v.cluster, v.status, v.category) for v in self.verdicts())


_INF = float("inf")
_BY_ITSELF = float("nan")  # in a shortfall column: judged by itself instead
_UNRANKED = (_INF,)  # ranks above any (device quota, -headroom)


def _first_flavors(
    queue: QueueCapacity, wanted: tuple[str, ...]
) -> tuple[list[FlavorCapacity], bool] | None:
    """The first flavor of the resource group of each wanted resource, and whether any of
    those groups has more flavors; None when a resource is in no group's first flavor or
    in several (no valid ClusterQueue does either), which leaves the cluster to be judged
    by itself."""
    flavors, more = [], False
    for r in wanted:
        groups = [group for group in queue.groups if r in group[0].nominal]
        if len(groups) != 1:
            return None
        flavors.append(groups[0][0])
        more = more or len(groups[0]) > 1
    return flavors, more


class _Board:
    """The clusters of one config for the workloads of one local queue that ask for the same
    resources, on one set of worker views, one policy and one in-flight index: what does not
    depend on the amounts is worked out once (which clusters the filter keeps; for the
    others, resource by resource, the flavor the request lands on, its quota, and what is
    free of it), so that a decision, even on a workload of a shape never seen before, reads
    columns of numbers instead of judging every cluster again. At 100 clusters judging each
    took ~10 µs of CPU per cluster; a column takes a fraction of a microsecond.

    What is free follows the in-flight index: only the clusters whose demand in flight
    changed since are read again. A decision keeps the columns it was made on (they are
    copied, not changed, when demand moves), so its verdicts, made only when read, are the
    ones it was decided on.

    Where the workload lands is certain in a group of one flavor, or in the first flavor
    when it fits there: a cluster with a group of several flavors that it does not fit in at
    the first is judged by itself, as are the clusters it is nominated to or has demand in
    flight on (its own share changes the answer there)."""

    def __init__(
        self,
        local_queue: str,
        wanted: tuple[str, ...],
        names: list[str],
        workers: dict[str, WorkerView],
        policy: Policy,
        in_flight: InFlightIndex,
    ) -> None:
        self.local_queue, self.wanted, self.names = local_queue, wanted, names
        self.workers, self.policy, self.index = workers, policy, in_flight
        self.seen = in_flight.position
        self.position = {name: order for order, name in reversed(list(enumerate(names)))}
        self.out: dict[int, Verdict] = {}  # filtered: the same for every workload here
        self.alone: list[int] = []  # places of the clusters always judged by themselves
        kept: list[tuple[bool, int, QueueCapacity, list[FlavorCapacity], bool]] = []
        unique = len(self.position) == len(names)
        for order, name in enumerate(names):
            category, reason, queue = _filter(workers.get(name), local_queue, wanted, policy)
            if queue is None:
                self.out[order] = Verdict(name, "filtered", reason, category=category)
                continue
            layout = _first_flavors(queue, wanted) if unique else None
            if layout is None:
                self.alone.append(order)
            else:
                # Not nominated there (those are judged by themselves), so all its pending
                # workloads are ahead.
                stuck = bool(queue.strict_fifo and queue.pending)
                kept.append((stuck, order, queue, *layout))
        # The columns: one entry per cluster kept, in config order, but those whose
        # StrictFIFO queue has workloads pending (nothing behind the head gets in) last:
        # the first `open` are where the workload may fit.
        kept.sort(key=lambda c: c[:2])
        self.open = sum(1 for c in kept if not c[0])
        self.orders = [c[1] for c in kept]
        self.cluster = [names[c[1]] for c in kept]
        self.queues = [c[2] for c in kept]
        # Where the workload waits, how promising each column is before the workload's
        # priority and shortfall are known: _MAY_PREEMPT columns are checked when ranked,
        # and those that can preempt for it become _CAN_PREEMPT.
        self.first = [
            _STUCK if c[0] else _MAY_PREEMPT if _may_preempt(c[2]) else _NO_PREEMPTION for c in kept
        ]
        self.flavor = [[c[3][j].name for c in kept] for j in range(len(wanted))]
        self.nominal = [[c[3][j].nominal[r] for c in kept] for j, r in enumerate(wanted)]
        self.reserved = [[c[3][j].reserved.get(r, 0) for c in kept] for j, r in enumerate(wanted)]
        self.smallest = [min(column, default=0) for column in self.nominal]
        self.several = [k for k, c in enumerate(kept) if c[4]]  # groups of several flavors
        # Where the workload lands when it fits, as _Fit lists it (group by group).
        self.placed = [
            {r: group[0].name for group in c[2].groups for r in wanted if r in group[0].nominal}
            for c in kept
        ]
        devices = [j for j, r in enumerate(wanted) if "/" in r]  # extended resources
        self.devices = bool(devices)
        # The smallest quota of a requested device, where the workload lands (_Fit's
        # device_quota when it fits).
        self.device = [
            min((self.nominal[j][k] for j in devices), default=None) for k in range(len(kept))
        ]
        self.column = {name: k for k, name in enumerate(self.cluster)}
        self.free = [[0] * len(kept) for _ in wanted]
        for k in range(len(kept)):
            self._read_free(k)
        self.loads: dict[int, float] = {}  # for LeastLoaded, read when ranked

    def holds(
        self,
        names: list[str],
        workers: dict[str, WorkerView],
        policy: Policy,
        in_flight: InFlightIndex,
    ) -> bool:
        return (
            self.workers is workers
            and self.index is in_flight
            and self.names == names
            and (self.policy is policy or self.policy == policy)
            and in_flight.knows(self.seen)
        )

    def _read_free(self, k: int) -> None:
        used = self.index.totals(self.cluster[k], self.queues[k].name)
        for j, r in enumerate(self.wanted):
            flavor = used.get(self.flavor[j][k]) or _EMPTY
            self.free[j][k] = self.nominal[j][k] - self.reserved[j][k] - flavor.get(r, _ZERO)

    def _catch_up(self) -> None:
        index = self.index
        if self.seen == index.position:
            return
        changed = [self.column[c] for c in index.changed_since(self.seen) if c in self.column]
        self.seen = index.position
        if changed:
            self.free = [column.copy() for column in self.free]  # decisions keep theirs
            for k in changed:
                self._read_free(k)
                self.loads.pop(k, None)

    def shortfall(self, amounts: list[int]) -> list[float]:
        """Per column, what _Fit computes: the largest share of a flavor's quota the
        workload is short of (<= 0: it fits, and its negation is the least share left free
        after it), inf where it never fits."""
        short: list[float] = []
        for j, (a, nominal, free) in enumerate(zip(amounts, self.nominal, self.free, strict=True)):
            columns = zip(nominal, free, strict=True)
            if a > self.smallest[j]:  # too large for some
                column = [(a - f) / n if n >= a else _INF for n, f in columns]
            else:
                column = [(a - f) / n for n, f in columns]
            short = [s if s > r else r for s, r in zip(short, column, strict=True)] if j else column
        return short

    def judge(self, workload: WorkloadView) -> _Judgement:
        self._catch_up()
        return _BoardJudged(self, workload)

    def load(self, k: int) -> float:
        if k not in self.loads:
            queue = self.queues[k]
            self.loads[k] = _load(queue, self.index.totals(self.cluster[k], queue.name))
        return self.loads[k]

    def fit_key(self, k: int, s: float) -> Key:
        return _fit_key(self.policy.strategy, min(1.0, 0.0 - s), self.device[k])

    def verdict(self, k: int, s: float, free: list[list[int]], workload: WorkloadView) -> Verdict:
        """Column `k`'s verdict on `workload`, short `s`, with what was `free` then."""
        name = self.cluster[k]
        if s <= 0.0 and k < self.open:
            headroom = min(1.0, 0.0 - s)
            placed = self.placed[k]
            return Verdict(name, "fits", partial(_fits, placed, headroom), headroom, placed)
        used: dict[str, Resources] = {}
        for j, r in enumerate(self.wanted):
            amount = self.nominal[j][k] - self.reserved[j][k] - free[j][k]
            used.setdefault(self.flavor[j][k], {})[r] = amount
        queue = self.queues[k]
        fit = _Fit(queue, workload.requests, used)
        return _verdict(name, queue, fit, _stuck(queue, name, workload) if fit.possible else 0)[0]


class _BoardJudged:
    """One workload judged from a board: the columns at once, the rest one by one."""

    def __init__(self, board: _Board, workload: WorkloadView) -> None:
        self.board, self.workload, self.free = board, workload, board.free
        self.position = board.position
        self.amounts = [workload.requests[r] for r in board.wanted]
        short = board.shortfall(self.amounts)
        # Judged by themselves: the clusters always so, those with a group of several
        # flavors the workload does not fit in at the first, and those where its own share
        # counts.
        alone = list(board.alone)
        for k in board.several:
            if short[k] > 0.0:
                alone.append(board.orders[k])
                short[k] = _BY_ITSELF
        own = set(workload.nominated)
        own.update(board.index.clusters_of(workload.key))
        for name in own:
            k = board.column.get(name)
            if k is not None and short[k] == short[k]:  # not by itself already (NaN)
                alone.append(board.orders[k])
                short[k] = _BY_ITSELF
        self.short = short
        names = board.names
        self.exact = {
            order: _judge(
                names[order],
                board.workers.get(names[order]),
                board.local_queue,
                board.wanted,
                workload,
                board.policy,
                board.index,
            )
            for order in alone
        }
        self.exact_fitting = [
            (j.key, order, names[order]) for order, j in self.exact.items() if j.standing == _FITS
        ]
        # Each open column's rank where the workload fits, ordered as its key (_fit_key),
        # unranked where it does not: in config order, the first of the smallest is the best.
        opened = short[: board.open]
        strategy = board.policy.strategy
        # Floats, or (device quota, -headroom) pairs: compared in C, not built as keys.
        self.rank: list[Any]
        self.unranked: Any
        if strategy == "MostFreeQuota" and board.devices:
            self.unranked = _UNRANKED
            self.rank = [
                (d, -(h if (h := 0.0 - s) < 1.0 else 1.0)) if s <= 0.0 else _UNRANKED
                for s, d in zip(opened, board.device[: board.open], strict=True)
            ]
        else:
            self.unranked = _INF
            if strategy == "MostFreeQuota":
                self.rank = [
                    -(h if (h := 0.0 - s) < 1.0 else 1.0) if s <= 0.0 else _INF for s in opened
                ]
            elif strategy == "BestFit":
                self.rank = [
                    (h if (h := 0.0 - s) < 1.0 else 1.0) if s <= 0.0 else _INF for s in opened
                ]
            else:
                self.rank = [0.0 if s <= 0.0 else _INF for s in opened]
        self.top = min(self.rank, default=self.unranked)

    def fits(self) -> bool:
        return self.top != self.unranked or bool(self.exact_fitting)

    def best(self, count: int) -> list[Ranked]:
        board, short = self.board, self.short
        ranked = [
            (board.fit_key(k, short[k]), board.orders[k], board.cluster[k])
            for k in _pick(self.rank, self.top, self.unranked, count)
        ]
        return _smallest(count, ranked + self.exact_fitting) if self.exact_fitting else ranked

    def waits(self) -> bool:
        short = self.short
        return (
            any(0.0 < s < _INF for s in short)
            or any(s <= 0.0 for s in short[self.board.open :])  # fits, behind a stuck head
            or any(j.standing == _WAITS for j in self.exact.values())
        )

    def best_waiting(self, count: int) -> list[Ranked]:
        """The columns where the workload waits (short of quota, or behind a stuck head),
        ranked by the first two parts of their key (`_wait_key`), and those judged by
        themselves."""
        board = self.board
        # A queue that preempts, where the workload is short of quota: can it, for this one?
        first = list(board.first)
        for k, (f, s) in enumerate(zip(board.first, self.short, strict=True)):
            if f == _MAY_PREEMPT and 0.0 < s < _INF and self._can_preempt(k):
                first[k] = _CAN_PREEMPT
        columns = zip(self.short, first, strict=True)
        if board.policy.when_nothing_fits == "WaitOnBest":
            rank = [
                (f, s if s > 0.0 else 0.0)
                if 0.0 < s < _INF or (s <= 0.0 and f == _STUCK)
                else _UNRANKED
                for s, f in columns
            ]
        else:
            rank = [
                (f, board.load(k)) if 0.0 < s < _INF or (s <= 0.0 and f == _STUCK) else _UNRANKED
                for k, (s, f) in enumerate(columns)
            ]
        ranked = [
            ((*rank[k], 0.0), board.orders[k], board.cluster[k])
            for k in _pick(rank, min(rank, default=_UNRANKED), _UNRANKED, count)
        ]
        ranked += [
            (j.key, order, board.names[order])
            for order, j in self.exact.items()
            if j.standing == _WAITS
        ]
        return _smallest(count, ranked)

    def _can_preempt(self, k: int) -> bool:
        """_can_preempt for column `k`, where the workload waits short of quota: what it is
        missing, resource by resource, in the flavor it lands on (what _Fit finds)."""
        board, free, queue = self.board, self.free, self.board.queues[k]
        if queue.held is None:
            return True
        missing = {
            (board.flavor[j][k], r): a - free[j][k]
            for j, (r, a) in enumerate(zip(board.wanted, self.amounts, strict=True))
            if a > free[j][k]
        }
        return _can_preempt(queue, self.workload.priority, missing)

    def standing(self, name: str) -> int:
        order = self.position[name]
        if order in self.board.out:
            return _OUT
        if order in self.exact:
            return self.exact[order].standing
        k = self.board.column[name]
        s = self.short[k]
        if s <= 0.0:
            return _FITS if k < self.board.open else _WAITS
        return _WAITS if s < _INF else _OUT

    def preempts_now(self, name: str) -> bool:
        order = self.position[name]
        if order in self.board.out:
            return False
        if order in self.exact:
            j = self.exact[order]
            return j.standing == _WAITS and j.key[0] == _CAN_PREEMPT
        k = self.board.column[name]
        return (
            self.board.first[k] == _MAY_PREEMPT and 0.0 < self.short[k] < _INF
        ) and self._can_preempt(k)

    def verdict(self, name: str) -> Verdict:
        return self._at(self.position[name])

    def _at(self, order: int) -> Verdict:
        board = self.board
        if order in board.out:
            return board.out[order]
        if order in self.exact:
            return self.exact[order].verdict
        k = board.column[board.names[order]]
        return board.verdict(k, self.short[k], self.free, self.workload)

    def verdicts(self) -> tuple[Verdict, ...]:
        return tuple(self._at(order) for order in range(len(self.board.names)))

    def standings(self) -> tuple[Standing, ...]:
        """What `verdicts` would say of each cluster's standing, read from the columns
        without making the verdicts."""
        board, short, exact = self.board, self.short, self.exact
        said = []
        for order, name in enumerate(board.names):
            if order in board.out:
                said.append((name, "filtered", board.out[order].category))
            elif order in exact:
                v = exact[order].verdict
                said.append((name, v.status, v.category))
            else:
                k = board.column[name]
                s = short[k]
                if s <= 0.0:
                    said.append((name, "fits" if k < board.open else "waits", ""))
                elif s < _INF:
                    said.append((name, "waits", ""))
                else:
                    said.append((name, "filtered", "too-large"))
        return tuple(said)


class FitMemo:
    """Boards kept across decisions, one per local queue and set of requested resources:
    the controller decides workload after workload on the same worker views, and between
    two decisions the demand in flight changes on one or two clusters only. A new worker
    view, policy, config or in-flight index starts a board afresh. `decide` gives the same
    decision with or without a memo."""

    # Beyond it, start again: a bounded cache (tens of KB each at 100 clusters), whatever
    # the workloads.
    MAX_BOARDS = 64

    def __init__(self) -> None:
        self._boards: dict[tuple[str, tuple[str, ...]], _Board] = {}

    def board(
        self,
        local_queue: str,
        wanted: tuple[str, ...],
        names: list[str],
        workers: dict[str, WorkerView],
        policy: Policy,
        in_flight: InFlightIndex,
    ) -> _Board:
        board = self._boards.get((local_queue, wanted))
        if board is None or not board.holds(names, workers, policy, in_flight):
            if len(self._boards) >= self.MAX_BOARDS:
                self._boards.clear()
            board = _Board(local_queue, wanted, list(names), workers, policy, in_flight)
            self._boards[(local_queue, wanted)] = board
        return board


def _briefly_lost(cluster: str, workers: dict[str, WorkerView], judgement: _Judgement) -> bool:
    """Out only because the dispatcher has not reached it for a while, shorter than Kueue's
    workerLostTimeout: Kueue keeps a lost worker that long (Kueue v0.19.2 MultiKueue
    `workerLostTimeout`, 15m by default), and it may be admitting the workload right now,
    so a few failed probes are no reason to drop the nomination."""
    worker = workers.get(cluster)
    if worker is None or not worker.briefly_lost:
        return False
    return judgement.verdict(cluster).category == "unreachable"


def _held_known(workers: dict[str, WorkerView], cluster: str, local_queue: str) -> bool:
    """Whether the quota held in the ClusterQueue behind `local_queue` on `cluster` is known
    (the worker's Workloads are read)."""
    worker = workers.get(cluster)
    queue = worker.queues.get(worker.local_queues.get(local_queue, "")) if worker else None
    return queue is not None and queue.held is not None


def takes_room(verdict: Verdict, queue: QueueCapacity | None) -> bool:
    """Whether a nomination's demand counts in flight against its cluster's queue: where
    it fits (the worker's next cycle admits it there), and where it waits in a StrictFIFO
    queue (its copy admits nothing behind it). A copy waiting in a BestEffortFIFO queue
    takes nothing until the room it needs is free: Kueue admits what fits behind it
    meanwhile (BestEffortFIFO, apis/kueue/v1beta2/clusterqueue_types.go 198-201, v0.19.2), so
    counting it there kept other workloads from room they would have had (BENCHMARKS.md
    section 4, issue 30). Where the queue is not known, it counts."""
    return verdict.status == "fits" or queue is None or queue.strict_fifo


def decide(
    workload: WorkloadView,
    clusters: Sequence[str],
    workers: dict[str, WorkerView],
    policy: Policy,
    in_flight: InFlightIndex,
    now: datetime,
    memo: FitMemo | None = None,
) -> Decision:
    """Nominations for `workload` among `clusters` (its MultiKueueConfig, in order).
    `memo` saves work across decisions and never changes the result."""
    local_queue = f"{workload.namespace}/{workload.queue_name}"
    wanted = _wanted(workload.requests)
    names = clusters if isinstance(clusters, list) else list(clusters)
    judgement: _Judgement
    if memo is not None and wanted:
        board = memo.board(local_queue, wanted, names, workers, policy, in_flight)
        judgement = board.judge(workload)
    else:
        judged = [
            _judge(name, workers.get(name), local_queue, wanted, workload, policy, in_flight)
            for name in names
        ]
        judgement = _EachJudged(names, judged)
    if not judgement.fits() and not judgement.waits():
        verdicts = judgement.verdicts()
        # "Ever" only when every cluster is too small: the other reasons (unreachable,
        # not connected, a missing queue) can pass.
        never = all(v.category == "too-large" for v in verdicts)
        lead = "no cluster can ever run it" if never else "no cluster can take it now"
        return Decision(
            (),
            "none",
            f"{lead}: " + "; ".join(f"{v.cluster}: {v.reason}" for v in verdicts)
            if verdicts
            else "no clusters",
            judgement,
        )
    # A nominated cluster that can still admit the workload stays, fitting or not: it may be
    # admitting it right now (see the module docstring). Filtered clusters leave: admission
    # there is impossible or unwanted.
    standing = {c: judgement.standing(c) for c in workload.nominated if c in judgement.position}
    kept = [c for c, s in standing.items() if s != _OUT or _briefly_lost(c, workers, judgement)]
    fits = judgement.fits()
    # Widening goes on while the workload waits, even where the view says it fits
    # somewhere: nominated where it "fits" and still not admitted after `widenAfter`, the
    # view is what is wrong (work of higher priority queued there first, a stale
    # reservation). Widening only while nothing fits was measured and made P95 worse
    # (BENCHMARKS.md section 4: balanced-10 9.9 -> 12.4 minutes over 8 seeds).
    count = widened_count(policy, workload, now)
    # `count` is how many clusters where the workload fits to reach (or, when nothing fits,
    # how many to wait on); a kept cluster that only waits does not count toward it when
    # another fits, so a full nominated cluster gains a companion rather than losing its
    # place. Never a reason to drop a kept cluster.
    counted = [c for c in kept if standing[c] == _FITS] if fits else kept
    wanted_more = max(0, count - len(counted))
    if not fits and kept and not any(judgement.preempts_now(c) for c in kept):
        # Nothing fits, and no kept cluster can preempt for it now: where one can (as its
        # Workloads show, not only because its queue preempts), the workload is admitted
        # once the victims are gone, so the best of those joins the kept ones, as a
        # cluster where it fits would (BENCHMARKS.md section 4, issue 30).
        top = judgement.best_waiting(1)
        if top and top[0][0][0] == _CAN_PREEMPT and _held_known(workers, top[0][2], local_queue):
            wanted_more = max(wanted_more, 1)
    more: list[str] = []
    if wanted_more:
        # The best `wanted_more` of the rest: those that fit first, then those that wait,
        # each by (key, config order). A kept cluster may rank among them, so look that
        # much further.
        reach = wanted_more + len(kept)
        best = judgement.best(reach)
        if len(best) < reach:
            best += judgement.best_waiting(reach - len(best))
        more = [name for _, _, name in best if name not in kept][:wanted_more]
    chosen = (kept + more)[:MAX_NOMINATIONS]
    shown = tuple(judgement.verdict(c) for c in chosen)
    outcome = "nominated" if any(v.status == "fits" for v in shown) else "waiting"
    summary = "; ".join(f"{v.cluster}: {v.reason}" for v in shown)
    return Decision(tuple(chosen), outcome, summary, judgement, shown)
