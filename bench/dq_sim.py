"""A discrete-event model of a MultiKueue fleet (Kueue v0.19.2) and three dispatchers.

The rules modelled, each from the upstream file (kubernetes-sigs/kueue, tag v0.19.2):
- Remote copies exist only on nominated clusters; a copy on a cluster no longer nominated
  is deleted (pkg/controller/admissionchecks/multikueue/workload.go,
  nominateAndSynchronizeWorkers).
- AllAtOnce nominates every cluster of the MultiKueueConfig at once (same function, the
  `MultiKueueDispatcherModeAllAtOnce` branch).
- Incremental nominates the not-yet-nominated clusters in alphabetical order, 3 more per
  round, a round lasting 5 minutes, appending to the earlier ones
  (pkg/controller/workloaddispatcher/incrementaldispatcher.go: DefaultStepSize,
  incrementalDispatcherRoundTimeout, getNextNominatedWorkers).
- The first copy admitted wins: the manager sets clusterName to it and deletes the other
  copies (workload.go, "6b. An admitting remote is visible"); clusterName may only be set
  to a cluster in nominatedClusterNames as they were (pkg/webhooks/workload_webhook.go,
  validateClusterNameUpdate), so an admission on a cluster dropped meanwhile is lost.
- A copy evicted on its worker sets the check to Retry, which evicts the workload on the
  manager: its quota is released and it goes back to the manager's queue (workload.go,
  "4. Handle workload eviction"; pkg/controller/core/workload_controller.go, "Evicted due
  to" admission checks in Retry).
- A LeaderWorkerSet group goes to one cluster: only the primary component (lowest index)
  is dispatched, the others follow the cluster one of them got (workload.go,
  isPrimaryComponentWorkload, getComponentWorkloadsClusterName, syncToSingleCluster).
- A worker's Kueue orders its queue by priority then creation time; StrictFIFO stops at a
  head that does not fit, BestEffortFIFO tries the rest; `withinClusterQueue:
  LowerPriority` lets a workload evict lower-priority admitted ones of its ClusterQueue.
  Multikueue's orchestrated preemption (MultiKueueOrchestratedPreemption) is alpha and off
  by default in v0.19.2 (pkg/features/kube_features.go), so copies preempt freely.
"""

from __future__ import annotations

import heapq
import itertools
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dq_trace import GPU, Job, Resources, Scenario, WorkerSpec, res

from controller.model import FlavorCapacity, QueueCapacity, WorkerView

# The interface the simulation drives, and the names of the queue every worker has: the
# dispatchers (dq_dispatchers.py) build on them.
CQ = "cq"
LOCAL_QUEUE = "team/user-queue"


class Dispatcher(ABC):
    """Chooses nominatedClusterNames for a workload whose check is Pending."""

    name = ""
    refreshes = False  # decides again when its view of the workers changes

    widen_after = 0.0  # seconds between widenings, if it widens

    @abstractmethod
    def nominate(self, sim: Sim, wl: Wl) -> tuple[str, ...]: ...

    def done(self, wl: Wl) -> None:  # noqa: B027 (a hook; Kueue's two keep nothing)
        """`wl` was admitted or evicted: forget what was in flight for it."""


@dataclass
class Settings:
    admission_delay: float = 2.0  # a worker's Kueue: event to admission
    staleness: float = 5.0  # the dispatcher's view of the workers is this old at most
    sync_delay: float = 1.0  # the manager's MultiKueue controller reacting to a remote
    horizon: float = 12 * 3600.0  # stop; what has not run by then never ran


@dataclass(eq=False)
class Copy:
    """A Workload in a worker's queue: a MultiKueue copy (`owner` set) or local work."""

    key: str
    worker: str
    requests: Resources
    priority: int
    created: float
    duration: float
    owner: Wl | None = None
    admitted_at: float | None = None
    flavors: dict[str, str] = field(default_factory=dict)
    alive: bool = True


