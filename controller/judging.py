"""The rules both judging engines share: why a cluster is out (`screen`), the verdict on a
cluster whose queue the filter kept, how clusters rank where the workload fits and where
it waits, and one cluster judged from scratch (`judge`). `Judgement` is what an engine
hands the decision (controller/policy.py): every cluster's standing on one workload. The
engines: controller/judging_each.py judges cluster by cluster, controller/judging_board.py
reads columns kept across decisions; both give the same judgement. Pure.

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
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, NamedTuple, Protocol

from controller.fit import EMPTY, ZERO, Fit, Missing, fits_reason, queue_load
from controller.in_flight_index import InFlightIndex
from controller.model import (
    CORDONED_LABEL,
    Judged,
    Policy,
    QueueCapacity,
    Resources,
    Verdict,
    WorkerView,
    WorkloadView,
)


def wanted_of(requests: Resources) -> tuple[str, ...]:
    """The resources a workload asks a positive amount of, in its order: all the fit reads."""
    return tuple(r for r, a in requests.items() if a > 0)


def screen(
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


FITS, WAITS, OUT = 0, 1, 2


# How promising a cluster where the workload waits is, best first (the first part of its
# rank): its queue can preempt for it now, it preempts but cannot now, it never preempts
# (or has nothing admitted), its StrictFIFO queue is stuck.
CAN_PREEMPT, MAY_PREEMPT, NO_PREEMPTION, STUCK = 0, 1, 2, 3

Key = tuple[int, float, float]  # rank among the clusters of the same standing (lower first)
_NO_KEY: Key = (0, 0.0, 0.0)
# A cluster's place in ranking: its key, then its place in the config, then its name.
Ranked = tuple[Key, int, str]


class ClusterJudged(NamedTuple):
    """One cluster's verdict on one workload."""

    verdict: Verdict
    standing: int  # FITS, WAITS or OUT
    key: Key


def stuck(queue: QueueCapacity, cluster: str, workload: WorkloadView) -> int:
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


def verdict_on(
    name: str, queue: QueueCapacity, fit: Fit, ahead: int, in_flight: int = 0
) -> tuple[Verdict, int]:
    """The verdict on a cluster whose queue the filter kept, and its standing; `in_flight`:
    the other workloads nominated there and not yet admitted."""
    if ahead:
        why = (
            f"queue stuck: StrictFIFO ClusterQueue {queue.name} has {ahead} workload(s) "
            "pending ahead, nothing behind its head is admitted"
        )
        # Scored as short of its whole quota at least: nothing gets in before the head does.
        return Verdict(name, "waits", why, float(-max(fit.deficit, 1.0)), fit.flavors), WAITS
    if fit.fits:
        why = partial(fits_reason, fit.flavors, fit.headroom, in_flight if crowd(in_flight) else 0)
        return Verdict(name, "fits", why, float(fit.headroom), fit.flavors), FITS
    if fit.possible:
        return Verdict(name, "waits", fit.blocker, float(-fit.deficit), fit.flavors), WAITS
    return Verdict(name, "filtered", fit.blocker, category="too-large"), OUT


# Kueue v0.19.2's MultiKueue client to a worker runs at client-go's defaults, 5 requests a
# second and a burst of 10 (pkg/controller/admissionchecks/multikueue/multikueuecluster.go
# sets neither; DefaultQPS and DefaultBurst in k8s.io/client-go/rest/config.go; kueue issue
# 14973), and every copy is created through the client of its worker. Where a workload
# fits, a cluster with this many nominations or more in flight ranks after one with
# fewer, by tens (`crowd`): a burst of small jobs that would all fit tightest on one worker
# goes ten at a time to each worker where it fits instead of queueing on one client
# (BENCHMARKS.md section 6: packing alone took a burst of 200 at AllAtOnce's rate, 1.00,
# where spreading gave 1.5). Below it, a strategy ranks as it says.
CLIENT_BURST = 10


def crowd(in_flight: int) -> int:
    """Which ten of nominations in flight a cluster is in: 0 below CLIENT_BURST."""
    return in_flight // CLIENT_BURST


