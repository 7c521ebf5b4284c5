"""The dispatch policy as it was before the board of columns (controller/policy.py at
commit 6c49a55, every cluster judged by itself, with its per-shape memo), kept verbatim but
for this docstring, its own `Decision`, and the helpers that have not changed since, which
it imports from the controller: tests/unit/test_policy.py decides the same random
snapshots with it and with the controller's policy, which must agree on every decision and
verdict. The original docstring follows.

The dispatch policy: filter, score, choose. Pure: plain data in, plain data out.

For one workload it looks at every cluster of the MultiKueue check's config, says for
each why it is out or how well the workload fits there, and picks the clusters to
nominate. Fit is judged against each worker's Kueue quota (nominal minus reserved minus
what is already in flight to it), the way Kueue on that worker will judge it: resource
group by resource group, the first flavor in order that holds every requested resource
of the group. Borrowing from a cohort is not counted: the estimate stays on the safe side.

A cluster the workload is already nominated to stays nominated while the MultiKueue check
is Pending unless admission there became impossible or unwanted (it left the config, it is
unreachable or disconnected, the policy's selector excludes it, its queue is gone or can
never hold the workload). Being full is no such reason: the worker may be admitting this
very workload, and Kueue v0.19.2 accepts `status.clusterName` only when it is in the *old*
`nominatedClusterNames` (validateClusterNameUpdate in pkg/webhooks/workload_webhook.go),
so dropping it throws that admission away.

Two things the quota alone does not say, read from the worker's ClusterQueue: a StrictFIFO
queue with workloads pending admits nothing new until its head is admitted, so its free
quota is not there to take (it counts as full); and when nothing fits, a queue that may
preempt lower-priority work for the workload is a better place to wait than one that
never preempts, whatever the deficits.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import NamedTuple

# Unchanged since 6c49a55: the controller's own, not a second copy (all but the model's
# types), under the names they had then.
from controller.fit import ZERO as _ZERO
from controller.fit import _free, _full_now, _less, show
from controller.fit import fits_reason as _fits
from controller.fit import queue_load as _load
from controller.in_flight_index import CHANGES_KEPT
from controller.judging import stuck as _stuck
from controller.model import (
    CORDONED_LABEL,
    MAX_NOMINATIONS,
    FlavorCapacity,
    InFlight,
    Policy,
    QueueCapacity,
    Resources,
    Verdict,
    WorkerView,
    WorkloadView,
)
from controller.policy import hedged, hedged_summary, held, held_summary, widened_count


@dataclass(frozen=True)
class Decision:
    """controller.model.Decision as it was: every verdict made with the decision."""

    nominate: tuple[str, ...]
    verdicts: tuple[Verdict, ...]
    outcome: str
    summary: str


_EMPTY: Resources = {}


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

    def by_workload(self) -> dict[str, list[InFlight]]:
        return self._by_workload

    def clusters_of(self, workload: str) -> set[str]:
        """The clusters where `workload`'s own demand is in flight."""
        return {i.cluster for i in self._by_workload.get(workload, ())}

    def __len__(self) -> int:
        return len(self._by_workload)

    def usage(self, cluster: str, cluster_queue: str, excluding: str) -> dict[str, Resources]:
        """flavor -> resource -> demand in flight there, not counting `excluding`'s own."""
        totals = self._totals.get((cluster, cluster_queue), {})
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
        free = max(_free(flavor.nominal, reserved, in_flight.get(flavor.name) or _EMPTY, r), 0)
        # The numbers now, the words only if someone reads them.
        self.blocker = partial(_full_now, r, wanted[r], free, flavor.name)
        for res in wanted:
            self.flavors[res] = flavor.name


def _filter(
    worker: WorkerView | None, local_queue: str, workload: WorkloadView, policy: Policy
) -> tuple[str, str, QueueCapacity | None]:
    """(category, reason) of why the cluster is out, or ("", "", its ClusterQueue)."""
    if worker is None:
        return "unknown-cluster", "no MultiKueueCluster of this name", None
    if worker.cordoned:
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
    if workload.requests.keys() <= queue.covered:
        return "", "", queue
    missing = sorted(r for r, a in workload.requests.items() if a > 0 and r not in queue.covered)
    if missing:
        return "not-covered", f"ClusterQueue {cq_name} does not cover {', '.join(missing)}", None
    return "", "", queue