@dataclass(eq=False)
class Wl:
    """A Workload on the manager."""

    key: str
    job: Job
    index: int
    arrival: float
    order: int
    reserved_at: float | None = None
    first_reserved: float | None = None
    admitted_at: float | None = None
    cluster: str | None = None
    nominated: tuple[str, ...] = ()
    nominated_at: float | None = None
    copies: dict[str, Copy] = field(default_factory=dict)
    finished_at: float | None = None
    round: int = 0  # Incremental's rounds, to ignore a stale round timer
    evictions: int = 0

    @property
    def requests(self) -> Resources:
        return self.job.requests


class Worker:
    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        self.groups: list[list[tuple[str, Resources]]] = [
            [("default", {"cpu": spec.cpu * 1000, "memory": res(0, spec.memory_gi)["memory"]})]
        ]
        if spec.gpu:
            self.groups.append([("gpu", {GPU: spec.gpu * 1000})])
        self.used: dict[str, Resources] = {f: {} for g in self.groups for f, _ in g}
        self.pending: list[Copy] = []
        self.running: list[Copy] = []
        self.pass_due = False
        self.share_area = 0.0
        self.share_since = 0.0

    def assign(self, requests: Resources) -> dict[str, str] | None:
        """resource -> flavor, the first flavor of each group that holds the request."""
        out: dict[str, str] = {}
        for group in self.groups:
            wanted = {r: a for r, a in requests.items() if r in group[0][1] and a > 0}
            if not wanted:
                continue
            for flavor, nominal in group:
                used = self.used[flavor]
                if all(used.get(r, 0) + a <= nominal.get(r, 0) for r, a in wanted.items()):
                    out.update(dict.fromkeys(wanted, flavor))
                    break
            else:
                return None
        covered = {r for g in self.groups for _, n in g for r in n}
        return out if all(r in covered for r, a in requests.items() if a > 0) else None

    def charge(self, copy: Copy, sign: int) -> None:
        for r, a in copy.requests.items():
            flavor = copy.flavors.get(r)
            if flavor is not None:
                self.used[flavor][r] = self.used[flavor].get(r, 0) + sign * a

    def share(self) -> float:
        """Dominant share of the quota in use (cores, or GPUs where it has them)."""
        shares = [
            self.used[f].get(r, 0) / n
            for g in self.groups
            for f, nominal in g
            for r, n in nominal.items()
            if r != "memory" and n
        ]
        return max(shares, default=0.0)

    def view(self) -> WorkerView:
        groups = tuple(
            tuple(FlavorCapacity(f, dict(n), dict(self.used[f])) for f, n in g) for g in self.groups
        )
        queue = QueueCapacity(
            CQ,
            groups,
            pending=len(self.pending),
            strict_fifo=self.spec.queueing == "StrictFIFO",
            preempts=self.spec.preemption != "Never",
        )
        return WorkerView(self.spec.name, True, True, "", {}, {LOCAL_QUEUE: CQ}, {CQ: queue})


@dataclass
class Stats:
    copies: int = 0
    preemptions: int = 0  # workloads evicted on workers to make room for a MultiKueue copy
    evictions: int = 0  # MultiKueue workloads evicted on their worker, back to the manager
    lost_admissions: int = 0  # admitted where no longer nominated (webhook rule)
    wasted_admissions: int = 0  # copies admitted after another copy had won
    decisions: int = 0
    decision_seconds: float = 0.0
    nominations: list[tuple[float, str, tuple[str, ...]]] = field(default_factory=list)
    admitted: list[tuple[str, str]] = field(default_factory=list)  # (workload, cluster)


