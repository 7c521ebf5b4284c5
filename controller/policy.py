"""The dispatch policy: filter, score, choose. Pure: plain data in, plain data out.

For one workload it looks at every cluster of the MultiKueue check's config, says for
each why it is out or how well the workload fits there, and picks the clusters to
nominate. Fit is judged against each worker's Kueue quota (nominal minus reserved minus
what is already in flight to it), the way Kueue on that worker will judge it: resource
group by resource group, the first flavor in order that holds every requested resource
of the group. Borrowing from a cohort is not counted: the estimate stays on the safe side.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from decimal import Decimal

from controller.model import (
    MAX_NOMINATIONS,
    Decision,
    FlavorCapacity,
    InFlight,
    Policy,
    QueueCapacity,
    Resources,
    Verdict,
    WorkerView,
    WorkloadView,
)

_ZERO = Decimal(0)


def show(resource: str, amount: Decimal) -> str:
    """Amounts as people read them: cores, GiB, plain counts."""
    if resource == "memory" or resource.endswith("storage"):
        gib = amount / Decimal(1024**3)
        return f"{gib.normalize():f}Gi" if gib >= 1 or amount == 0 else f"{amount:f}"
    return f"{amount.normalize():f}"


def _in_flight_by_flavor(
    in_flight: Iterable[InFlight], cluster: str, cq: str
) -> dict[str, Resources]:
    used: dict[str, Resources] = {}
    for item in in_flight:
        if item.cluster != cluster or item.cluster_queue != cq:
            continue
        for resource, amount in item.requests.items():
            flavor = item.flavors.get(resource)
            if flavor is not None:
                bucket = used.setdefault(flavor, {})
                bucket[resource] = bucket.get(resource, _ZERO) + amount
    return used


def _free(flavor: FlavorCapacity, in_flight: Resources, resource: str) -> Decimal:
    return (
        flavor.nominal.get(resource, _ZERO)
        - flavor.reserved.get(resource, _ZERO)
        - in_flight.get(resource, _ZERO)
    )


class _Fit:
    """How a workload's requests land on one ClusterQueue."""

    def __init__(
        self, queue: QueueCapacity, requests: Resources, in_flight: dict[str, Resources]
    ) -> None:
        self.flavors: dict[str, str] = {}
        self.fits = True
        self.possible = True
        self.headroom = Decimal(1)  # smallest share of a flavor left free after placement
        self.deficit = _ZERO  # largest share of a flavor missing to fit now
        self.blocker = ""
        for group in queue.groups:
            wanted = {r: a for r, a in requests.items() if r in group[0].nominal and a > 0}
            if wanted:
                self._place(group, wanted, in_flight)

    def _place(
        self, group: Sequence[FlavorCapacity], wanted: Resources, in_flight: dict[str, Resources]
    ) -> None:
        best_wait: tuple[Decimal, FlavorCapacity] | None = None
        for flavor in group:
            used = in_flight.get(flavor.name, {})
            if any(flavor.nominal.get(r, _ZERO) < a for r, a in wanted.items()):
                continue  # this flavor can never hold it
            short = max((a - _free(flavor, used, r)) / flavor.nominal[r] for r, a in wanted.items())
            if short <= 0:
                left = min(
                    (_free(flavor, used, r) - a) / flavor.nominal[r] for r, a in wanted.items()
                )
                self.headroom = min(self.headroom, left)
                for r in wanted:
                    self.flavors[r] = flavor.name
                return
            if best_wait is None or short < best_wait[0]:
                best_wait = (short, flavor)
        self.fits = False
        if best_wait is None:
            self.possible = False
            biggest = {r: max(f.nominal.get(r, _ZERO) for f in group) for r in wanted}
            r = next(r for r, a in wanted.items() if biggest[r] < a)
            self.blocker = (
                f"never fits: needs {r} {show(r, wanted[r])}, the largest flavor "
                f"offers {show(r, biggest[r])}"
            )
            return
        short, flavor = best_wait
        self.deficit = max(self.deficit, short)
        used = in_flight.get(flavor.name, {})
        r = max(wanted, key=lambda r: (wanted[r] - _free(flavor, used, r)) / flavor.nominal[r])
        self.blocker = (
            f"full now: needs {r} {show(r, wanted[r])}, "
            f"{show(r, max(_free(flavor, used, r), _ZERO))} free in {flavor.name}"
        )
        for res in wanted:
            self.flavors[res] = flavor.name


def _load(queue: QueueCapacity, in_flight: dict[str, Resources]) -> Decimal:
    """Share of the queue's quota in use or in flight, over all flavors and resources."""
    shares = [
        (f.reserved.get(r, _ZERO) + in_flight.get(f.name, {}).get(r, _ZERO)) / nominal
        for group in queue.groups
        for f in group
        for r, nominal in f.nominal.items()
        if nominal > 0
    ]
    return max(shares, default=_ZERO)