_FITS, _WAITS, _OUT = 0, 1, 2


# How promising a cluster where the workload waits is, best first (the first part of its
# rank): its queue may preempt for it, it may not, its StrictFIFO queue is stuck.
_MAY_PREEMPT, _NO_PREEMPTION, _STUCK = 0, 1, 2


class _Judged(NamedTuple):
    """One cluster's verdict on one workload."""

    verdict: Verdict
    standing: int  # _FITS, _WAITS or _OUT
    key: tuple[int, float, float]  # rank among the clusters of the same standing (lower first)


def _judge(
    name: str,
    worker: WorkerView | None,
    local_queue: str,
    workload: WorkloadView,
    policy: Policy,
    in_flight: InFlightIndex,
) -> _Judged:
    category, reason, queue = _filter(worker, local_queue, workload, policy)
    if queue is None:
        return _Judged(Verdict(name, "filtered", reason, category=category), _OUT, (0, 0.0, 0.0))
    used = in_flight.usage(name, queue.name, workload.key)
    # Nominated there and nothing waits in the ClusterQueue: the worker's Kueue has taken
    # the workload's copy, so its reservation may already hold this workload's own demand
    # (the manager learns of the admission only later, through clusterName).
    own = workload.requests if queue.pending == 0 and name in workload.nominated else _EMPTY
    fit = _Fit(queue, workload.requests, used, own)
    ahead = _stuck(queue, name, workload) if fit.possible else 0
    if ahead:
        why = (
            f"queue stuck: StrictFIFO ClusterQueue {queue.name} has {ahead} workload(s) "
            "pending ahead, nothing behind its head is admitted"
        )
        # Scored as short of its whole quota at least: nothing gets in before the head does.
        verdict = Verdict(name, "waits", why, float(-max(fit.deficit, 1.0)), fit.flavors)
        return _Judged(verdict, _WAITS, (_STUCK, _rank_waiting(policy, fit, queue, used), 0.0))
    if fit.fits:
        # Ten or more other workloads nominated there and not admitted: after the clusters
        # with fewer, by tens (one worker's MultiKueue client carries every copy, 10 at once),
        # and the reason says so.
        others = sum(
            1
            for w, items in in_flight.by_workload().items()
            if w != workload.key
            for i in items
            if i.cluster == name and i.cluster_queue == queue.name
        )
        verdict = Verdict(
            name,
            "fits",
            partial(_fits, fit.flavors, fit.headroom, others if others >= 10 else 0),
            float(fit.headroom),
            fit.flavors,
        )
        strategy = policy.strategy
        if strategy == "MostFreeQuota":
            # Most free quota, but a workload asking for devices goes first to the clusters
            # with the fewest of them that hold it: 1-GPU jobs do not take one GPU from each
            # 8-GPU worker while 1-GPU workers stand idle, leaving no worker for an 8-GPU
            # job. Where every worker has the same devices, this is most free quota alone
            # (both measured in BENCHMARKS.md section 4: mixed-gpu, balanced-10).
            device = fit.device_quota
            key = (0, -fit.headroom, 0.0) if device is None else (0, device, -fit.headroom)
        else:
            key = (0, fit.headroom if strategy == "BestFit" else 0.0, 0.0)
        return _Judged(verdict, _FITS, (others // 10, *key[1:]))
    if fit.possible:
        verdict = Verdict(name, "waits", fit.blocker, float(-fit.deficit), fit.flavors)
        # Where the queue may preempt, the workload can get in before anything ends
        # there; elsewhere it waits for running work to finish, however small its deficit.
        first = _MAY_PREEMPT if queue.preempts else _NO_PREEMPTION
        return _Judged(verdict, _WAITS, (first, _rank_waiting(policy, fit, queue, used), 0.0))
    return _Judged(
        Verdict(name, "filtered", fit.blocker, category="too-large"), _OUT, (0, 0.0, 0.0)
    )


def _rank_waiting(
    policy: Policy, fit: _Fit, queue: QueueCapacity, used: dict[str, Resources]
) -> float:
    """Rank among clusters where the workload waits with the same first part (lower first)."""
    return fit.deficit if policy.when_nothing_fits == "WaitOnBest" else _load(queue, used)


class _Shape:
    """Every cluster's verdict on one shape of workload, kept in step with the fleet: the
    clusters in config order, and the ones that fit or wait keyed for ranking."""

    def __init__(
        self,
        policy: Policy,
        clusters: list[str],
        workers: dict[str, WorkerView],
        seen: int,
    ) -> None:
        self.policy = policy
        self.clusters = clusters
        self.workers = workers
        self.seen = seen  # InFlightIndex.position when last brought up to date
        # A cluster listed twice (no valid config does) is judged at its first place.
        self.position = {name: order for order, name in reversed(list(enumerate(clusters)))}
        self.verdicts: list[Verdict] = []
        self.standing: list[int] = []
        self.fitting: dict[int, tuple[tuple[int, float, float], int, Verdict]] = {}
        self.waiting: dict[int, tuple[tuple[int, float, float], int, Verdict]] = {}
        self.dirty: set[str] = set()  # judged with a workload's own share: judge again

    def set(
        self, order: int, standing: int, key: tuple[int, float, float], verdict: Verdict
    ) -> None:
        if order == len(self.verdicts):
            self.verdicts.append(verdict)
            self.standing.append(standing)
        else:
            self.verdicts[order] = verdict
            self.standing[order] = standing
            self.fitting.pop(order, None)
            self.waiting.pop(order, None)
        if standing == _FITS:
            self.fitting[order] = (key, order, verdict)
        elif standing == _WAITS:
            self.waiting[order] = (key, order, verdict)


class FitMemo:
    """Verdicts already reached, brought up to date instead of reached again: a backlog is
    mostly workloads of a few shapes (the same queue and requests), and between two
    decisions the demand in flight changes on one or two clusters only, so most of a
    decision's per-cluster work would find again what the last one of that shape found.

    Per shape (local queue and requests), the verdicts hold while the policy, the config's
    clusters and the worker views are the same (views are rebuilt on every change to a
    worker); the clusters whose demand in flight changed since are judged again, and so
    are those where the workload itself is nominated or in flight (its own share changes
    the answer). `decide` gives the same decision with or without a memo."""

    # Beyond it, start again: a bounded cache (a few MB at 100 clusters), whatever the
    # workloads.
    MAX_SHAPES = 256

    def __init__(self) -> None:
        self._shapes: dict[tuple[str, tuple[tuple[str, int], ...]], _Shape] = {}

    def get(self, local_queue: str, requests: Resources) -> _Shape | None:
        return self._shapes.get((local_queue, tuple(sorted(requests.items()))))

    def put(self, local_queue: str, requests: Resources, shape: _Shape) -> None:
        if len(self._shapes) >= self.MAX_SHAPES:
            self._shapes.clear()
        self._shapes[(local_queue, tuple(sorted(requests.items())))] = shape


def _up_to_date(
    memo: FitMemo | None,
    workload: WorkloadView,
    local_queue: str,
    clusters: Sequence[str],
    workers: dict[str, WorkerView],
    policy: Policy,
    in_flight: InFlightIndex,
) -> _Shape:
    """Every cluster's verdict on this workload now: from the memo where it still holds."""
    shape = memo.get(local_queue, workload.requests) if memo is not None else None
    names = clusters if isinstance(clusters, list) else list(clusters)
    own = set(workload.nominated) | in_flight.clusters_of(workload.key)
    if (
        shape is None
        or shape.workers is not workers
        or shape.clusters != names
        or not (shape.policy is policy or shape.policy == policy)
        or not in_flight.knows(shape.seen)
    ):
        shape = _Shape(policy, list(names), workers, in_flight.position)
        for order, name in enumerate(names):
            judged = _judge(name, workers.get(name), local_queue, workload, policy, in_flight)
            shape.set(order, judged.standing, judged.key, judged.verdict)
        if memo is not None:
            memo.put(local_queue, workload.requests, shape)
    else:
        again = in_flight.changed_since(shape.seen) | shape.dirty | own
        shape.seen = in_flight.position
        for name in again:
            order = shape.position.get(name)
            if order is not None:
                judged = _judge(name, workers.get(name), local_queue, workload, policy, in_flight)
                shape.set(order, judged.standing, judged.key, judged.verdict)
    # Verdicts reached with this workload's own share are not another workload's.
    shape.dirty = {c for c in own if c in shape.position}
    return shape


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
    shape = _up_to_date(memo, workload, local_queue, clusters, workers, policy, in_flight)
    verdicts = tuple(shape.verdicts)
    if not shape.fitting and not shape.waiting:
        # "Ever" only when every cluster is too small: the other reasons (unreachable,
        # not connected, a missing queue) can pass.
        never = all(v.category == "too-large" for v in verdicts)
        lead = "no cluster can ever run it" if never else "no cluster can take it now"
        return Decision(
            (),
            verdicts,
            "none",
            f"{lead}: " + "; ".join(f"{v.cluster}: {v.reason}" for v in verdicts)
            if verdicts
            else "no clusters",
        )
    # A nominated cluster that can still admit the workload stays, fitting or not: it may be
    # admitting it right now (see the module docstring). Filtered clusters leave: admission
    # there is impossible or unwanted.
    standing = {
        c: shape.standing[shape.position[c]] for c in workload.nominated if c in shape.position
    }
    kept = [c for c, s in standing.items() if s != _OUT]
    anything_fits = bool(shape.fitting)
    # Widening goes on while the workload waits, even where the view says it fits
    # somewhere: nominated where it "fits" and still not admitted after `widenAfter`, the
    # view is what is wrong (work of higher priority queued there first, a stale
    # reservation). Widening only while nothing fits was measured and made P95 worse
    # (BENCHMARKS.md section 4: balanced-10 9.9 -> 12.4 minutes over 8 seeds).
    count = widened_count(policy, workload, now)
    waiting = [c for c in shape.position if shape.standing[shape.position[c]] != _OUT]
    hedge = 0
    if not anything_fits and held(workload, workers, local_queue, waiting):
        if not kept:
            return Decision((), verdicts, "held", held_summary(verdicts))
        count = 0
    elif (
        not anything_fits
        and policy.hedge_clusters > count
        and hedged(workload, workers, local_queue, waiting, policy.hedge_share)
    ):
        count = hedge = min(policy.hedge_clusters, MAX_NOMINATIONS)
    # `count` is how many clusters where the workload fits to reach (or, when nothing fits,
    # how many to wait on); a kept cluster that only waits does not count toward it when
    # another fits, so a full nominated cluster gains a companion rather than losing its
    # place. Never a reason to drop a kept cluster.
    counted = [c for c in kept if standing[c] == _FITS] if anything_fits else kept
    wanted = max(0, count - len(counted))
    more: list[str] = []
    if wanted:
        # The best `wanted` of the rest: those that fit first, then those that wait, each
        # by (key, config order). A kept cluster may rank among them, so look that much
        # further.
        reach = wanted + len(kept)
        best = (
            [min(shape.fitting.values())]
            if reach == 1 and shape.fitting
            else heapq.nsmallest(reach, shape.fitting.values())
        )
        if len(best) < reach:
            best += heapq.nsmallest(reach - len(best), shape.waiting.values())
        more = [t[2].cluster for t in best if t[2].cluster not in kept][:wanted]
    chosen = (kept + more)[:MAX_NOMINATIONS]
    by_name = {v.cluster: v for v in (verdicts[shape.position[c]] for c in chosen)}
    outcome = "nominated" if any(by_name[c].status == "fits" for c in chosen) else "waiting"
    summary = "; ".join(f"{c}: {by_name[c].reason}" for c in chosen)
    if hedge:
        summary = hedged_summary(hedge, policy.hedge_share, summary)
    return Decision(tuple(chosen), verdicts, outcome, summary)
