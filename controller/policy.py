"""The dispatch policy's decision: for one workload, the clusters to nominate among those
of its MultiKueue check's config, each cluster judged (why it is out, or how well the
workload fits or waits there: controller/judging.py and its two engines, on the arithmetic
of controller/fit.py), then chosen. Pure: plain data in, plain data out; the memo it may
be given (controller/fit_memo.py) saves work and never changes the result.

A cluster the workload is already nominated to stays nominated while the MultiKueue check
is Pending unless admission there became impossible or unwanted (it left the config, it is
disconnected, unreachable for longer than Kueue's workerLostTimeout, the policy's selector
excludes it, its queue is gone or can never hold the workload). Being full is no such
reason: the worker may be admitting this very workload, and Kueue v0.19.2 accepts
`status.clusterName` only when it is in the *old* `nominatedClusterNames`
(validateClusterNameUpdate in pkg/webhooks/workload_webhook.go), so dropping it throws
that admission away.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

from controller.fit_memo import FitMemo
from controller.in_flight_index import InFlightIndex
from controller.judging import CAN_PREEMPT, FITS, OUT, Judgement, judge, wanted_of
from controller.judging_each import EachJudged
from controller.model import (
    MAX_NOMINATIONS,
    Decision,
    Policy,
    QueueCapacity,
    Verdict,
    WorkerView,
    WorkloadView,
)


def widened_count(policy: Policy, workload: WorkloadView, now: datetime) -> int:
    """How many clusters to nominate: the policy's count, grown by that much again for
    every `widenAfter` the workload has waited on its nominations without admission."""
    count = policy.clusters_to_nominate
    if workload.nominated and workload.nominated_at is not None and policy.widen_after_seconds > 0:
        waited = (now - workload.nominated_at).total_seconds()
        count *= 1 + int(waited // policy.widen_after_seconds)
    return min(count, MAX_NOMINATIONS)


def _briefly_lost(cluster: str, workers: dict[str, WorkerView], judgement: Judgement) -> bool:
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


# Where a copy would only wait behind smaller work, a workload that needs at least this share
# of every queue that could hold it waits on the manager instead (`held`).
HOLD_SHARE = 0.5


def _big(workload: WorkloadView, queue: QueueCapacity, share: float) -> bool:
    """Whether the workload needs at least `share` of the queue's nominal quota of some
    resource it asks for."""
    nominal = queue.nominal_total
    return any(a >= share * nominal[r] for r, a in workload.requests.items() if nominal.get(r))


def _every(
    workers: dict[str, WorkerView],
    local_queue: str,
    waiting: Iterable[str],
    ok: Callable[[QueueCapacity], bool],
) -> bool:
    """Whether there is a queue where the workload could wait (`waiting`) and every such
    queue is known and `ok`."""
    some = False
    for name in waiting:
        worker = workers[name]
        queue = worker.queues.get(worker.local_queues.get(local_queue, ""))
        if queue is None or not ok(queue):
            return False
        some = True
    return some


def held(
    workload: WorkloadView,
    workers: dict[str, WorkerView],
    local_queue: str,
    waiting: Iterable[str],
) -> bool:
    """Whether a workload that fits nowhere now is better kept off the workers until one has
    room: every queue where it could wait (`waiting`) admits smaller work past a copy that
    does not fit (BestEffortFIFO, apis/kueue/v1beta2/clusterqueue_types.go 198-201, v0.19.2)
    and never preempts (withinClusterQueue Never, Kueue's default), and it needs at least
    HOLD_SHARE of each. A copy there would hold no place: what frees goes to smaller work
    first, so the worker never drains for it, and widening only adds copies. Kept on the
    manager, it is nominated where it fits once a worker has room (BENCHMARKS.md section 4:
    kueue-defaults and mixed-gpu, copies 1.37 and 1.56 a workload before, 1.02 after, P95
    no worse; on the other six scenarios, where some queue preempts or is StrictFIFO, it
    changes nothing)."""
    return _every(
        workers,
        local_queue,
        waiting,
        lambda q: not q.strict_fifo and not q.preempts and _big(workload, q, HOLD_SHARE),
    )


def hedged(
    workload: WorkloadView,
    workers: dict[str, WorkerView],
    local_queue: str,
    waiting: Iterable[str],
    share: float,
) -> bool:
    """Whether a workload that fits nowhere now needs at least `share` of every queue where
    it could wait (the policy's `hedge_share`): a whole-worker job, whose start waits on a
    worker draining, and which worker drains first cannot be foreseen from quotas. Such a
    workload is nominated to the policy's `hedge_clusters` at once, as AllAtOnce's copies
    race on every worker (BENCHMARKS.md section 4, issue 39: the last percent of the tail)."""
    return _every(workers, local_queue, waiting, lambda q: _big(workload, q, share))


HEDGED = "hedged on up to"


def hedged_summary(count: int, share: float, summary: str) -> str:
    return (
        f"{HEDGED} {count} clusters (it needs {share:.0%} or more of every queue that "
        f"could hold it, and fits in none now): {summary}"
    )


def held_summary(verdicts: Iterable[Verdict]) -> str:
    return (
        "no cluster can take it now; held on the manager until one has room (it needs half "
        "or more of each queue that could hold it, and those admit smaller work first and "
        "never preempt): " + "; ".join(f"{v.cluster}: {v.reason}" for v in verdicts)
    )


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
    wanted = wanted_of(workload.requests)
    names = clusters if isinstance(clusters, list) else list(clusters)
    judgement: Judgement
    if memo is not None and wanted:
        board = memo.board(local_queue, wanted, names, workers, policy, in_flight)
        judgement = board.judge(workload)
    else:
        judged = [
            judge(name, workers.get(name), local_queue, wanted, workload, policy, in_flight)
            for name in names
        ]
        judgement = EachJudged(names, judged)
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
    kept = [c for c, s in standing.items() if s != OUT or _briefly_lost(c, workers, judgement)]
    fits = judgement.fits()
    # Widening goes on while the workload waits, even where the view says it fits
    # somewhere: nominated where it "fits" and still not admitted after `widenAfter`, the
    # view is what is wrong (work of higher priority queued there first, a stale
    # reservation). Widening only while nothing fits was measured and made P95 worse
    # (BENCHMARKS.md section 4: balanced-10 9.9 -> 12.4 minutes over 8 seeds).
    count = widened_count(policy, workload, now)
    waiting = [c for c in judgement.position if judgement.standing(c) != OUT]
    hedge = 0
    if not fits and held(workload, workers, local_queue, waiting):
        # Kept where it is nominated (it may be admitting there), nothing added.
        if not kept:
            return Decision((), "held", held_summary(judgement.verdicts()), judgement)
        count = 0
    elif (
        not fits
        and policy.hedge_clusters > count
        and hedged(workload, workers, local_queue, waiting, policy.hedge_share)
    ):
        count = hedge = min(policy.hedge_clusters, MAX_NOMINATIONS)
    # `count` is how many clusters where the workload fits to reach (or, when nothing fits,
    # how many to wait on); a kept cluster that only waits does not count toward it when
    # another fits, so a full nominated cluster gains a companion rather than losing its
    # place. Never a reason to drop a kept cluster.
    counted = [c for c in kept if standing[c] == FITS] if fits else kept
    wanted_more = max(0, count - len(counted))
    if count and not fits and kept and not any(judgement.preempts_now(c) for c in kept):
        # Nothing fits, and no kept cluster can preempt for it now: where one can (as its
        # Workloads show, not only because its queue preempts), the workload is admitted
        # once the victims are gone, so the best of those joins the kept ones, as a
        # cluster where it fits would (BENCHMARKS.md section 4, issue 30).
        top = judgement.best_waiting(1)
        if top and top[0][0][0] == CAN_PREEMPT and _held_known(workers, top[0][2], local_queue):
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
    if hedge:
        summary = hedged_summary(hedge, policy.hedge_share, summary)
    return Decision(tuple(chosen), outcome, summary, judgement, shown)