class Sim:
    def __init__(self, scenario: Scenario, dispatcher: Dispatcher, settings: Settings) -> None:
        self.s = settings
        self.scenario = scenario
        self.d = dispatcher
        self.workers = {w.name: Worker(w) for w in scenario.workers}
        self.clusters = list(self.workers)
        self.now = 0.0
        self.events: list[tuple[float, int, str, object]] = []
        self.seq = itertools.count()
        self.stats = Stats()
        # The manager's ClusterQueue: the whole fleet's quota.
        self.quota: Resources = {}
        for w in self.workers.values():
            for g in w.groups:
                for _, nominal in g:
                    for r, a in nominal.items():
                        self.quota[r] = self.quota.get(r, 0) + a
        self.manager_used: Resources = {}
        self.manager_queue: list[Wl] = []
        self.wls: list[Wl] = []
        self.groups: dict[str, list[Wl]] = {}
        self.snapshot: dict[str, WorkerView] = {}
        self.waiting: dict[str, Wl] = {}  # primaries with quota, no cluster yet
        self.dirty = True
        for job in scenario.jobs:
            self.at(job.arrival, "arrive", job)
        for local in scenario.local:
            copy = Copy(
                f"local/{next(self.seq)}",
                local.worker,
                local.requests,
                local.priority,
                local.arrival,
                local.duration,
            )
            self.at(local.arrival, "local", copy)
        if dispatcher.refreshes:
            self.at(0.0, "refresh", None)

    def at(self, t: float, kind: str, payload: object) -> None:
        heapq.heappush(self.events, (t, next(self.seq), kind, payload))

    def run(self) -> Sim:
        handlers: dict[str, Callable[[Any], None]] = {
            "arrive": self._arrive,
            "local": self._local,
            "pass": self._pass,
            "sync": self._sync,
            "finish": self._finish,
            "round": self._round,
            "refresh": self._refresh,
        }
        while self.events:
            t, _, kind, payload = heapq.heappop(self.events)
            if t > self.s.horizon:
                break
            self.now = t
            handlers[kind](payload)
        for w in self.workers.values():
            self._account(w)
        return self

    # --- the manager ------------------------------------------------------------------------
    def _arrive(self, job: Job) -> None:
        group = []
        for i in range(job.parts):
            wl = Wl(f"{job.name}-{i}", job, i, job.arrival, len(self.wls))
            self.wls.append(wl)
            group.append(wl)
            self.manager_queue.append(wl)
        self.groups[job.name] = group
        self._admit_on_manager()

    def _admit_on_manager(self) -> None:
        """BestEffortFIFO quota reservation on the manager's ClusterQueue."""
        self.manager_queue.sort(key=lambda w: (-w.job.priority, w.arrival, w.order))
        waiting = []
        for wl in self.manager_queue:
            if all(
                self.manager_used.get(r, 0) + a <= self.quota.get(r, 0)
                for r, a in wl.requests.items()
            ):
                for r, a in wl.requests.items():
                    self.manager_used[r] = self.manager_used.get(r, 0) + a
                wl.reserved_at = self.now
                if wl.first_reserved is None:
                    wl.first_reserved = self.now
                self._dispatch(wl)
            else:
                waiting.append(wl)
        self.manager_queue = waiting

    def _release_manager(self, wl: Wl) -> None:
        for r, a in wl.requests.items():
            self.manager_used[r] -= a
        wl.reserved_at = None

    def _assigned(self, wl: Wl) -> str | None:
        return next((m.cluster for m in self.groups[wl.job.name] if m.cluster), None)

    def _dispatch(self, wl: Wl) -> None:
        """The MultiKueue check is Pending with quota reserved: nominate."""
        if wl.reserved_at is None or wl.cluster:
            return
        assigned = self._assigned(wl)
        if assigned is not None:
            self._set_nominated(wl, (assigned,))  # syncToSingleCluster
            return
        if wl.index != 0:
            return  # waits for the primary component
        self.waiting[wl.key] = wl
        if self.d.refreshes and not self.snapshot:
            self._take_snapshot()
        started = time.perf_counter()
        chosen = self.d.nominate(self, wl)
        self.stats.decision_seconds += time.perf_counter() - started
        self.stats.decisions += 1
        if chosen != wl.nominated:
            self._set_nominated(wl, chosen)

    def _set_nominated(self, wl: Wl, chosen: tuple[str, ...]) -> None:
        if wl.nominated_at is None and chosen:
            wl.nominated_at = self.now
        wl.nominated = chosen
        self.stats.nominations.append((self.now, wl.key, chosen))
        for cluster in list(wl.copies):
            if cluster not in chosen:
                self._delete_copy(wl.copies.pop(cluster))
        for cluster in chosen:
            if cluster not in wl.copies:
                copy = Copy(
                    wl.key, cluster, wl.requests, wl.job.priority, self.now, wl.job.duration, wl
                )
                wl.copies[cluster] = copy
                self.stats.copies += 1
                self.workers[cluster].pending.append(copy)
                self._wake(cluster)

    def _delete_copy(self, copy: Copy) -> None:
        copy.alive = False
        worker = self.workers[copy.worker]
        if copy.admitted_at is not None:
            self._account(worker)
            worker.charge(copy, -1)
            worker.running.remove(copy)
        else:
            worker.pending.remove(copy)
        self._wake(copy.worker)

    def _sync(self, wl: Wl) -> None:
        """The manager sees an admitted copy: the first one admitted wins."""
        if wl.cluster or wl.reserved_at is None:
            return
        admitted = sorted(
            (c for c in wl.copies.values() if c.admitted_at is not None),
            key=lambda c: (c.admitted_at, c.worker),
        )
        if not admitted:
            return
        winner = admitted[0]
        if winner.worker not in wl.nominated:
            self.stats.lost_admissions += 1  # the webhook refuses this clusterName
            self._delete_copy(wl.copies.pop(winner.worker))
            return
        wl.cluster = winner.worker
        self.waiting.pop(wl.key, None)
        if wl.admitted_at is None:
            wl.admitted_at = winner.admitted_at
        self.stats.admitted.append((wl.key, winner.worker))
        self.stats.wasted_admissions += len(admitted) - 1
        for cluster in list(wl.copies):
            if cluster != winner.worker:
                self._delete_copy(wl.copies.pop(cluster))
        wl.nominated = ()
        self.d.done(wl)
        for member in self.groups[wl.job.name]:
            if member is not wl:
                self._dispatch(member)

    def _evicted(self, wl: Wl) -> None:
        """Its copy was evicted on the worker: Retry, evicted on the manager, requeued."""
        self.stats.evictions += 1
        wl.evictions += 1
        self.waiting.pop(wl.key, None)
        for cluster in list(wl.copies):
            self._delete_copy(wl.copies.pop(cluster))
        wl.cluster = None
        wl.nominated = ()
        wl.nominated_at = None
        wl.round += 1
        self.d.done(wl)
        self._release_manager(wl)
        self.manager_queue.append(wl)
        self._admit_on_manager()

    def _round(self, payload: tuple[Wl, int]) -> None:
        wl, number = payload
        if number == wl.round and wl.reserved_at is not None and not wl.cluster:
            self._dispatch(wl)

    # --- the dispatcher's view ----------------------------------------------------------------
    def _take_snapshot(self) -> None:
        self.snapshot = {name: w.view() for name, w in self.workers.items()}

    def _refresh(self, _: object) -> None:
        """The watches deliver what changed at most `staleness` ago: decide again for the
        workloads still waiting, as the controller does on a worker's queue update, and
        when widening is due."""
        changed, self.dirty = self.dirty, False
        if changed:
            self._take_snapshot()
        widen = self.d.widen_after
        for wl in list(self.waiting.values()):
            due = (
                widen
                and wl.nominated_at is not None
                and (
                    (self.now - wl.nominated_at) % widen < self.s.staleness
                    and self.now - wl.nominated_at >= widen
                )
            )
            if changed or due or not wl.nominated:
                self._dispatch(wl)
        if self.events or self.waiting:
            self.at(self.now + self.s.staleness, "refresh", None)

    # --- the workers --------------------------------------------------------------------------
    def _local(self, copy: Copy) -> None:
        self.workers[copy.worker].pending.append(copy)
        self._wake(copy.worker)

    def _wake(self, name: str) -> None:
        self.dirty = True
        worker = self.workers[name]
        if not worker.pass_due:
            worker.pass_due = True
            self.at(self.now + self.s.admission_delay, "pass", worker)

    def _account(self, worker: Worker) -> None:
        worker.share_area += (self.now - worker.share_since) * worker.share()
        worker.share_since = self.now

    def _pass(self, worker: Worker) -> None:
        """One scheduling cycle of the worker's Kueue over its ClusterQueue."""
        worker.pass_due = False
        worker.pending.sort(key=lambda c: (-c.priority, c.created, c.key))
        for copy in list(worker.pending):
            if not copy.alive:
                continue  # deleted during this cycle (a workload evicted meanwhile)
            flavors = worker.assign(copy.requests)
            if flavors is None and worker.spec.preemption == "LowerPriority":
                flavors = self._preempt(worker, copy)
            if flavors is None:
                if worker.spec.queueing == "StrictFIFO":
                    break
                continue
            self._account(worker)
            copy.flavors = flavors
            copy.admitted_at = self.now
            worker.charge(copy, 1)
            worker.pending.remove(copy)
            worker.running.append(copy)
            self.dirty = True
            self.at(self.now + copy.duration, "finish", copy)
            if copy.owner is not None:
                self.at(self.now + self.s.sync_delay, "sync", copy.owner)

    def _preempt(self, worker: Worker, copy: Copy) -> dict[str, str] | None:
        """Evict lower-priority admitted workloads, lowest priority and newest first, until
        `copy` fits; nothing if it would not fit even then."""
        victims = sorted(
            (c for c in worker.running if c.priority < copy.priority),
            key=lambda c: (c.priority, -(c.admitted_at or 0.0)),
        )
        taken: list[Copy] = []
        for victim in victims:
            worker.charge(victim, -1)
            taken.append(victim)
            if worker.assign(copy.requests) is not None:
                break
        flavors = worker.assign(copy.requests)
        for victim in taken:
            worker.charge(victim, 1)
        if flavors is None:
            return None
        self._account(worker)
        for victim in taken:
            if copy.owner is not None:
                self.stats.preemptions += 1
            worker.charge(victim, -1)
            worker.running.remove(victim)
            victim.admitted_at = None
            if victim.owner is not None and victim.owner.cluster == worker.spec.name:
                victim.alive = False
                victim.owner.copies.pop(worker.spec.name, None)
                self._evicted(victim.owner)
            else:
                # Local work, or a copy that had not won yet: requeued on this worker.
                victim.alive = False
                requeued = Copy(
                    victim.key,
                    victim.worker,
                    victim.requests,
                    victim.priority,
                    victim.created,
                    victim.duration,
                    victim.owner,
                )
                worker.pending.append(requeued)
                if victim.owner is not None:
                    victim.owner.copies[worker.spec.name] = requeued
        self._wake(worker.spec.name)
        return worker.assign(copy.requests)

    def _finish(self, copy: Copy) -> None:
        if not copy.alive or copy.admitted_at is None:
            return
        worker = self.workers[copy.worker]
        self._account(worker)
        worker.charge(copy, -1)
        worker.running.remove(copy)
        copy.alive = False
        self._wake(copy.worker)
        wl = copy.owner
        if wl is not None:
            if wl.cluster != copy.worker:
                return  # a copy that lost: it was deleted, or is being
            wl.copies.pop(copy.worker, None)
            wl.finished_at = self.now
            self._release_manager(wl)
            self._admit_on_manager()
