"""A discrete-event model of a MultiKueue fleet (Kueue v0.19.2) for the dispatchers of
bench/dq_dispatchers.py.

The rules modelled, each from the upstream file (kubernetes-sigs/kueue, tag v0.19.2):
- Remote copies exist only on nominated clusters; a copy on a cluster no longer nominated
  is deleted (pkg/controller/admissionchecks/multikueue/workload.go,
  nominateAndSynchronizeWorkers).
- The first copy admitted wins: the manager takes the remote whose Admitted condition has
  the earliest lastTransitionTime (workload.go, bestMatchByCondition, "6. Get the admitting
  remote"). Condition times are serialized to the second (metav1.Time), `Before` is strict
  and the remotes are a Go map, so copies admitted within the same second tie and the
  winner among them is whichever the map yields first: here a seeded random draw.
- The other copies are deleted ("6b. An admitting remote is visible"); a deletion reaches
  the worker's Kueue after `sync_delay` (a pending copy can still be admitted meanwhile) and
  an admitted copy holds its quota until its pods are gone, `release_delay` later.
  `clusterName` may only be set to a cluster in nominatedClusterNames as they were
  (pkg/webhooks/workload_webhook.go, validateClusterNameUpdate), so an admission on a
  cluster dropped meanwhile is lost.
- A copy evicted on its worker sets the check to Retry, which evicts the workload on the
  manager: its quota is released and it goes back to the manager's queue (workload.go,
  "4. Handle workload eviction"; pkg/controller/core/workload_controller.go, "Evicted due
  to" admission checks in Retry).
- A LeaderWorkerSet group goes to one cluster: only the primary component (lowest index)
  is dispatched, the others follow the cluster one of them got (workload.go,
  isPrimaryComponentWorkload, getComponentWorkloadsClusterName, syncToSingleCluster).
- The manager's Kueue orders its queue the same way, and a workload its worker evicted
  (the check's Retry evicts it on the manager with reason AdmissionCheck) by the time of
  that eviction, not its creation (pkg/workload/workload.go GetQueueOrderTimestamp,
  pkg/cache/queue/cluster_queue.go baseCompareFunc: priority, timestamp, then UID): a
  LeaderWorkerSet's workloads, created in the same second, take the manager's quota in no
  order of the set's, and a requeued one goes behind what arrived meanwhile.
- A worker's Kueue orders its queue by priority then creation time (to the second; equal
  ones in no set order, here a seeded draw); StrictFIFO stops at a head that does not fit,
  BestEffortFIFO tries the rest; `withinClusterQueue: LowerPriority` lets a workload evict
  lower-priority admitted ones of its ClusterQueue.
- Preemption is not admission: the scheduler issues the evictions and the preemptor waits
  (pkg/scheduler/scheduler.go lines 493-497: `mode == flavorassigner.Preempt` ->
  issuePreemptions, return). It is admitted in a later cycle, once the victims' quota is
  released (`release_delay` after the eviction), if it still fits then. Victims are chosen
  workloads already being evicted first, then lowest priority, then the most recently
  admitted (pkg/scheduler/preemption/common/ordering.go, CandidatesOrdering), taken until
  the preemptor fits, and then those not needed are given back in reverse order
  (pkg/scheduler/preemption/preemption.go, classicalPreemptions, fillBackWorkloads); a
  victim already being evicted is not evicted again (IssuePreemptions, IsEvicted).
- Multikueue's orchestrated preemption (MultiKueueOrchestratedPreemption) is alpha and off
  by default in v0.19.2 (pkg/features/kube_features.go), so copies preempt freely.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dq_clients import CREATE_JOB, JOB, Clients
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
    reads_snapshot = False  # decides on the watches' view of the workers (`Sim.snapshot`)
    # Writes nominatedClusterNames from outside Kueue (an external dispatcher): Kueue's own
    # two nominate inside the MultiKueue reconcile that sees the reservation.
    writes_nominations = False
    widen_after = 0.0  # seconds between widenings, if it widens

    def period(self, settings: Settings) -> float:
        """How often it looks again at the workers (0: never)."""
        return settings.staleness if self.refreshes else 0.0

    @abstractmethod
    def nominate(self, sim: Sim, wl: Wl) -> tuple[str, ...]: ...

    def done(self, wl: Wl) -> None:  # noqa: B027 (a hook; Kueue's two keep nothing)
        """`wl` was admitted or evicted: forget what was in flight for it."""


@dataclass
class Settings:
    admission_delay: float = 2.0  # a worker's Kueue: event to admission
    staleness: float = 5.0  # the dispatcher's view of the workers is this old at most
    sync_delay: float = 1.0  # a change reaching the other side (manager <-> worker informers)
    release_delay: float = 10.0  # an evicted or deleted admitted workload's pods going away
    # The manager's client to each worker (dq_clients.py): Kueue v0.19.2's send at most 5
    # requests a second, 10 at once, and every reconcile reads from every worker. 0: no
    # limit, every request at once (the default: the hours-long scenarios of section 4).
    worker_qps: float = 0.0
    worker_burst: int = 10
    # A copy's pods start when the manager, having seen its admission, makes its job on the
    # worker (workload.go syncAdmittingRemoteState -> the adapter's SyncJob): until then it
    # holds the worker's quota with nothing running. False: they start at the admission
    # itself, as the model had it when section 4's tables were made.
    job_on_seen: bool = False
    # An external dispatcher's turn, from the manager's reservation to its nomination on the
    # manager (the watch, the decision, the write: controller/metrics.py
    # mkf_nomination_delay_seconds); the reconcile the reservation starts meanwhile reads
    # every worker and nominates nothing (Kueue v0.19.2 multikueue/workload.go readGroup,
    # then nominateAndSynchronizeWorkers with no nominated worker). 0: the section 4 model,
    # where the nomination is the reservation's own reconcile.
    nomination_delay: float = 0.0
    horizon: float = 12 * 3600.0  # stop; what has not run by then never ran


# MultiKueue's batching of the events of a worker's objects (constants.UpdatesBatchPeriod).
BATCH = 1.0

# Where a copy is on its worker; CREATING: the manager's Create has not gone out yet.
PENDING, ADMITTED, EVICTING, DELETING, GONE = "pending", "admitted", "evicting", "deleting", "gone"
CREATING = "creating"


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
    tiebreak: float = 0.0  # its place among workloads created in the same second
    admitted_at: float | None = None
    flavors: dict[str, str] = field(default_factory=dict)
    state: str = PENDING
    wanted: bool = True  # the manager has not deleted it

    @property
    def charged(self) -> bool:
        """Holds quota on its worker."""
        return self.state in (ADMITTED, EVICTING, DELETING)


@dataclass(eq=False)
class Wl:
    """A Workload on the manager."""

    key: str
    job: Job
    index: int
    arrival: float
    tiebreak: float = 0.0  # its UID's place among workloads queued in the same second
    queued: float | None = None  # the time its queue order counts from: eviction, else arrival
    reserved_at: float | None = None
    first_reserved: float | None = None
    admitted_at: float | None = None
    cluster: str | None = None
    nominated: tuple[str, ...] = ()
    nominated_at: float | None = None
    copies: dict[str, Copy] = field(default_factory=dict)
    dying: list[Copy] = field(default_factory=list)  # deleted, not yet gone from the worker
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
        self.running: list[Copy] = []  # every copy holding quota (admitted, evicting, deleting)
        self.pass_due = False
        self.share_area = 0.0
        self.share_since = 0.0
        self.version = 0  # bumped on every change, for views cached by a dispatcher

    def assign(
        self, requests: Resources, usage: dict[str, Resources] | None = None
    ) -> dict[str, str] | None:
        """resource -> flavor, the first flavor of each group that holds the request (with
        the quota in use, or `usage` if given)."""
        usage = self.used if usage is None else usage
        out: dict[str, str] = {}
        for group in self.groups:
            wanted = {r: a for r, a in requests.items() if r in group[0][1] and a > 0}
            if not wanted:
                continue
            for flavor, nominal in group:
                used = usage[flavor]
                if all(used.get(r, 0) + a <= nominal.get(r, 0) for r, a in wanted.items()):
                    out.update(dict.fromkeys(wanted, flavor))
                    break
            else:
                return None
        covered = {r for g in self.groups for _, n in g for r in n}
        return out if all(r in covered for r, a in requests.items() if a > 0) else None

    def charge(self, copy: Copy, sign: int) -> None:
        self.version += 1
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
        # What the dispatcher reads from the worker's Workloads (controller/fleet_state.py):
        # the quota held per priority in the queue, the candidates a LowerPriority
        # preemptor chooses from (being evicted included: Kueue still counts them).
        by_priority: dict[int, dict[str, dict[str, int]]] = {}
        for c in self.running:
            if c.state in (ADMITTED, EVICTING):
                usage = by_priority.setdefault(c.priority, {})
                for r, a in c.requests.items():
                    flavor = c.flavors.get(r)
                    if flavor is not None:
                        usage.setdefault(flavor, {})[r] = usage.get(flavor, {}).get(r, 0) + a
        queue = QueueCapacity(
            CQ,
            groups,
            pending=len(self.pending),
            strict_fifo=self.spec.queueing == "StrictFIFO",
            preempts=self.spec.preemption != "Never",
            held=tuple(sorted(by_priority.items())),
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
    # Each of `preemptions`: (time, worker, victim, preemptor), workload keys.
    victims: list[tuple[float, str, str, str]] = field(default_factory=list)


def manager_order(wl: Wl) -> tuple[int, float, float]:
    """The manager's queue order: priority, then the queue order timestamp to the second
    (creation, or the eviction that sent it back), then UID, i.e. no order of the job's
    (pkg/cache/queue/cluster_queue.go baseCompareFunc; pkg/workload/workload.go
    GetQueueOrderTimestamp, v0.19.2)."""
    at = wl.arrival if wl.queued is None else wl.queued
    return (-wl.job.priority, math.floor(at), wl.tiebreak)


def queue_order(copy: Copy) -> tuple[int, float, float]:
    """A worker's queue order: priority, then creation time to the second, then no set
    order (pkg/cache/queue: queueOrderingFunc; metadata times are whole seconds)."""
    return (-copy.priority, math.floor(copy.created), copy.tiebreak)


class Sim:
    def __init__(self, scenario: Scenario, dispatcher: Dispatcher, settings: Settings) -> None:
        self.s = settings
        self.scenario = scenario
        self.d = dispatcher
        self.rng = random.Random(f"ties/{scenario.name}/{scenario.seed}")
        # The manager's UIDs, drawn apart so that the workers' draws stay what they were.
        self.uids = random.Random(f"manager-uids/{scenario.name}/{scenario.seed}")
        self.workers = {w.name: Worker(w) for w in scenario.workers}
        self.clusters = list(self.workers)  # the MultiKueueConfig's order
        self.clients = Clients(self.clusters, settings.worker_qps, settings.worker_burst)
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
        self.snapshot_at = -math.inf  # when `snapshot` was read
        self.waiting: dict[str, Wl] = {}  # primaries with quota, no cluster yet
        # MultiKueue's reconciles of a workload: when the one queued starts, and when the
        # requests of the last one started have gone out.
        self.queued: dict[str, float] = {}
        self.busy: dict[str, float] = {}
        self.dirty = True
        for job in scenario.jobs:
            self.at(job.arrival, "arrive", job)
        for local in scenario.local:
            copy = self._copy(
                f"local/{next(self.seq)}",
                local.worker,
                local.requests,
                local.priority,
                local.arrival,
                local.duration,
            )
            self.at(local.arrival, "local", copy)
        self.period = dispatcher.period(settings)
        # An external dispatcher's turn between a reservation and its nomination (0: none).
        self.turn = settings.nomination_delay if dispatcher.writes_nominations else 0.0
        if self.period:
            self.at(0.0, "refresh", None)

    def _copy(
        self,
        key: str,
        worker: str,
        requests: Resources,
        priority: int,
        created: float,
        duration: float,
        owner: Wl | None = None,
    ) -> Copy:
        return Copy(key, worker, requests, priority, created, duration, owner, self.rng.random())

    def at(self, t: float, kind: str, payload: object) -> None:
        heapq.heappush(self.events, (t, next(self.seq), kind, payload))

    def run(self) -> Sim:
        handlers: dict[str, Callable[[Any], None]] = {
            "arrive": self._arrive,
            "local": self._local,
            "pass": self._pass,
            "sync": self._sync,
            "seen": self._seen,
            "create": self._create,
            "finish": self._finish,
            "round": self._round,
            "refresh": self._refresh,
            "gone": self._gone,
            "release": self._release,
            "evicted": self._evicted,
            "requeue": self._requeue,
            "nominated": self._nominated,
            "reconcile": self._reconcile,
            "job": lambda copy: self._request(copy.owner, BATCH),
            "removed": self._removed,
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
            wl = Wl(f"{job.name}-{i}", job, i, job.arrival, self.uids.random())
            self.wls.append(wl)
            group.append(wl)
            self.manager_queue.append(wl)
            self._request(wl, 0.0)  # its creation on the manager
        self.groups[job.name] = group
        self._admit_on_manager()

    def _admit_on_manager(self) -> None:
        """BestEffortFIFO quota reservation on the manager's ClusterQueue."""
        self.manager_queue.sort(key=manager_order)
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
                if self.d.writes_nominations:
                    # The reservation's reconcile, before the dispatcher's nomination
                    # (where Kueue nominates, that reconcile is the one that does).
                    self._request(wl, 0.0)
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
        if self.d.reads_snapshot and not self.snapshot:
            self._take_snapshot()
        started = time.perf_counter()
        chosen = self.d.nominate(self, wl)
        self.stats.decision_seconds += time.perf_counter() - started
        self.stats.decisions += 1
        if self.turn:
            self.at(self.now + self.turn, "nominated", (wl, chosen))
        elif chosen != wl.nominated:
            self._set_nominated(wl, chosen)

    def _nominated(self, payload: tuple[Wl, tuple[str, ...]]) -> None:
        """An external dispatcher's write reaches the manager: MultiKueue's reconcile takes
        the list, unless the reservation it was for has gone or a worker was chosen."""
        wl, chosen = payload
        if wl.reserved_at is not None and not wl.cluster and chosen != wl.nominated:
            self._set_nominated(wl, chosen)

    def _set_nominated(self, wl: Wl, chosen: tuple[str, ...]) -> None:
        if wl.nominated_at is None and chosen:
            wl.nominated_at = self.now
        wl.nominated = chosen
        self.stats.nominations.append((self.now, wl.key, chosen))
        # The reconcile the new list starts reads the workload from every worker first.
        at = self._reads(wl)
        for cluster in list(wl.copies):
            if cluster not in chosen:
                self._delete_copy(wl, wl.copies.pop(cluster), at)
        if not self.d.writes_nominations:
            # Kueue's own write of the list is an update of the Workload: one more reconcile.
            self._request(wl, 0.0)
        for cluster in chosen:
            if cluster not in wl.copies:
                copy = self._copy(
                    wl.key, cluster, wl.requests, wl.job.priority, self.now, wl.job.duration, wl
                )
                wl.copies[cluster] = copy
                self.stats.copies += 1
                sent = self.clients.send(cluster, at)
                if sent > self.now:
                    copy.state = CREATING
                    self.at(sent, "create", copy)
                else:
                    self.workers[cluster].pending.append(copy)
                    self._wake(cluster)
                    self._request(wl, BATCH)  # its creation, an event on the worker

    def _create(self, copy: Copy) -> None:
        """The manager's Create reaches the worker (created then: its place in the queue),
        and the worker's answer starts another reconcile on the manager."""
        if copy.state != CREATING:
            return
        copy.state = PENDING
        copy.created = self.now
        self.workers[copy.worker].pending.append(copy)
        self._wake(copy.worker)
        self._request(copy.owner, BATCH)

    def _request(self, wl: Wl | None, delay: float) -> None:
        """A reconcile of the manager's Workload asked for, one that changes nothing here but
        sends its requests: by an update of the Workload (`delay` 0), or by an event of a
        copy or of its job on a worker (made, changed, deleted), which MultiKueue queues a
        second later (`queueWorkloadEvent` in multikueuecluster.go, then `AddAfter(...,
        UpdatesBatchPeriod)`, pkg/constants 1 s, in workload.go `setupWithManager`). As
        controller-runtime's queue does, a request folds into the reconcile already queued,
        and one asked for while a reconcile of the same Workload runs (its requests waiting
        for their tokens) starts when that ends. Run only where the clients are limited:
        elsewhere its requests cost nothing."""
        if wl is None or not self.clients.limited:
            return
        queued = self.queued.get(wl.key)
        if queued is not None and queued >= self.now:
            # Not run yet, it sees this event too: client-go's delaying queue keeps one
            # entry per item, at the earlier time (k8s.io/client-go util/workqueue
            # delaying_queue.go `insert`), and an item already queued is not queued twice.
            return
        start = max(self.now + delay, self.busy.get(wl.key, -math.inf))
        self.queued[wl.key] = start
        self.at(start, "reconcile", wl)

    def _removed(self, payload: tuple[Wl, str]) -> None:
        """The manager's reconcile of its Finished Workload: its reads, then the job and
        the copy deleted on the worker that ran it; those deletions are events there."""
        wl, worker = payload
        self.busy[wl.key] = self.clients.remove(worker, self._reads(wl), job=True)
        self._request(wl, BATCH)

    def _reconcile(self, wl: Wl) -> None:
        if self.queued.get(wl.key) == self.now:
            del self.queued[wl.key]
        self._reads(wl)

    def _reads(self, wl: Wl) -> float:
        """A reconcile's requests, sent now (Reconcile in multikueue/workload.go): the
        Workload read from every worker (readGroup); for one finished or without a
        reservation, RemoveRemoteObjects on every worker, which looks for the job first (an
        ownership GET); for one admitted, its job's status read from its worker (the
        adapter's SyncJob). When the last has gone out: the reconcile runs until then."""
        if not self.clients.limited:
            return self.now
        at = self.clients.read_group(self.now)
        if wl.finished_at is not None or wl.reserved_at is None:
            at = self.clients.unowned(at)
        elif wl.cluster:
            at = self.clients.send(wl.cluster, at, 1, JOB)
        self.busy[wl.key] = at
        return at

    def _delete_copy(self, wl: Wl, copy: Copy, at: float | None = None) -> None:
        """The manager deletes a remote copy (its requests sent from `at`, by default now):
        its worker's Kueue learns of it later."""
        copy.wanted = False
        wl.dying.append(copy)
        # A copy whose Create has not gone out yet is made, then removed: the requests to
        # a worker go out in the order asked (dq_clients.Bucket). A copy admitted has a job
        # only once the manager made it: the winner's.
        job = copy.state not in (PENDING, CREATING) and wl.cluster == copy.worker
        sent = self.clients.remove(copy.worker, self.now if at is None else at, job)
        self.at(sent + self.s.sync_delay, "gone", copy)

    def _sync(self, wl: Wl) -> None:
        """A worker's admission reaches the manager: its reconcile reads every worker
        first, then `_seen` decides."""
        if not self.clients.limited:
            self._seen(wl)
            return
        self.at(self._reads(wl), "seen", wl)

    def _seen(self, wl: Wl) -> None:
        """The manager sees an admitted copy: the first one admitted wins (to the second,
        ties in no set order)."""
        if wl.cluster or wl.reserved_at is None:
            return
        admitted = [c for c in (*wl.copies.values(), *wl.dying) if c.state == ADMITTED]
        if not admitted:
            return
        admitted.sort(key=lambda c: (math.floor(c.admitted_at or 0.0), self.rng.random()))
        winner = admitted[0]
        if not winner.wanted:
            # Its cluster was dropped from the nominations: the webhook refuses this
            # clusterName, and the copy is on its way out.
            self.stats.lost_admissions += 1
            admitted = [c for c in admitted if c.wanted]
            if not admitted:
                return
            winner = admitted[0]
        wl.cluster = winner.worker
        # Its job is made on the worker (the adapter's SyncJob): its pods start then.
        made = self.clients.send(winner.worker, self.now, CREATE_JOB, JOB)
        if self.s.job_on_seen:
            self.at(made + winner.duration, "finish", winner)
        # The manager writes clusterName and the check's state, then Admitted: two updates
        # of its Workload, at once, so one reconcile (the second folds into the first); the
        # job's creation on the worker is an event there (its pod starting folds into it
        # where it comes within the second).
        self._request(wl, 0.0)
        if self.clients.limited:
            self.at(made, "job", winner)
        self.waiting.pop(wl.key, None)
        if wl.admitted_at is None:
            wl.admitted_at = winner.admitted_at
        self.stats.admitted.append((wl.key, winner.worker))
        self.stats.wasted_admissions += len(admitted) - 1
        for cluster in list(wl.copies):
            if cluster != winner.worker:
                self._delete_copy(wl, wl.copies.pop(cluster))
        wl.nominated = ()
        self.d.done(wl)
        for member in self.groups[wl.job.name]:
            if member is not wl:
                self._dispatch(member)

    def _evicted(self, copy: Copy) -> None:
        """The manager sees its admitted copy evicted on the worker: its reconcile reads
        every worker first, then `_requeue`."""
        if not self.clients.limited or copy.owner is None:
            self._requeue(copy)
            return
        self.at(self._reads(copy.owner), "requeue", copy)

    def _requeue(self, copy: Copy) -> None:
        """Retry, evicted on the manager, requeued; its remote copies are deleted."""
        wl = copy.owner
        if wl is None or wl.cluster != copy.worker:
            return
        self.stats.evictions += 1
        wl.evictions += 1
        self.waiting.pop(wl.key, None)
        for cluster in list(wl.copies):
            self._delete_copy(wl, wl.copies.pop(cluster))
        wl.cluster = None
        wl.nominated = ()
        wl.nominated_at = None
        wl.round += 1
        self.d.done(wl)
        self._release_manager(wl)
        wl.queued = self.now  # evicted by the admission check: ordered from now on
        self.manager_queue.append(wl)
        self._admit_on_manager()

    def _round(self, payload: tuple[Wl, int]) -> None:
        wl, number = payload
        if number == wl.round and wl.reserved_at is not None and not wl.cluster:
            self._dispatch(wl)

    # --- the dispatcher's view ----------------------------------------------------------------
    def _take_snapshot(self) -> None:
        self.snapshot = {name: w.view() for name, w in self.workers.items()}
        self.snapshot_at = self.now

    def _refresh(self, _: object) -> None:
        """The watches deliver what changed at most `period` ago: decide again for the
        workloads still waiting, as the controller does on a worker's queue update, and
        when widening is due."""
        changed, self.dirty = self.dirty, False
        if changed and self.d.reads_snapshot:
            self._take_snapshot()
        widen, period = self.d.widen_after, self.period
        for wl in list(self.waiting.values()):
            due = (
                widen
                and wl.nominated_at is not None
                and (
                    (self.now - wl.nominated_at) % widen < period
                    and self.now - wl.nominated_at >= widen
                )
            )
            if changed or due or not wl.nominated:
                self._dispatch(wl)
        if self.events or self.waiting:
            self.at(self.now + period, "refresh", None)

    # --- the workers --------------------------------------------------------------------------
    def _local(self, copy: Copy) -> None:
        self.workers[copy.worker].pending.append(copy)
        self._wake(copy.worker)

    def _wake(self, name: str) -> None:
        self.dirty = True
        worker = self.workers[name]
        worker.version += 1
        if not worker.pass_due:
            worker.pass_due = True
            self.at(self.now + self.s.admission_delay, "pass", worker)

    def _account(self, worker: Worker) -> None:
        worker.share_area += (self.now - worker.share_since) * worker.share()
        worker.share_since = self.now

    def _gone(self, copy: Copy) -> None:
        """A deletion reaches the worker's Kueue: a pending copy leaves the queue, an
        admitted one starts releasing its quota."""
        worker = self.workers[copy.worker]
        self._request(copy.owner, BATCH)
        if copy.state == CREATING:  # cannot be: its Create went out first (kept safe)
            copy.state = GONE
            self._forget(copy)
        elif copy.state == PENDING:
            worker.pending.remove(copy)
            copy.state = GONE
            self._forget(copy)
            self._wake(copy.worker)
        elif copy.state == ADMITTED:
            copy.state = DELETING
            self.at(self.now + self.s.release_delay, "release", copy)

    def _forget(self, copy: Copy) -> None:
        if copy.owner is not None and copy in copy.owner.dying:
            copy.owner.dying.remove(copy)

    def _release(self, copy: Copy) -> None:
        """An evicted or deleted workload's pods are gone: its quota is free. Evicted local
        work (and a copy the manager still wants) goes back to the worker's queue."""
        if not copy.charged:
            return
        worker = self.workers[copy.worker]
        evicted = copy.state == EVICTING
        self._account(worker)
        worker.charge(copy, -1)
        worker.running.remove(copy)
        copy.state = GONE
        self._forget(copy)
        self._wake(copy.worker)
        owner = copy.owner
        if evicted and (owner is None or (copy.wanted and owner.cluster != copy.worker)):
            again = self._copy(
                copy.key,
                copy.worker,
                copy.requests,
                copy.priority,
                copy.created,
                copy.duration,
                owner,
            )
            again.tiebreak = copy.tiebreak
            worker.pending.append(again)
            if owner is not None:
                owner.copies[copy.worker] = again

    def _pass(self, worker: Worker) -> None:
        """One scheduling cycle of the worker's Kueue over its ClusterQueue."""
        worker.pass_due = False
        worker.pending.sort(key=queue_order)
        cycle = _Cycle(worker)
        for copy in list(worker.pending):
            if copy.state != PENDING:
                continue
            flavors = worker.assign(copy.requests, cycle.usage())
            if flavors is None:
                if worker.spec.preemption == "LowerPriority":
                    self._preempt(worker, copy, cycle)
                if worker.spec.queueing == "StrictFIFO":
                    break
                continue
            self._account(worker)
            copy.flavors = flavors
            copy.admitted_at = self.now
            copy.state = ADMITTED
            worker.charge(copy, 1)
            worker.pending.remove(copy)
            worker.running.append(copy)
            self.dirty = True
            if copy.owner is None or not self.s.job_on_seen:
                self.at(self.now + copy.duration, "finish", copy)
            if copy.owner is not None:
                self.at(self.now + self.s.sync_delay, "sync", copy.owner)

    def _preempt(self, worker: Worker, copy: Copy, cycle: _Cycle) -> None:
        """Evict what `copy` needs evicted to fit (CandidatesOrdering, then fill-back); it
        is not admitted now, but in a cycle after the victims' quota is released. For the
        rest of this cycle its quota is held, so nothing behind it takes what it preempts
        for (scheduler.go: `cq.AddUsage(usage)` before issuePreemptions). A preemptor whose
        victims overlap those of one earlier in the cycle is skipped ("We skip
        multiple-preemptions per cohort if any of the targets are overlapping")."""
        candidates = sorted(
            (
                c
                for c in worker.running
                if c.priority < copy.priority and c.state in (ADMITTED, EVICTING)
            ),
            key=lambda c: (c.state != EVICTING, c.priority, -(c.admitted_at or 0.0)),
        )
        usage = cycle.usage() or {f: dict(u) for f, u in worker.used.items()}
        taken: list[Copy] = []
        flavors = None
        for victim in candidates:
            _add(usage, victim.requests, victim.flavors, -1)
            taken.append(victim)
            flavors = worker.assign(copy.requests, usage)
            if flavors is not None:
                break
        if flavors is None:
            return
        # fillBackWorkloads: give back, newest taken first, those it fits without.
        for victim in reversed(taken[:-1]):
            _add(usage, victim.requests, victim.flavors, 1)
            if worker.assign(copy.requests, usage) is None:
                _add(usage, victim.requests, victim.flavors, -1)
            else:
                taken.remove(victim)
        flavors = worker.assign(copy.requests, usage) or flavors
        if any(id(v) in cycle.targeted for v in taken):
            return
        cycle.targeted.update(id(v) for v in taken)
        cycle.hold(copy.requests, flavors)
        for victim in taken:
            if victim.state == EVICTING:
                continue  # preemption ongoing: not evicted again
            if copy.owner is not None:
                self.stats.preemptions += 1
                self.stats.victims.append((self.now, worker.spec.name, victim.key, copy.key))
            victim.state = EVICTING
            self.at(self.now + self.s.release_delay, "release", victim)
            if victim.owner is not None:
                self.at(self.now + self.s.sync_delay, "evicted", victim)
        worker.version += 1
        self.dirty = True

    def _finish(self, copy: Copy) -> None:
        if copy.state not in (ADMITTED, DELETING) or copy.admitted_at is None:
            return
        worker = self.workers[copy.worker]
        self._account(worker)
        worker.charge(copy, -1)
        worker.running.remove(copy)
        won = copy.state == ADMITTED and copy.wanted
        copy.state = GONE
        self._forget(copy)
        self._wake(copy.worker)
        wl = copy.owner
        if wl is not None and won and wl.cluster == copy.worker:
            wl.copies.pop(copy.worker, None)
            wl.finished_at = self.now
            # The job's end and the copy's Finished are events on the worker; the manager,
            # its Workload Finished, removes what is left there, and each deletion is one
            # more event.
            self._request(wl, BATCH)
            if self.clients.limited:
                self.at(self.now + self.s.sync_delay, "removed", (wl, copy.worker))
            self._release_manager(wl)
            self._admit_on_manager()


class _Cycle:
    """One scheduling cycle of a worker: the quota held for preemptors waiting on their
    victims, and the victims already targeted."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.held: dict[str, Resources] = {}
        self.targeted: set[int] = set()

    def hold(self, requests: Resources, flavors: dict[str, str]) -> None:
        for r, a in requests.items():
            flavor = flavors.get(r)
            if flavor is not None:
                bucket = self.held.setdefault(flavor, {})
                bucket[r] = bucket.get(r, 0) + a

    def usage(self) -> dict[str, Resources] | None:
        """The quota in use plus what is held; None when nothing is held (then it is the
        worker's own, read-only for the caller)."""
        if not self.held:
            return None
        out = {f: dict(u) for f, u in self.worker.used.items()}
        for flavor, held in self.held.items():
            _add(out, held, dict.fromkeys(held, flavor), 1)
        return out


def _add(
    usage: dict[str, Resources], requests: Resources, flavors: dict[str, str], sign: int
) -> None:
    for r, a in requests.items():
        flavor = flavors.get(r)
        if flavor is not None:
            usage[flavor][r] = usage[flavor].get(r, 0) + sign * a
