"""The dispatch loop: from watch events to nominations on the manager.

Changed workloads, and every pending one when the fleet changes, go through a deduplicated
queue; each is decided from the snapshot by the pure policy, and only the leader writes:
`status.nominatedClusterNames` by merge patch on the status subresource, an Event on the
workload saying where and why, and the DispatchPolicies' Ready conditions.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from controller.fleet_state import DISPATCH_POLICIES, FleetState
from controller.kube import EVENTS, WORKLOADS, ApiError, Kube
from controller.metrics import Metrics
from controller.model import Decision, InFlight, WorkloadView
from controller.policy import FitMemo, InFlightIndex, decide
from controller.settings import Settings
from controller.workloads import (
    COMPONENT_INDEX,
    Eligibility,
    MalformedWorkload,
    eligibility,
    group_of,
    group_requests,
    key_of,
    parse_time,
    view_of,
)

log = logging.getLogger("controller.dispatcher")
COMPONENT = "multikueue-fleet-dispatcher"
EVENT_MESSAGE_LIMIT = 1024
EVENT_CLUSTERS_SHOWN = 5
EVENT_BACKLOG = 10000  # Events waiting to be sent; beyond that they are dropped and counted
# Events yield to nominations: while nominations are being written, an Event waits for a
# pause, but never longer than this after it was made.
EVENT_MAX_DELAY_SECONDS = 30.0
# The longest an admitted workload's demand stays counted on the worker that admitted it
# while what is read of that worker does not show the reservation (its Workloads, or a
# rewrite of its ClusterQueue's status): Kueue v0.19.2 writes that status a batch period
# (1s) after the reservation, so this only bounds what a lost event would leave behind.
ADMITTED_UNSEEN_SECONDS = 10.0


# The Events all workloads together may cost the API server: a burst of EVENT_BURST, then
# EVENTS_PER_SECOND (client-go's recorder also rate-limits, per object; this bounds the sum).
EVENTS_PER_SECOND = 10.0
EVENT_BURST = 100


class Pace:
    """A rate with a burst (the generic cell rate algorithm): `delay(now)` is how long the
    next send must wait so that no more than `burst` plus `rate` per second go out."""

    def __init__(self, rate: float, burst: int) -> None:
        self.interval = 1.0 / rate
        self.tolerance = (burst - 1) * self.interval
        self._due = -math.inf  # when the next send would be due at the steady pace

    def delay(self, now: float) -> float:
        due = max(self._due, now)
        self._due = due + self.interval
        return max(0.0, due - now - self.tolerance)


def signature(decision: Decision) -> tuple[Any, ...]:
    """What makes two decisions the same for the people reading Events: the clusters chosen,
    the outcome, and each cluster's standing and category, but not the numbers."""
    return (decision.outcome, decision.nominate, decision.standings)


def _now() -> datetime:
    return datetime.now(UTC)