def fit_key(strategy: str, headroom: float, device: int | None, in_flight: int = 0) -> Key:
    """Rank among the clusters where the workload fits; `in_flight`: how many other
    workloads are nominated there and not yet admitted (`crowd`)."""
    tens = crowd(in_flight)
    if strategy == "MostFreeQuota":
        # Most free quota, but a workload asking for devices goes first to the clusters
        # with the fewest of them that hold it: 1-GPU jobs do not take one GPU from each
        # 8-GPU worker while 1-GPU workers stand idle, leaving no worker for an 8-GPU
        # job. Where every worker has the same devices, this is most free quota alone
        # (both measured in BENCHMARKS.md section 4: mixed-gpu, balanced-10).
        return (tens, -headroom, 0.0) if device is None else (tens, device, -headroom)
    return (tens, headroom if strategy == "BestFit" else 0.0, 0.0)


def _wait_key(policy: Policy, first: int, deficit: float, load: Callable[[], float]) -> Key:
    """Rank among the clusters where the workload waits. `first`: where the queue may
    preempt, the workload can get in before anything ends there; elsewhere it waits for
    running work to finish, however small its deficit; behind a stuck queue's head, last."""
    return (first, deficit if policy.when_nothing_fits == "WaitOnBest" else load(), 0.0)


def _first(queue: QueueCapacity, ahead: int, priority: int, missing: Missing) -> int:
    if ahead:
        return STUCK
    if not may_preempt(queue):
        return NO_PREEMPTION
    return CAN_PREEMPT if can_preempt(queue, priority, missing) else MAY_PREEMPT


def may_preempt(queue: QueueCapacity) -> bool:
    """Whether the queue may preempt for some workload: it preempts, and has admitted work
    or its admitted work is not known."""
    return queue.preempts and queue.held != ()


def can_preempt(queue: QueueCapacity, priority: int, missing: Missing) -> bool:
    """Whether evicting the queue's work of lower priority than `priority` would free
    what a workload is `missing` (flavor, resource -> amount beyond what is free; see the
    module docstring). Where the admitted work is not known, whether it may preempt."""
    if not may_preempt(queue):
        return False
    if queue.held is None:
        return True
    below = queue.held_below(priority)
    return bool(below) and all(
        (below.get(flavor) or EMPTY).get(r, ZERO) >= amount
        for (flavor, r), amount in missing.items()
    )


def judge(
    name: str,
    worker: WorkerView | None,
    local_queue: str,
    wanted: tuple[str, ...],
    workload: WorkloadView,
    policy: Policy,
    in_flight: InFlightIndex,
) -> ClusterJudged:
    """One cluster judged from scratch."""
    category, reason, queue = screen(worker, local_queue, wanted, policy)
    if queue is None:
        return ClusterJudged(Verdict(name, "filtered", reason, category=category), OUT, _NO_KEY)
    used = in_flight.usage(name, queue.name, workload.key)
    # Nominated there and nothing waits in the ClusterQueue: the worker's Kueue has taken
    # the workload's copy, so its reservation may already hold this workload's own demand
    # (the manager learns of the admission only later, through clusterName).
    own = workload.requests if queue.pending == 0 and name in workload.nominated else EMPTY
    fit = Fit(queue, workload.requests, used, own)
    ahead = stuck(queue, name, workload) if fit.possible else 0
    count = in_flight.count(name, queue.name, workload.key)
    verdict, standing = verdict_on(name, queue, fit, ahead, count)
    if standing == FITS:
        key = fit_key(policy.strategy, fit.headroom, fit.device_quota, count)
    elif standing == WAITS:
        first = _first(queue, ahead, workload.priority, fit.missing)
        key = _wait_key(policy, first, fit.deficit, lambda: queue_load(queue, used))
    else:
        key = _NO_KEY
    return ClusterJudged(verdict, standing, key)


class Judgement(Judged, Protocol):
    """Every cluster's standing on one workload: the best places where it fits, and where it
    waits, ranked, and the verdicts."""

    position: dict[str, int]  # cluster -> its (first) place in the config

    def fits(self) -> bool: ...  # anywhere

    def best(self, count: int) -> list[Ranked]: ...  # where it fits, best first

    def waits(self) -> bool: ...  # anywhere

    def best_waiting(self, count: int) -> list[Ranked]: ...  # where it waits, best first

    def standing(self, name: str) -> int: ...

    def preempts_now(self, name: str) -> bool: ...  # waits there, but can preempt for it now


def pick(rank: Sequence[Any], top: Any, unranked: Any, count: int) -> list[int]:
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


def smallest(count: int, ranked: list[Ranked]) -> list[Ranked]:
    if count == 1 and ranked:
        return [min(ranked)]
    return heapq.nsmallest(count, ranked)