def _filter(
    worker: WorkerView | None, name: str, workload: WorkloadView, policy: Policy
) -> tuple[str, str, QueueCapacity | None]:
    """(category, reason) of why the cluster is out, or ("", "", its ClusterQueue)."""
    if worker is None:
        return "unknown-cluster", "no MultiKueueCluster of this name", None
    if not worker.connected:
        return "disconnected", "not connected (its MultiKueueCluster is not Active)", None
    if not worker.healthy:
        reason = f"unreachable for the dispatcher: {worker.health_reason or 'no data'}"
        return "unreachable", reason, None
    mismatch = [f"{k}={v}" for k, v in policy.cluster_selector.items() if worker.labels.get(k) != v]
    if mismatch:
        return "selector", f"labels do not match {', '.join(mismatch)} (policy {policy.name})", None
    cq_name = worker.local_queues.get(f"{workload.namespace}/{workload.queue_name}")
    if cq_name is None:
        reason = f"no LocalQueue {workload.namespace}/{workload.queue_name} on this worker"
        return "no-local-queue", reason, None
    queue = worker.queues.get(cq_name)
    if queue is None:
        reason = f"its LocalQueue points to ClusterQueue {cq_name}, which does not exist"
        return "no-cluster-queue", reason, None
    if not queue.active:
        return "inactive-queue", f"ClusterQueue {cq_name} is not active", None
    missing = sorted(r for r, a in workload.requests.items() if a > 0 and r not in queue.covered())
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


def decide(
    workload: WorkloadView,
    clusters: Sequence[str],
    workers: dict[str, WorkerView],
    policy: Policy,
    in_flight: Iterable[InFlight],
    now: datetime,
) -> Decision:
    """Nominations for `workload` among `clusters` (its MultiKueueConfig, in order)."""
    pending = [i for i in in_flight if i.workload != workload.key]
    verdicts: list[Verdict] = []
    fitting: list[tuple[Decimal, int, Verdict]] = []
    waiting: list[tuple[Decimal, int, Verdict]] = []
    for order, name in enumerate(clusters):
        category, reason, queue = _filter(workers.get(name), name, workload, policy)
        if queue is None:
            verdicts.append(Verdict(name, "filtered", reason, category=category))
            continue
        used = _in_flight_by_flavor(pending, name, queue.name)
        fit = _Fit(queue, workload.requests, used)
        if fit.fits:
            where = ", ".join(sorted(set(fit.flavors.values()))) or "no quota needed"
            verdict = Verdict(
                name,
                "fits",
                f"fits in {where}; {fit.headroom:.0%} of the tightest flavor left free after it",
                float(fit.headroom),
                fit.flavors,
            )
            key = {
                "MostFreeQuota": -fit.headroom,
                "BestFit": fit.headroom,
                "OrderedSpillover": _ZERO,
            }[policy.strategy]
            fitting.append((key, order, verdict))
        elif fit.possible:
            load = _load(queue, used)
            verdict = Verdict(name, "waits", fit.blocker, float(-fit.deficit), fit.flavors)
            key = fit.deficit if policy.when_nothing_fits == "WaitOnBest" else load
            waiting.append((key, order, verdict))
        else:
            verdict = Verdict(name, "filtered", fit.blocker, category="too-large")
        verdicts.append(verdict)
    ranked = [v for _, _, v in sorted(fitting, key=lambda t: (t[0], t[1]))]
    ranked += [v for _, _, v in sorted(waiting, key=lambda t: (t[0], t[1]))]
    if not ranked:
        return Decision(
            (),
            tuple(verdicts),
            "none",
            "no cluster can ever run it: " + "; ".join(f"{v.cluster}: {v.reason}" for v in verdicts)
            if verdicts
            else "no clusters",
        )
    best = {v.cluster: v for v in ranked}
    count = widened_count(policy, workload, now)
    # Keep nominations that still fit (or still are the best wait when nothing fits), so
    # a changing snapshot does not make the workload hop; add the best of the rest when
    # widening.
    anything_fits = bool(fitting)
    kept = [
        c
        for c in workload.nominated
        if c in best and (best[c].status == "fits" or not anything_fits)
    ]
    # `count` is how many to reach, never a reason to drop a cluster that still fits.
    more = [v.cluster for v in ranked if v.cluster not in kept][: max(0, count - len(kept))]
    chosen = (kept + more)[:MAX_NOMINATIONS]
    outcome = "nominated" if any(best[c].status == "fits" for c in chosen) else "waiting"
    summary = "; ".join(f"{c}: {best[c].reason}" for c in chosen)
    return Decision(tuple(chosen), tuple(verdicts), outcome, summary)