def quota_reserved_at(workload: dict[str, Any]) -> datetime | None:
    for cond in (workload.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "QuotaReserved" and cond.get("status") == "True":
            return parse_time(cond.get("lastTransitionTime"))
    return None


def _nominated(wl: dict[str, Any], clusters: list[str], version: str) -> dict[str, Any]:
    """The workload (as cached) that our nomination of `clusters` made at `version`: the
    patch carried the version it was decided on, so nothing else changed (Kueue v0.19.2's
    Workload mutating webhook is on CREATE only, and the fields the cache keeps that a
    status write changes are the nominations and the version)."""
    return {
        **wl,
        "metadata": {**(wl.get("metadata") or {}), "resourceVersion": version},
        "status": {**(wl.get("status") or {}), "nominatedClusterNames": clusters},
    }


def _same_but_nominations(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Equal apart from status.nominatedClusterNames and the resourceVersion."""
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    if old.get("spec") != new.get("spec") or any(
        old_meta.get(k) != new_meta.get(k) for k in ("uid", "annotations")
    ):
        return False
    old_status, new_status = dict(old.get("status") or {}), dict(new.get("status") or {})
    old_status.pop("nominatedClusterNames", None)
    new_status.pop("nominatedClusterNames", None)
    return old_status == new_status


@dataclass(frozen=True)
class Admitted:
    """A workload the manager's MultiKueue controller gave a clusterName, whose demand is
    still counted in flight on that cluster: the reservation is not in what is read of the
    worker yet. `queue_version`: the resourceVersion its ClusterQueue had then, when the
    worker's Workloads cannot be read (a newer status counts it); None when they can (the
    copy seen holding quota there counts it)."""

    cluster: str
    cluster_queue: str
    queue_version: str | None
    until: float  # monotonic: counted no longer than this


class Dispatcher:
    def __init__(
        self,
        manager: Kube,
        settings: Settings,
        metrics: Metrics,
        kube_factory: Callable[[dict[str, Any], str], Any],
        is_leader: Callable[[], bool] = lambda: True,
    ) -> None:
        self.manager = manager
        self.settings = settings
        self.metrics = metrics
        self.is_leader = is_leader
        self.state = FleetState(manager, settings, kube_factory, self._changed)
        # Two queues: workloads that just changed come first; re-evaluations of pending ones
        # (the fleet changed, time passed) wait behind them, so a burst of worker updates
        # never delays a new workload behind thousands of unchanged ones.
        self.urgent: dict[str, None] = {}
        self.later: dict[str, None] = {}
        self._wake = asyncio.Event()
        self._fleet_changed = False
        # (what it is about, type, reason, message, when, queued at): see event().
        self._events: asyncio.Queue[tuple[tuple[Any, ...], str, str, str, str, float]] = (
            asyncio.Queue(maxsize=EVENT_BACKLOG)
        )
        self.in_flight = InFlightIndex()
        # Admitted workloads whose demand is still counted on the worker that admitted
        # them, until what is read of it counts the reservation (see _admitted_to).
        self._admitted: dict[str, Admitted] = {}
        self.memo = FitMemo()  # work saved across decisions; never changes one
        # Clusters leaving the inventory: no new nominations while they drain.
        self.excluded: set[str] = set()
        # What was last said on each workload, as a hash: only equality matters, and
        # 10,000 pending workloads' full messages would be megabytes.
        self.last_event: dict[str, int] = {}
        self._event_pace = Pace(EVENTS_PER_SECOND, EVENT_BURST)
        # Workloads whose nomination the API server refused (conflict, invalid): key -> the
        # resourceVersion it was decided on. Decided again only on a newer version.
        self._refused: dict[str, str | None] = {}
        self.heartbeat = time.monotonic()
        self._policies_changed = asyncio.Event()
        self._write_slots = asyncio.Semaphore(settings.concurrent_writes)
        self._writing: set[str] = set()
        # Our own nominations coming back through the watch: key -> (the workload as it was
        # decided on, the clusters written). Nothing else changed, so no new decision.
        self._echo: dict[str, tuple[dict[str, Any], tuple[str, ...], Any]] = {}
        # Workloads nominated where they fit, and what that was decided on: key -> (the
        # workload, the fleet key, when widening is due). A resync skips them while all
        # three hold; 10,000 of them waiting for admission are otherwise 10,000 decisions
        # that find what they found before.
        self._settled: dict[str, tuple[dict[str, Any], Any, float]] = {}
        self._tasks_in_flight: set[asyncio.Task] = set()
        self._tasks: list[asyncio.Task] = []

    # --- events in --------------------------------------------------------------------------

    def _changed(self, source: str, event: str, obj: Any) -> None:
        if source == "holding":
            # A worker's Workload holds quota there (`obj`: its key; None: any may, after a
            # list). Not a fleet change: what it holds moves from in flight to reserved.
            self._counted_on(event, obj)
            return
        if source == "workers" and self._admitted:
            self._queue_rewritten(event)
        if source == "workloads" and obj is not None:
            key = key_of(obj)
            if event == "DELETED":
                self._forget(key)
            elif not self._is_echo(key, obj):
                self.enqueue(key)
            self._enqueue_primary(obj)
        else:
            if source == "workloads" and event == "SYNC":
                # A (re)list replaced the store: a workload deleted while the watch was
                # down never sends DELETED, so what is remembered of it goes now.
                self._forget_gone()
            # Coalesced: worker queues change on every admission; looking at every pending
            # workload once per change would be a storm. The resync loop does it soon.
            self._fleet_changed = True
            if source == "policies":
                self._policies_changed.set()

    def _enqueue_primary(self, obj: dict[str, Any]) -> None:
        """A LeaderWorkerSet's group came or went: its primary's demand changed, so the
        primary is decided again (while it waits for a cluster)."""
        index = ((obj.get("metadata") or {}).get("annotations") or {}).get(COMPONENT_INDEX)
        group = group_of(obj) if index not in (None, "0") else None
        if group is None:
            return
        for key, member in self.state.workloads.store.items():
            annotations = (member.get("metadata") or {}).get("annotations") or {}
            if annotations.get(COMPONENT_INDEX) == "0" and group_of(member) == group:
                if not (member.get("status") or {}).get("clusterName"):
                    self.enqueue(key)
                return

    def enqueue(self, key: str) -> None:
        self.later.pop(key, None)
        self.urgent[key] = None
        self._wake.set()

    def enqueue_pending(self) -> None:
        """Every workload whose MultiKueue check still waits for a cluster, behind the
        urgent ones. Those already nominated go first, so their in-flight demand is counted
        before new decisions."""
        pending = []
        fleet, now = self._fleet_key(), time.monotonic()
        for key, wl in self.state.workloads.store.items():
            status = wl.get("status") or {}
            if status.get("clusterName") or key in self.urgent:
                continue
            settled = self._settled.get(key)
            if settled and settled[0] is wl and settled[1] == fleet and now < settled[2]:
                continue
            pending.append((not status.get("nominatedClusterNames"), key))
        for _, key in sorted(pending):
            self.later[key] = None
        self._wake.set()

    def _next(self) -> str | None:
        for queue in (self.urgent, self.later):
            if queue:
                key = next(iter(queue))
                del queue[key]
                return key
        return None

    def look_at_everything(self) -> None:
        """A new leader forgets what it settled: the old one may have died mid-way."""
        self.last_event.clear()
        self._settled.clear()
        self.enqueue_pending()

    def _fleet_key(self) -> tuple[Any, ...]:
        return (self.state.fleet_key(), frozenset(self.excluded))

    def _settle(self, key: str, wl: dict[str, Any], fleet: Any) -> None:
        """Remember that `wl` is nominated where it fits, until widening is due."""
        queue = ((wl.get("status") or {}).get("admission") or {}).get("clusterQueue", "")
        widen = self.state.policy_set().for_queue(queue, self.settings.default_policy)
        since = quota_reserved_at(wl)
        due = math.inf
        if widen.widen_after_seconds > 0 and since is not None:
            waited = (_now() - since).total_seconds()
            period = widen.widen_after_seconds
            due = time.monotonic() + period - waited % period
        self._settled[key] = (wl, fleet, due)

    def _is_echo(self, key: str, obj: dict[str, Any]) -> bool:
        """Is this change only the nomination we wrote? Deciding again would find the same
        (the fleet's changes are looked at by the resync), at a cost per nomination."""
        decided_on, written, fleet = self._echo.pop(key, (None, (), None))
        if decided_on is None:
            return False
        now_nominated = tuple((obj.get("status") or {}).get("nominatedClusterNames") or ())
        if now_nominated != written or not _same_but_nominations(decided_on, obj):
            return False
        if fleet is not None:
            self._settle(key, obj, fleet)
        return True

    def _forget_gone(self) -> None:
        store = self.state.workloads.store
        known = {
            *self.in_flight.workloads(),
            *self._admitted,
            *self._settled,
            *self._echo,
            *self._refused,
        }
        for key in known | set(self.last_event):
            if key not in store:
                self._forget(key)

    def _forget(self, key: str) -> None:
        self._echo.pop(key, None)
        self._refused.pop(key, None)
        self._settled.pop(key, None)
        self._uncount(key)
        self.last_event.pop(key, None)

    def _uncount(self, key: str) -> None:
        self.in_flight.remove(key)
        self._admitted.pop(key, None)

    # --- demand in flight after admission -----------------------------------------------------

    def _admitted_to(self, key: str, cluster: str) -> None:
        """`key` got `cluster` as its clusterName: MultiKueue sets it once the worker's copy
        is admitted (pkg/controller/admissionchecks/multikueue/workload.go 1240-1250,
        v0.19.2), but the worker's ClusterQueue status counts the copy only when Kueue's
        clusterqueue controller rewrites it, a batch period later (UpdatesBatchPeriod,
        pkg/controller/core/clusterqueue_controller.go 481-486). So its demand keeps
        counting there (only there: its other nominations are gone) until the worker's
        Workloads show the copy holding quota (they are what the reservation read from
        the worker is never below: fleet_state.queue_capacity), or, where they cannot be
        read, until the ClusterQueue's status is rewritten; never longer than
        ADMITTED_UNSEEN_SECONDS."""
        before = self._admitted.get(key)
        kept = [i for i in self.in_flight.items(key) if i.cluster == cluster]
        self._forget(key)  # its nominations, Events and settling are over
        connection = self.state.workers.get(cluster)
        if not kept or connection is None:
            return
        holds = connection.holds(key)
        if holds:
            return  # the copy's reservation is read from the worker already
        self.in_flight.replace(key, kept)
        if before is not None and before.cluster == cluster:
            self._admitted[key] = before  # seen before: its clock and version stand
            return
        queue = kept[0].cluster_queue
        version = None if holds is not None else (connection.queue_version(queue) or "")
        self._admitted[key] = Admitted(
            cluster, queue, version, time.monotonic() + ADMITTED_UNSEEN_SECONDS
        )

    def _counted_on(self, cluster: str, key: str | None) -> None:
        """The worker `cluster`'s Workload `key` (every one, for None) holds quota there:
        its demand in flight there is counted in the worker's reservation now, and
        counting it in flight too would count it twice."""
        connection = self.state.workers.get(cluster)
        if connection is None:
            return
        keys = [key] if key is not None else self.in_flight.workloads()
        dropped = False
        for k in keys:
            if cluster in self.in_flight.clusters_of(k) and connection.holds(k):
                self.in_flight.drop(k, cluster)
                dropped = True
                admitted = self._admitted.get(k)
                if admitted is not None and admitted.cluster == cluster:
                    del self._admitted[k]
        if dropped:
            # The views read the worker's Workloads again before the next decision: until
            # then they would count neither.
            self.state.read_workers_again()

    def _queue_rewritten(self, cluster: str) -> None:
        """Something of worker `cluster` changed: the admitted workloads waiting there for
        a rewrite of their ClusterQueue's status (its Workloads unreadable) stop counting
        when it came."""
        connection = self.state.workers.get(cluster)
        for key, admitted in list(self._admitted.items()):
            if admitted.cluster != cluster or admitted.queue_version is None:
                continue
            if connection is None or (
                connection.queue_version(admitted.cluster_queue) != admitted.queue_version
            ):
                self._uncount(key)

    def _expire_admitted(self) -> None:
        """What a lost event, or a worker gone from the fleet, would leave counted."""
        now = time.monotonic()
        for key, admitted in list(self._admitted.items()):
            if now >= admitted.until or admitted.cluster not in self.state.workers:
                self._uncount(key)

    # --- running ------------------------------------------------------------------------------

    async def start(self) -> None:
        await self.state.start()
        self._tasks = [
            asyncio.create_task(self._work(), name="dispatch"),
            *(asyncio.create_task(self._send_events(), name=f"events-{i}") for i in range(2)),
            asyncio.create_task(self._resync(), name="resync"),
            asyncio.create_task(self._policy_status(), name="policy-status"),
        ]

    async def _policy_status(self) -> None:
        while True:
            await self._policies_changed.wait()
            self._policies_changed.clear()
            await self.sync_policy_status()

    async def stop(self) -> None:
        for task in [*self._tasks, *self._tasks_in_flight]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._tasks_in_flight, return_exceptions=True)
        await self.state.stop()

    async def _resync(self) -> None:
        """Re-evaluates pending workloads after fleet changes (at most once a second) and
        every resync period (widening and staleness are about time passing)."""
        last = time.monotonic()
        while True:
            await asyncio.sleep(1.0)
            due = time.monotonic() - last >= self.settings.resync_seconds
            if self._fleet_changed or due:
                self._fleet_changed = False
                self.enqueue_pending()
            if self._admitted:
                self._expire_admitted()
            if due:
                last = time.monotonic()
                await self.sync_policy_status()
                self._export_health()

    def _export_health(self) -> None:
        for name, (healthy, _, age) in self.state.worker_health().items():
            self.metrics.worker_healthy.labels(name).set(1 if healthy else 0)
            self.metrics.snapshot_age.labels(name).set(age if age != float("inf") else -1)

    async def _work(self) -> None:
        await self.state.wait_synced()
        await self.state.wait_workers(timeout=10)
        # What the lists brought is looked at now, not at the resync's next tick (up to a
        # second later: a tenth of a 10,000-workload backlog's time).
        self.enqueue_pending()
        while True:
            self.heartbeat = time.monotonic()
            key = self._next()
            if key is None:
                self._wake.clear()
                # Wake up now and then even with nothing to do: the heartbeat is what the
                # liveness probe reads. asyncio.wait, not wait_for: on Python 3.11 wait_for
                # loses a cancellation that arrives as the wake-up does, and stop() hangs.
                waiter = asyncio.ensure_future(self._wake.wait())
                try:
                    await asyncio.wait((waiter,), timeout=self.settings.resync_seconds)
                finally:
                    waiter.cancel()
                continue
            try:
                await self.reconcile(key)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("reconciling %s failed; it will be retried on the next change", key)

    # --- deciding -----------------------------------------------------------------------------

    def view(self, wl: dict[str, Any]) -> WorkloadView:
        """The workload as the policy reads it. A LeaderWorkerSet's primary (the only one
        of its group workloads we nominate) asks for the whole set: every workload of the
        same owner that exists now. Groups added later go where the primary went."""
        view = view_of(wl)
        group = group_of(wl)
        if group is None:
            return view
        members = [
            member
            for member in self.state.workloads.store.values()
            if member is wl or group_of(member) == group
        ]
        return replace(view, requests=group_requests(members)) if len(members) > 1 else view

    def evaluate(self, key: str) -> tuple[Eligibility, Decision | None, str]:
        """What the policy would do for one workload now, without writing anything.
        Returns (eligibility, decision or None, the policy name or a problem)."""
        wl = self.state.workloads.store.get(key)
        if wl is None:
            return Eligibility(False, "no such workload on the manager"), None, ""
        found, decision, policy, _ = self._evaluate(wl)
        return found, decision, policy

    def _evaluate(
        self, wl: dict[str, Any]
    ) -> tuple[Eligibility, Decision | None, str, WorkloadView | None]:
        """`evaluate`, and the workload as the policy read it (its requests parsed once)."""
        checks = self.state.multikueue_checks()
        found = eligibility(wl, set(checks))
        if not found.eligible:
            return found, None, "", None
        view = self.view(wl)
        if view.nominated:
            # Widening counts from when the workload began to wait for a cluster: Kueue's
            # QuotaReserved transition on the manager (renewed when an eviction requeues
            # it). It is on the object, so a restart or a new leader widens on the same
            # schedule; a clock kept in memory would start again at every restart.
            view = replace(view, nominated_at=quota_reserved_at(wl))
        queue = ((wl.get("status") or {}).get("admission") or {}).get("clusterQueue", "")
        policy = self.state.policy_set().for_queue(queue, self.settings.default_policy)
        clusters = [
            c
            for c in self.state.config_clusters(checks[found.check or ""])
            if c not in self.excluded
        ]
        if not clusters:
            return (
                Eligibility(
                    False,
                    f"MultiKueueConfig {checks[found.check or '']} lists no "
                    "clusters (or does not exist)",
                    found.check,
                ),
                None,
                "",
                view,
            )
        started = time.perf_counter()
        decision = decide(
            view, clusters, self.state.worker_views(), policy, self.in_flight, _now(), self.memo
        )
        self.metrics.decision_seconds.observe(time.perf_counter() - started)
        return found, decision, policy.name, view

    async def reconcile(self, key: str) -> None:
        wl = self.state.workloads.store.get(key)
        if wl is None:
            self._forget(key)
            return
        self._settled.pop(key, None)
        refused = self._refused.pop(key, None)
        if refused is not None and refused == (wl.get("metadata") or {}).get("resourceVersion"):
            # A write decided on this version was refused; its successor, when the watch
            # brings it, is looked at (its change enqueues it).
            self._refused[key] = refused
            return
        fleet = self._fleet_key()  # what this decision is made on (nothing awaits before it)
        try:
            found, decision, _, view = self._evaluate(wl)
        except MalformedWorkload as exc:
            await self.event(
                wl, "Warning", "InvalidWorkload", f"The dispatcher cannot read this workload: {exc}"
            )
            return
        if decision is None:
            cluster = (wl.get("status") or {}).get("clusterName")
            if found.reason == "finished":
                self._forget(key)  # done: nothing of it is counted anywhere
            elif cluster:
                # Admitted: counted on its worker until what is read of it counts it.
                self._admitted_to(key, cluster)
            elif not found.eligible:
                # Deactivated, evicted (no quota reserved on the manager any more), its
                # check no longer Pending, or another check not Ready: none of it goes to
                # a worker now, so none of its demand is counted against one. Decided
                # again, it is recorded again.
                self._uncount(key)
                self._settled.pop(key, None)
            return
        current = list((wl.get("status") or {}).get("nominatedClusterNames") or [])
        if not decision.nominate:
            self.metrics.no_feasible.labels(decision.blocker()).inc()
            await self.event(wl, "Warning", "NoFeasibleCluster", decision.summary, decision)
            return
        assert view is not None  # read whenever there is a decision
        if list(decision.nominate) == current:
            # Already in place (a restart, or our own write coming back): keep counting it.
            self._record_in_flight(key, decision, view)
            if decision.outcome == "nominated":
                self._settle(key, wl, fleet)
            return
        if not self.is_leader() or key in self._writing:
            return  # a write for it is under way; its completion looks at it again
        # Decisions stay one at a time (the in-flight demand is what keeps two of them
        # from taking the same last slot), so it is recorded now; the writes run
        # concurrently, a bounded number at once, at most one per workload.
        self._record_in_flight(key, decision, view)
        self._writing.add(key)
        await self._write_slots.acquire()
        settles = fleet if decision.outcome == "nominated" else None
        task = asyncio.create_task(self._actuate(wl, key, decision, current, settles))
        self._tasks_in_flight.add(task)
        task.add_done_callback(self._tasks_in_flight.discard)

    async def _actuate(
        self,
        wl: dict[str, Any],
        key: str,
        decision: Decision,
        current: list[str],
        fleet: Any = None,
    ) -> None:
        """The write, then its Event. `fleet`: the fleet key of a decision that nominated
        where the workload fits, so its echo settles it."""
        clusters = list(decision.nominate)
        # The write's echo through the watch is recognised by the version it answers with,
        # so the watch holds back an event of this workload until the answer is in.
        answered = self.state.workloads.writing(wl)
        written = None
        try:
            written = await self._nominate(wl, key, clusters)
        finally:
            self._write_slots.release()
            self._writing.discard(key)
            if written is not None:
                # Before the answer is given: the echo, once recognised, is looked up here.
                self._echo[key] = (wl, tuple(decision.nominate), fleet)
            answered(_nominated(wl, clusters, written) if written else None)
        if written is None:
            self._uncount(key)
            return
        for cluster in decision.nominate:
            if cluster not in current:
                self.metrics.nominations.labels(cluster).inc()
        verb = "Nominated" if decision.outcome == "nominated" else "WaitingForCapacity"
        others = [c for c, _, _ in decision.standings if c not in decision.nominate]
        message = decision.summary
        if others:
            # Events hold 1 KiB: the first few, and where to see them all. Only those shown
            # have their verdict made and their reason written out.
            shown = [f"{c} ({decision.verdict(c).reason})" for c in others[:EVENT_CLUSTERS_SHOWN]]
            more = len(others) - len(shown)
            message += "; not chosen: " + "; ".join(shown)
            if more:
                message += f"; and {more} more (python -m controller explain {key})"
        await self.event(wl, "Normal", verb, message, decision)

    def _record_in_flight(self, key: str, decision: Decision, view: WorkloadView) -> None:
        """Count the demand against each nominated worker's ClusterQueue until admission,
        but not where the worker's Workloads show its copy holding quota already: the
        reservation read from there counts it."""
        views = self.state.worker_views()
        workers = self.state.workers
        local_queue = f"{view.namespace}/{view.queue_name}"
        self._admitted.pop(key, None)
        self.in_flight.replace(
            key,
            [
                InFlight(
                    key,
                    v.cluster,
                    views[v.cluster].local_queues.get(local_queue, ""),
                    v.flavors,
                    view.requests,
                )
                for v in decision.chosen
                if v.cluster in views
                and not (v.cluster in workers and workers[v.cluster].holds(key))
            ],
        )

    # --- writing (leader only) ----------------------------------------------------------------

    async def _nominate(self, wl: dict[str, Any], key: str, clusters: list[str]) -> str | None:
        """The write, on the condition that the workload is still the one decided on: the
        patch carries its resourceVersion, which the API server checks (409 Conflict when
        it moved on). An eviction clears clusterName and the nominations, and on the external
        dispatcher path Kueue v0.19.2 uses the list as soon as the check is Pending again
        (nominateAndSynchronizeWorkers in
        pkg/controller/admissionchecks/multikueue/workload.go): a list decided before it
        must never land after it. Returns the workload's new resourceVersion when the write
        was made on a known one ("" when not), None when it was not made."""
        namespace, name = key.split("/", 1)
        version = (wl.get("metadata") or {}).get("resourceVersion")
        patch: dict[str, Any] = {"status": {"nominatedClusterNames": clusters}}
        if version:
            patch["metadata"] = {"resourceVersion": version}
        try:
            answer = await self.manager.merge_patch(
                WORKLOADS, name, patch, namespace, status=True, answer="version"
            )
        except ApiError as exc:
            if exc.status in (404, 409, 422):
                # Gone, or changed under us (evicted, admitted meanwhile): look again, on
                # the state the watch brings, never retry the old list. Until the watch
                # has a newer version, deciding would only repeat the refused write.
                log.info("nominating %s: %s; deciding again on its next version", key, exc)
                if exc.status != 404:
                    self._refused[key] = version
                    self.enqueue(key)
            else:
                self.metrics.write_errors.labels("workload").inc()
                log.warning("nominating %s failed after retries: %s", key, exc)
                self.enqueue(key)
            return None
        return (answer.get("metadata") or {}).get("resourceVersion", "") if version else ""

    async def event(
        self,
        obj: dict[str, Any],
        kind: str,
        reason: str,
        message: str,
        decision: Decision | None = None,
    ) -> None:
        """One Event per distinct decision on an object (or, without one, per distinct
        message), so resyncs do not flood it. A decision is the same while it nominates
        the same clusters and judges each the same way: the numbers in its message (free
        quota, headroom, how long a worker has been silent) change at every resync and
        would make every message new."""
        key = key_of(obj)
        said = hash((reason, signature(decision) if decision is not None else message))
        if not self.is_leader() or self.last_event.get(key) == said:
            return
        # Sent in the background, after the nomination itself: like client-go's recorder,
        # Events are best effort and must not slow down or block the writes that matter.
        # Queued as the few strings that make one, not as a body nor with the object (that
        # would keep a replaced workload alive): 10,000 waiting Events stay a few megabytes.
        meta = obj.get("metadata") or {}
        about = (
            obj.get("apiVersion", "kueue.x-k8s.io/v1beta2"),
            obj.get("kind", "Workload"),
            meta.get("name"),
            meta.get("namespace"),
            meta.get("uid"),
        )
        made = _now().strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            self._events.put_nowait(
                (about, kind, reason, message[:EVENT_MESSAGE_LIMIT], made, time.monotonic())
            )
        except asyncio.QueueFull:
            self.metrics.write_errors.labels("event-dropped").inc()
            return
        self.last_event[key] = said

    def _event_body(
        self, about: tuple[Any, ...], kind: str, reason: str, message: str, made: str
    ) -> dict[str, Any]:
        api_version, object_kind, name, namespace, uid = about
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "generateName": f"{name}.",
                # Events on cluster-scoped objects (policies) live in "default", as kubectl's do.
                "namespace": namespace or "default",
            },
            "involvedObject": {
                "apiVersion": api_version,
                "kind": object_kind,
                "name": name,
                "namespace": namespace,
                "uid": uid,
            },
            "type": kind,
            "reason": reason,
            "message": message,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.settings.identity,
            "firstTimestamp": made,
            "lastTimestamp": made,
            "count": 1,
        }

    async def _send_events(self) -> None:
        while True:
            about, kind, reason, message, made, queued = await self._events.get()
            # A bounded rate overall, whatever the backlog: a burst, then a steady pace.
            wait = self._event_pace.delay(time.monotonic())
            if wait > 0:
                await asyncio.sleep(wait)
            # The API server's capacity goes to the writes that matter first: each Event
            # costs it as much as a nomination. A backlog delays Events by at most
            # EVENT_MAX_DELAY_SECONDS; with no backlog they go at once.
            while (self.urgent or self._writing) and (
                time.monotonic() - queued < EVENT_MAX_DELAY_SECONDS
            ):
                await asyncio.sleep(0.05)
            body = self._event_body(about, kind, reason, message, made)
            try:
                await self.manager.create(
                    EVENTS, body, body["metadata"]["namespace"], answer="none"
                )
            except ApiError as exc:
                self.metrics.write_errors.labels("event").inc()
                log.warning("event on %s/%s: %s", about[3], about[2], exc)

    async def sync_policy_status(self) -> None:
        """A Ready condition on every DispatchPolicy: True when in force, False with why."""
        if not self.is_leader():
            return
        problems = self.state.policy_set().problems
        for name, obj in self.state.policies.store.items():
            status, message = (
                ("False", problems[name]) if name in problems else ("True", "in force")
            )
            # Read from the watched object every time, not from what this process wrote:
            # the inventory writes the same list, and a write of either that raced the
            # other's is seen here and made again.
            conditions = (obj.get("status") or {}).get("conditions") or []
            current = next((c for c in conditions if c.get("type") == "Ready"), {})
            if (current.get("status"), current.get("message")) == (status, message):
                continue
            condition = {
                "type": "Ready",
                "status": status,
                "message": message,
                "reason": "Valid" if status == "True" else "Invalid",
                # The time the status last changed, as Kubernetes conditions keep it.
                "lastTransitionTime": current.get("lastTransitionTime")
                if current.get("status") == status
                else _now().strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
            # A merge patch replaces the whole list: keep the other writers' conditions
            # (the inventory's InventoryReady).
            others = [c for c in conditions if c.get("type") != "Ready"]
            patch = {
                "status": {
                    "conditions": [*others, condition],
                    "observedGeneration": obj["metadata"].get("generation", 1),
                }
            }
            try:
                await self.manager.merge_patch(DISPATCH_POLICIES, name, patch, status=True)
            except ApiError as exc:
                self.metrics.write_errors.labels("policy").inc()
                log.warning("status of DispatchPolicy %s: %s", name, exc)
