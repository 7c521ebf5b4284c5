"""The in-memory fleet snapshot, kept current by watches: the manager's Workloads,
AdmissionChecks, MultiKueueConfigs and Clusters and DispatchPolicies; on every worker,
through its read-only identity, ClusterQueues and LocalQueues, and of its Workloads only
which ClusterQueue each holds quota in, how much and at what priority (see `holding`).

Decisions read this snapshot and never call an API server. A worker that cannot be
reached is marked unhealthy and never holds the others up.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import yaml

from controller import policy_api, reader_access
from controller.kinds import (
    ADMISSION_CHECKS,
    CLUSTER_PROFILES,
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    MULTIKUEUE_CLUSTERS,
    MULTIKUEUE_CONFIGS,
    SECRETS,
    WORKLOADS,
    Kind,
)
from controller.kube import Kube, Prober, Reflector
from controller.model import (
    FlavorCapacity,
    Held,
    QueueCapacity,
    Resources,
    WorkerView,
    milli,
)
from controller.settings import Settings
from controller.workloads import MULTIKUEUE_CONTROLLER, trim

log = logging.getLogger("controller.state")
DISPATCH_POLICIES = Kind(policy_api.GROUP, policy_api.VERSION, policy_api.PLURAL, False)
KubeFactory = Callable[[dict[str, Any], str], Any]  # (kubeconfig, name) -> awaitable Kube


def _quantities(raw: dict[str, Any]) -> Resources:
    out: Resources = {}
    for name, value in raw.items():
        try:
            out[name] = milli(value)
        except (ValueError, TypeError):
            log.warning("ignoring unreadable quantity %s=%r", name, value)
    return out


def holding(wl: dict[str, Any]) -> dict[str, Any]:
    """A worker's Workload as the snapshot keeps it: its name, and the ClusterQueue it holds
    quota in, its priority and the quota it holds (flavor -> resource -> amount, from
    status.admission's podSetAssignments), or no queue. Kueue v0.19.2 counts a workload in
    its ClusterQueue, and so among the candidates for preemption, while it has an active
    quota reservation: QuotaReserved true, not Finished, spec.active not false
    (HasActiveQuotaReservation, pkg/workload/workload.go 1270-1272, used by the cache in
    pkg/cache/scheduler/cache.go 793-800); its priority is spec.priority (the priority
    boost annotation counts only under the PriorityBoost gate, alpha and off:
    pkg/util/priority/priority.go, pkg/features/kube_features.go)."""
    meta = wl.get("metadata") or {}
    spec, status = wl.get("spec") or {}, wl.get("status") or {}
    conditions = {c.get("type"): c.get("status") == "True" for c in status.get("conditions") or []}
    holds = (
        conditions.get("QuotaReserved", False)
        and not conditions.get("Finished", False)
        and spec.get("active", True) is not False
    )
    admission = (status.get("admission") or {}) if holds else {}
    usage: dict[str, Resources] = {}
    for assignment in admission.get("podSetAssignments") or []:
        flavors = assignment.get("flavors") or {}
        for r, amount in _quantities(assignment.get("resourceUsage") or {}).items():
            if r in flavors:
                held = usage.setdefault(flavors[r], {})
                held[r] = held.get(r, 0) + amount
    return {
        "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")},
        "clusterQueue": admission.get("clusterQueue"),
        "priority": int(spec.get("priority") or 0),
        "usage": usage,
    }


def held_by_queue(workloads: Any) -> dict[str, tuple[Held, ...]]:
    """ClusterQueue -> the quota its workloads hold, per priority, lowest first (see
    QueueCapacity.held)."""
    by_queue: dict[str, dict[int, dict[str, Resources]]] = {}
    for wl in workloads:
        queue = wl["clusterQueue"]
        if queue is None:
            continue
        total = by_queue.setdefault(queue, {}).setdefault(wl["priority"], {})
        for flavor, amounts in wl["usage"].items():
            held = total.setdefault(flavor, {})
            for r, a in amounts.items():
                held[r] = held.get(r, 0) + a
    return {queue: tuple(sorted(levels.items())) for queue, levels in by_queue.items()}


def reserved_by_queue(held: dict[str, tuple[Held, ...]]) -> dict[str, dict[str, Resources]]:
    """ClusterQueue -> flavor -> resource -> the quota all its workloads hold, whatever their
    priority: what Kueue's cache counts in the queue as soon as it reserves (the
    ClusterQueue's status.flavorsReservation says the same, but only once the clusterqueue
    controller has written it, a batch period or more later: see WorkerConnection.holding)."""
    out: dict[str, dict[str, Resources]] = {}
    for queue, levels in held.items():
        total = out.setdefault(queue, {})
        for _, usage in levels:
            for flavor, amounts in usage.items():
                sums = total.setdefault(flavor, {})
                for r, a in amounts.items():
                    sums[r] = sums.get(r, 0) + a
    return out


def _at_least(reported: Resources, held: Resources | None) -> Resources:
    """Per resource, the larger of the reservation the ClusterQueue's status reports and
    what the worker's Workloads hold: each may be behind the other (a reservation the
    status does not count yet, a finished workload it still counts), and the larger never
    misses one; both count the same workload once, so taking it never counts it twice."""
    if not held:
        return reported
    return {r: max(reported.get(r, 0), held.get(r, 0)) for r in {*reported, *held}}


def queue_capacity(
    cq: dict[str, Any],
    held: dict[str, tuple[Held, ...]] | None = None,
    holding: dict[str, dict[str, Resources]] | None = None,
) -> QueueCapacity:
    """A worker ClusterQueue's quota and reservations, from its spec and status. `held`:
    the quota held per priority in each ClusterQueue of the worker (held_by_queue), None
    when the worker's Workloads are not known; `holding`: the same summed over priorities
    (reserved_by_queue), which the reservation is never taken to be below."""
    status = cq.get("status") or {}
    reserved: dict[str, Resources] = {}
    for flavor in status.get("flavorsReservation") or []:
        reserved[flavor.get("name")] = _quantities(
            {r.get("name"): r.get("total", 0) for r in flavor.get("resources") or []}
        )
    in_workloads = (holding or {}).get(cq["metadata"]["name"])
    if in_workloads:
        for flavor_name, amounts in in_workloads.items():
            reserved[flavor_name] = _at_least(reserved.get(flavor_name, {}), amounts)
    groups = []
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        flavors = []
        for flavor in group.get("flavors") or []:
            nominal = _quantities(
                {r.get("name"): r.get("nominalQuota", 0) for r in flavor.get("resources") or []}
            )
            flavors.append(
                FlavorCapacity(flavor.get("name"), nominal, reserved.get(flavor.get("name"), {}))
            )
        if flavors:
            groups.append(tuple(flavors))
    active = next(
        (
            c.get("status") != "False"
            for c in status.get("conditions") or []
            if c.get("type") == "Active"
        ),
        True,
    )
    spec = cq.get("spec") or {}
    name = cq["metadata"]["name"]
    within = (spec.get("preemption") or {}).get("withinClusterQueue", "Never")
    # Used only under LowerPriority, where priority alone says what can be preempted;
    # LowerOrNewerEqualPriority and Any also take other workloads (equal and newer, or
    # any), and there the queue may preempt as before.
    known = held is not None and within == "LowerPriority"
    return QueueCapacity(
        name,
        tuple(groups),
        int(status.get("pendingWorkloads") or 0),
        active,
        spec.get("queueingStrategy") == "StrictFIFO",
        within != "Never",
        held.get(name, ()) if known and held is not None else None,
    )


class WorkerConnection:
    """Read-only watches on one worker, and a probe of its API server.

    Healthy while both watches are connected and the server answers its probe; a watch
    with nothing to say is normal. When the server answers again after failing, the
    watches start over at once (a fresh list), so a worker that returns is used again
    within a probe interval instead of after the watches' reconnect backoff."""

    def __init__(
        self,
        name: str,
        kube: Kube,
        on_change: Callable[[str, Any], None],
        probe_interval: float = 3.0,
        probe_timeout: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        on_holding: Callable[[str | None], None] | None = None,
    ) -> None:
        self.name = name
        self.kube = kube
        self.on_change = on_change
        # Told the key of each Workload seen holding quota here, and None after each list
        # of them (any may hold now): the dispatcher stops counting such a workload's
        # demand in flight here, as the reservation read from here counts it now.
        self.on_holding = on_holding
        self.queues = Reflector(kube, CLUSTER_QUEUES, on_change, max_backoff=probe_interval)
        self.local_queues = Reflector(kube, LOCAL_QUEUES, on_change, max_backoff=probe_interval)
        # Which priorities hold quota in each queue: its changes do not call on_change (an
        # admission or a finish changes the ClusterQueue's status too, which does), they
        # only make the next view read them again. Not part of the worker's health: a
        # reader identity from before it could read Workloads leaves them unknown (and is
        # asked again once a minute, not every few seconds).
        self.workloads = Reflector(
            kube, WORKLOADS, self._workload_changed, transform=holding, max_backoff=60.0
        )
        self._held: (
            tuple[int, dict[str, tuple[Held, ...]], dict[str, dict[str, Resources]]] | None
        ) = None
        self._workload_changes = 0
        self.prober = Prober(kube, self._probed, probe_interval, probe_timeout, clock=clock)
        self._watching: list[asyncio.Task] = []
        self._probing: asyncio.Task | None = None
        self._lost = False  # a probe failed since the watches last started

    @property
    def version(self) -> str:
        return self.prober.version

    def start(self) -> None:
        self._watch()
        self._probing = asyncio.create_task(self.prober.run(), name=f"{self.name}-probe")

    def _watch(self) -> None:
        self._watching = [
            asyncio.create_task(r.run(), name=f"{self.name}-{r.kind.plural}")
            for r in (self.queues, self.local_queues, self.workloads)
        ]

    def _workload_changed(self, event: str, obj: Any) -> None:
        self._workload_changes += 1
        if self.on_holding is None:
            return
        if event == "SYNC":
            self.on_holding(None)
        elif obj is not None and event != "DELETED" and obj.get("clusterQueue") is not None:
            self.on_holding(Reflector.key(obj))

    def _read_held(self) -> None:
        if self._held is None or self._held[0] != self._workload_changes:
            held = held_by_queue(self.workloads.store.values())
            self._held = (self._workload_changes, held, reserved_by_queue(held))

    def held(self) -> dict[str, tuple[Held, ...]] | None:
        """ClusterQueue -> the quota held in it per priority; None while the worker's
        Workloads cannot be read."""
        if not self.workloads.healthy:
            return None
        self._read_held()
        assert self._held is not None
        return self._held[1]

    def holding(self) -> dict[str, dict[str, Resources]] | None:
        """ClusterQueue -> flavor -> resource -> the quota its Workloads hold (all
        priorities); None while the worker's Workloads cannot be read.

        Read from the Workloads, not only from the ClusterQueue's status: Kueue v0.19.2
        writes status.flavorsReservation a batch period after the reservation (the
        workload controller's NotifyWorkloadUpdate queues the ClusterQueue with
        AddAfter(UpdatesBatchPeriod = 1s): pkg/controller/core/clusterqueue_controller.go
        249-268 and 481-486, pkg/constants/constants.go 32-36; updateCqStatusIfChanged,
        513-561, then copies the cache's usage), while the manager's MultiKueue
        controller sets the workload's clusterName as soon as this worker's copy is
        admitted (pkg/controller/admissionchecks/multikueue/workload.go 539-540 and
        1240-1250)."""
        if not self.workloads.healthy:
            return None
        self._read_held()
        assert self._held is not None
        return self._held[2]

    def holds(self, key: str) -> bool | None:
        """Whether the Workload `key` ("namespace/name": a MultiKueue copy has its
        original's) holds quota here, as Kueue's cache counts it; None while the worker's
        Workloads cannot be read."""
        if not self.workloads.healthy:
            return None
        found = self.workloads.store.get(key)
        return found is not None and found.get("clusterQueue") is not None

    def queue_version(self, name: str) -> str | None:
        """The resourceVersion of the ClusterQueue `name` as last seen here."""
        cq = self.queues.store.get(name)
        return None if cq is None else (cq.get("metadata") or {}).get("resourceVersion")

    def _probed(self) -> None:
        if not self.prober.ok:
            self._lost = True
        elif self._lost:
            # Back after an outage: the watches may sit in their backoff or on a connection
            # that died quietly; start them over from a list.
            self._lost = False
            for task in self._watching:
                task.cancel()
            self._watch()
        self.on_change("HEALTH", None)

    async def stop(self) -> None:
        tasks = [*self._watching, *([self._probing] if self._probing else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.kube.close()

    def health(self, stale_after: float) -> tuple[bool, str, float]:
        """(healthy, reason when not, seconds since the server last answered). Unhealthy
        when a watch is down, the probes fail (`Prober`), or none has answered for
        `stale_after` seconds (the probes themselves stopped)."""
        silence = self.prober.silence()
        if not self.prober.ok:
            return False, self.prober.reason, silence
        for r in (self.queues, self.local_queues):
            if not r.healthy:
                return False, f"watch of {r.kind.plural}: {r.last_error}", silence
        if silence > stale_after:
            # The threshold, not the age: the reason ends up in Events and must not tick.
            return False, f"GET /version has not answered for more than {stale_after:.0f}s", silence
        return True, "", silence


class FleetState:
    def __init__(
        self,
        manager: Kube,
        settings: Settings,
        kube_factory: KubeFactory,
        on_change: Callable[[str, str, Any], None],
    ) -> None:
        """`on_change(source, event_type, obj)`: source is "workloads", "workers", ..."""
        self.manager = manager
        self.settings = settings
        self.kube_factory = kube_factory
        self._views: tuple[tuple[int, int], dict[str, WorkerView]] | None = None
        self._version = 0  # bumped by every change that can alter a worker's view
        self._policies_version = 0

        def changed(source: str, event: str, obj: Any) -> None:
            if source in ("fleet", "workers"):
                self._version += 1
            elif source == "policies":
                self._policies_version += 1
            on_change(source, event, obj)

        self.on_change = changed

        def notify(source: str) -> Callable[[str, Any], None]:
            return lambda event, obj: changed(source, event, obj)

        self.workloads = Reflector(manager, WORKLOADS, notify("workloads"), transform=trim)
        self.checks = Reflector(manager, ADMISSION_CHECKS, notify("fleet"))
        self.configs = Reflector(manager, MULTIKUEUE_CONFIGS, notify("fleet"))

        def access(source: str | None) -> Callable[[str, Any], None]:
            # These change how a worker is reached: look at the connections again (and, for
            # a source, tell the dispatcher).
            def seen(event: str, obj: Any) -> None:
                self._reconnect.set()
                if source is not None:
                    changed(source, event, obj)

            return seen

        self.clusters = Reflector(manager, MULTIKUEUE_CLUSTERS, access("fleet"))
        self.policies = Reflector(manager, DISPATCH_POLICIES, notify("policies"))
        self.secrets = Reflector(manager, SECRETS, access(None), settings.namespace)
        # Only with ClusterProfiles (stack-declared or inventory): elsewhere the CRD, and the
        # right to read it, are absent.
        self.profiles: Reflector | None = (
            Reflector(manager, CLUSTER_PROFILES, access("profiles"), settings.kueue_namespace)
            if settings.cluster_profiles or settings.inventory
            else None
        )
        self.workers: dict[str, WorkerConnection] = {}
        self._kubeconfigs: dict[str, str] = {}
        self.unreachable: dict[str, str] = {}  # worker -> why its reader access is unusable
        self._tasks: list[asyncio.Task] = []
        self._reconnect = asyncio.Event()

    @property
    def reflectors(self) -> tuple[Reflector, ...]:
        found = (
            self.workloads,
            self.checks,
            self.configs,
            self.clusters,
            self.policies,
            self.secrets,
        )
        return (*found, self.profiles) if self.profiles is not None else found

    async def start(self) -> None:
        self._tasks = [
            asyncio.create_task(r.run(), name=f"manager-{r.kind.plural}") for r in self.reflectors
        ]
        self._tasks.append(asyncio.create_task(self._keep_workers(), name="workers"))

    async def wait_synced(self, timeout: float | None = None) -> None:
        await asyncio.wait_for(asyncio.gather(*(r.synced.wait() for r in self.reflectors)), timeout)

    async def wait_workers(self, timeout: float) -> None:
        """Connect to every worker and give each a bounded time to list its queues, so
        the first decisions after a start see the whole fleet. A worker that fails or
        takes longer is simply unhealthy until it answers."""
        await self.sync_workers()
        deadline = asyncio.get_running_loop().time() + timeout
        while any(
            r.last_error == "not listed yet" or not w.prober.probes
            for w in self.workers.values()
            for r in (w.queues, w.local_queues)
        ):
            if asyncio.get_running_loop().time() > deadline:
                return
            await asyncio.sleep(0.05)

    def synced(self) -> bool:
        return all(r.synced.is_set() for r in self.reflectors)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for worker in list(self.workers.values()):
            await worker.stop()
        self.workers.clear()

    # --- worker connections, from the reader Secrets -------------------------------------

    def worker_kubeconfigs(self) -> dict[str, str]:
        """Worker -> reader kubeconfig text; the workers that have a Secret but cannot be
        reached yet are in `self.unreachable`, with the reason."""
        label = self.settings.worker_secret_label
        profiles = {
            (p.get("metadata") or {}).get("name", ""): p
            for p in (self.profiles.store.values() if self.profiles is not None else ())
        }
        found, unreachable = {}, {}
        for secret in self.secrets.store.values():
            worker = ((secret.get("metadata") or {}).get("labels") or {}).get(label)
            if not worker:
                continue
            access = reader_access.resolve(
                worker, secret, self.clusters.store.get(worker), profiles
            )
            if access.kubeconfig is not None:
                found[worker] = access.kubeconfig
            else:
                unreachable[worker] = access.reason
        self.unreachable = unreachable
        return found

    async def _keep_workers(self) -> None:
        while True:
            await self._reconnect.wait()
            self._reconnect.clear()
            await self.sync_workers()

    async def sync_workers(self) -> None:
        wanted = self.worker_kubeconfigs()
        for name in [n for n in self.workers if self._kubeconfigs.get(n) != wanted.get(n)]:
            await self.workers.pop(name).stop()
            self._kubeconfigs.pop(name, None)
        for name, text in wanted.items():
            if name in self.workers:
                continue
            try:
                kube = await self.kube_factory(yaml.safe_load(text), name)
            except Exception as exc:  # noqa: BLE001 (a bad Secret must not stop the others)
                log.warning("worker %s: cannot use its kubeconfig: %s", name, exc)
                continue
            connection = WorkerConnection(
                name,
                kube,
                lambda e, o, n=name: self.on_change("workers", n, o),
                on_holding=lambda key, n=name: self.on_change("holding", n, key),
            )
            connection.start()
            self.workers[name] = connection
            self._kubeconfigs[name] = text
        self.on_change("workers", "SYNC", None)

    # --- views -------------------------------------------------------------------------

    def multikueue_checks(self) -> dict[str, str]:
        """AdmissionCheck name -> its MultiKueueConfig, for MultiKueue checks."""
        out = {}
        for ac in self.checks.store.values():
            spec = ac.get("spec") or {}
            params = spec.get("parameters") or {}
            if (
                spec.get("controllerName") == MULTIKUEUE_CONTROLLER
                and params.get("kind") == "MultiKueueConfig"
            ):
                out[ac["metadata"]["name"]] = params.get("name", "")
        return out

    def config_clusters(self, config: str) -> list[str]:
        obj = self.configs.store.get(config) or {}
        return list((obj.get("spec") or {}).get("clusters") or [])

    def policy_set(self) -> policy_api.PolicySet:
        return policy_api.select(self.policies.store.values())

    def worker_views(self) -> dict[str, WorkerView]:
        """Every worker as the policy sees it. Rebuilt only after a change to a worker's
        queues or MultiKueueCluster, or once a second (health depends on time passing):
        decisions in between, thousands of them in a backlog, share one snapshot."""
        key = (self._version, int(time.monotonic()))
        if self._views is None or self._views[0] != key:
            self._views = (key, self._build_views())
        return self._views[1]

    def _build_views(self) -> dict[str, WorkerView]:
        views = {}
        for name, mkc in self.clusters.store.items():
            active = any(
                c.get("type") == "Active" and c.get("status") == "True"
                for c in (mkc.get("status") or {}).get("conditions") or []
            )
            labels = dict((mkc.get("metadata") or {}).get("labels") or {})
            connection = self.workers.get(name)
            if connection is None:
                reason = self.unreachable.get(name) or (
                    f"no reader Secret for it (label {self.settings.worker_secret_label}={name} "
                    "in the dispatcher's namespace)"
                )
                views[name] = WorkerView(name, active, False, reason, labels)
                continue
            healthy, reason, silence = connection.health(self.settings.stale_after_seconds)
            lost = not healthy and silence < self.settings.worker_lost_timeout_seconds
            local_queues = {
                key: (lq.get("spec") or {}).get("clusterQueue", "")
                for key, lq in connection.local_queues.store.items()
            }
            held, holding = connection.held(), connection.holding()
            queues = {
                cq["metadata"]["name"]: queue_capacity(cq, held, holding)
                for cq in connection.queues.store.values()
            }
            views[name] = WorkerView(
                name, active, healthy, reason, labels, local_queues, queues, briefly_lost=lost
            )
        return views

    def read_workers_again(self) -> None:
        """The next views read the workers' stores again (not at the next second): a
        workload's demand in flight on a worker was dropped as its reservation there was
        seen, and the views must count that reservation from the next decision on."""
        self._version += 1

    def fleet_key(self) -> tuple[Any, ...]:
        """Changes whenever a decision's inputs besides the workload itself and the demand
        in flight may have changed: the fleet's objects, a worker's queues or health, the
        policies."""
        views = self.worker_views()
        health = tuple((v.healthy, v.briefly_lost) for v in views.values())
        return (self._version, self._policies_version, health)

    def worker_health(self) -> dict[str, tuple[bool, str, float]]:
        return {
            name: w.health(self.settings.stale_after_seconds) for name, w in self.workers.items()
        }
