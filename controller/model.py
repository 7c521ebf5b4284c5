"""Plain data the dispatch policy reads: a workload's demand, each worker's queues and
health, what is already in flight. No API server, no Kubernetes client types."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple, Protocol


def _official_quantity_module() -> Any:
    """The official client's `kubernetes.utils.quantity`, loaded from its own file: that
    module needs only `decimal`, while importing it the usual way runs `kubernetes/__init__`,
    which loads the whole synchronous client (14 MB and 0.4 s at start, for two functions)."""
    package = importlib.util.find_spec("kubernetes")  # located, not imported
    if package is not None and package.origin:
        path = Path(package.origin).parent / "utils" / "quantity.py"
        spec = importlib.util.spec_from_file_location("_mkf_kubernetes_quantity", path)
        if spec is not None and spec.loader is not None and path.exists():
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    from kubernetes.utils import quantity

    return quantity


_QUANTITY = _official_quantity_module()
parse_quantity: Callable[[object], Any] = _QUANTITY.parse_quantity
format_quantity: Callable[..., str] = _QUANTITY.format_quantity

# resource name -> amount in milli-units of its base unit (cpu: millicores, memory:
# millibytes): exact integers, and an order of magnitude faster to add and compare than
# Decimal (the policy's fit checks are its hot path).
Resources = dict[str, int]
MILLI = 1000


def milli(quantity: object) -> int:
    """A Kubernetes quantity ("500m", "32Gi", 4) in milli-units; ValueError if it is none."""
    return int(parse_quantity(quantity) * MILLI)


STRATEGIES = ("MostFreeQuota", "BestFit", "OrderedSpillover")
WHEN_NOTHING_FITS = ("WaitOnBest", "LeastLoaded")
MAX_NOMINATIONS = 20  # Kueue's limit on status.nominatedClusterNames


@dataclass(frozen=True)
class FlavorCapacity:
    name: str
    nominal: Resources
    reserved: Resources


# The quota that the admitted workloads of one priority hold in a queue:
# (priority, flavor -> resource -> amount).
Held = tuple[int, dict[str, Resources]]


@dataclass(frozen=True)
class QueueCapacity:
    """One ClusterQueue on a worker: resource groups, each an ordered list of flavors."""

    name: str
    groups: tuple[tuple[FlavorCapacity, ...], ...]
    pending: int = 0  # status.pendingWorkloads
    active: bool = True
    # spec.queueingStrategy is StrictFIFO (Kueue's default is BestEffortFIFO): a head that
    # does not fit holds back everything behind it.
    strict_fifo: bool = False
    # spec.preemption.withinClusterQueue is not Never (Kueue's default is Never): a
    # workload that does not fit may evict lower-priority work admitted in the queue.
    preempts: bool = False
    # With withinClusterQueue LowerPriority, the quota held by the workloads admitted in the
    # queue (Kueue's preemption candidates), per priority, lowest first; () when nothing
    # holds any. None: not known (another policy, or the worker's Workloads not read), and
    # the queue may preempt for anything.
    held: tuple[Held, ...] | None = None

    @cached_property
    def covered(self) -> frozenset[str]:
        return frozenset(r for group in self.groups for f in group for r in f.nominal)

    @cached_property
    def nominal_total(self) -> Resources:
        """resource -> its nominal quota summed over every flavor."""
        total: Resources = {}
        for group in self.groups:
            for flavor in group:
                for resource, amount in flavor.nominal.items():
                    total[resource] = total.get(resource, 0) + amount
        return total

    @cached_property
    def _below(self) -> dict[int, dict[str, Resources]]:
        return {}

    def held_below(self, priority: int) -> dict[str, Resources]:
        """flavor -> resource -> the quota held by workloads of lower priority than
        `priority` (only what `held` knows)."""
        found = self._below.get(priority)
        if found is None:
            found = {}
            for level, usage in self.held or ():
                if level >= priority:
                    break
                for flavor, amounts in usage.items():
                    total = found.setdefault(flavor, {})
                    for r, a in amounts.items():
                        total[r] = total.get(r, 0) + a
            self._below[priority] = found
        return found


# On a worker's MultiKueueCluster while its stack has it cordoned (workers[].cordoned):
# nothing new is nominated there. Read from the object the dispatcher watches anyway, so a
# cordon takes effect without a restart.
CORDONED_LABEL = "multikueue-fleet/cordoned"


@dataclass(frozen=True)
class WorkerView:
    name: str
    connected: bool  # its MultiKueueCluster is Active
    healthy: bool  # our read-only watches on it are up and current
    health_reason: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    local_queues: dict[str, str] = field(default_factory=dict)  # "ns/name" -> ClusterQueue
    queues: dict[str, QueueCapacity] = field(default_factory=dict)
    # Unreachable for the dispatcher, but for less than Kueue's workerLostTimeout: Kueue
    # keeps such a worker (and what it admits) that long, so a nomination there is kept.
    briefly_lost: bool = False

    @property
    def cordoned(self) -> bool:
        return self.labels.get(CORDONED_LABEL) == "true"


@dataclass(frozen=True)
class InFlight:
    """Demand we nominated to a worker that it has not admitted yet: counted against the
    flavor we expected it to take, so two workloads are not sent to the same last slot."""

    workload: str
    cluster: str
    cluster_queue: str
    flavors: dict[str, str]  # resource -> flavor
    requests: Resources


@dataclass(frozen=True)
class WorkloadView:
    key: str  # "namespace/name"
    queue_name: str
    requests: Resources
    nominated: tuple[str, ...] = ()
    # Since when it waits for a cluster (widening counts from it): the manager's
    # QuotaReserved transition, which survives a restart.
    nominated_at: datetime | None = None
    priority: int = 0

    @property
    def namespace(self) -> str:
        return self.key.split("/", 1)[0]


@dataclass(frozen=True)
class Policy:
    name: str = "default"
    cluster_selector: dict[str, str] = field(default_factory=dict)
    # Pack (BestFit), and hedge a whole-worker job on 5: the defaults BENCHMARKS.md section 4
    # chose for the tail over spreading (MostFreeQuota) without hedging (issue 39).
    strategy: str = "BestFit"
    clusters_to_nominate: int = 1
    widen_after_seconds: float = 300.0
    when_nothing_fits: str = "WaitOnBest"
    # A workload that fits nowhere and needs hedge_share or more of every queue that could
    # hold it is nominated to hedge_clusters at once (controller/policy.py `hedged`); 1 is
    # off.
    hedge_clusters: int = 5
    hedge_share: float = 0.9


class Verdict(NamedTuple):
    """What the policy concluded about one cluster, for events, logs and `explain`. A
    NamedTuple: as immutable as a frozen dataclass, and cheap to build, which matters as
    every decision makes one per cluster."""

    cluster: str
    status: str  # "fits", "waits" (could fit once quota frees up) or "filtered"
    # The reason, or how to write it: most verdicts of a busy fleet are never shown (an
    # Event names a few clusters), and formatting every one was a tenth of decision time.
    why: str | Callable[[], str]
    score: float | None = None
    flavors: dict[str, str] = {}  # noqa: RUF012 (never mutated: shared between verdicts)
    category: str = ""  # why a filtered cluster is out, as a metric label ("selector", ...)

    @property
    def reason(self) -> str:
        return self.why if isinstance(self.why, str) else self.why()


# A cluster's standing as a verdict states it, without the reason or the numbers:
# (cluster, status, category).
Standing = tuple[str, str, str]


class Judged(Protocol):
    """Every cluster's verdict on one workload, made when asked for: a decision itself needs
    only the chosen clusters' verdicts, at 100 clusters making the others was most of a
    decision's time, and the controller reads them only when it writes an Event (and then
    mostly their standings)."""

    def verdicts(self) -> tuple[Verdict, ...]: ...  # in config order

    def verdict(self, cluster: str) -> Verdict: ...

    def standings(self) -> tuple[Standing, ...]: ...  # in config order


@dataclass(frozen=True)
class Decision:
    nominate: tuple[str, ...]
    # "nominated", "waiting" (nominated where it does not fit yet), "held" (kept on the
    # manager until a worker has room: policy.held) or "none"
    outcome: str
    summary: str
    judged: Judged = field(repr=False, compare=False)
    chosen: tuple[Verdict, ...] = ()  # the verdicts of `nominate`, in its order

    @cached_property
    def verdicts(self) -> tuple[Verdict, ...]:
        return self.judged.verdicts()

    @cached_property
    def standings(self) -> tuple[Standing, ...]:
        return self.judged.standings()

    def verdict(self, cluster: str) -> Verdict:
        return self.judged.verdict(cluster)

    def blocker(self) -> str:
        """The most common reason clusters were filtered out (for metrics)."""
        if self.outcome == "held":  # no cluster's standing says why: the policy held it
            return "held"
        counts: dict[str, int] = {}
        for _, _, category in self.standings:
            if category:
                counts[category] = counts.get(category, 0) + 1
        return max(sorted(counts), key=lambda c: counts[c]) if counts else "no-clusters"
