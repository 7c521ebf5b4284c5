"""The dispatch loop: from watch events to nominations on the manager.

Changed workloads, and every pending one when the fleet changes, go through a deduplicated
queue (work_queue.py), less what is known to need no new decision (decided.py); each is
decided from the snapshot by the pure policy, its demand counted in flight (in_flight.py),
and only the leader writes: `status.nominatedClusterNames` (nominations.py), an Event on the
workload saying where and why (events.py), and the DispatchPolicies' Ready conditions
(policy_status.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from controller.decided import Decided, quota_reserved_at
from controller.events import EventRecorder, nomination_message
from controller.fit_memo import FitMemo
from controller.fleet_state import FleetState
from controller.in_flight import InFlightDemand
from controller.in_flight_index import InFlightIndex
from controller.kube import Kube
from controller.metrics import Metrics
from controller.model import Decision, Resources, WorkloadView
from controller.nominations import NominationWriter, nominated
from controller.policy import decide
from controller.policy_status import sync_policy_status
from controller.settings import Settings
from controller.work_queue import WorkQueue
from controller.workloads import (
    COMPONENT_INDEX,
    Eligibility,
    MalformedWorkload,
    eligibility,
    group_of,
    group_requests,
    key_of,
    requests_of,
    view_of,
)

log = logging.getLogger("controller.dispatcher")


def _now() -> datetime:
    return datetime.now(UTC)


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
        self.queue = WorkQueue()
        self._fleet_changed = False
        self.events = EventRecorder(manager, metrics, settings.identity, is_leader)
        self.demand = InFlightDemand(self.state, self._group_demand)
        self.decided = Decided(self._widen_period)
        self.writer = NominationWriter(manager, metrics, settings.concurrent_writes)
        self.memo = FitMemo()  # work saved across decisions; never changes one
        # Clusters leaving the inventory: no new nominations while they drain.
        self.excluded: set[str] = set()
        self.heartbeat = time.monotonic()
        self._policies_changed = asyncio.Event()
        self._tasks: list[asyncio.Task] = []

    @property
    def in_flight(self) -> InFlightIndex:
        """The demand in flight, as the policy reads it."""
        return self.demand.index

    # --- events in --------------------------------------------------------------------------

    def _changed(self, source: str, event: str, obj: Any) -> None:
        if source == "holding":
            # A worker's Workload holds quota there (`obj`: its key; None: any may, after a
            # list). Not a fleet change: what it holds moves from in flight to reserved.
            if self.demand.counted_on(event, obj):
                # The views read the worker's Workloads again before the next decision:
                # until then they would count neither.
                self.state.read_workers_again()
            return
        if source == "workers":
            self.demand.queue_rewritten(event)
        if source == "workloads" and obj is not None:
            key = key_of(obj)
            if event == "DELETED":
                self._forget(key)
            elif not self.decided.is_echo(key, obj):
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
        self.queue.add(key)

    def enqueue_pending(self) -> None:
        """Every workload whose MultiKueue check still waits for a cluster, behind the
        urgent ones. Those already nominated go first, so their in-flight demand is counted
        before new decisions."""
        pending = []
        fleet, now = self._fleet_key(), time.monotonic()
        for key, wl in self.state.workloads.store.items():
            status = wl.get("status") or {}
            if status.get("clusterName") or key in self.queue.urgent:
                continue
            if self.decided.is_settled(key, wl, fleet, now):
                continue
            pending.append((not status.get("nominatedClusterNames"), key))
        self.queue.add_later(key for _, key in sorted(pending))

    def look_at_everything(self) -> None:
        """A new leader forgets what it settled: the old one may have died mid-way."""
        self.events.last.clear()
        self.decided.settled.clear()
        self.enqueue_pending()

    def _fleet_key(self) -> tuple[Any, ...]:
        return (self.state.fleet_key(), frozenset(self.excluded))

    def _widen_period(self, wl: dict[str, Any]) -> float:
        queue = ((wl.get("status") or {}).get("admission") or {}).get("clusterQueue", "")
        policy = self.state.policy_set().for_queue(queue, self.settings.default_policy)
        return policy.widen_after_seconds

    def _forget_gone(self) -> None:
        store = self.state.workloads.store
        known = self.demand.workloads() | self.decided.keys() | set(self.events.last)
        for key in known:
            if key not in store:
                self._forget(key)

    def _forget(self, key: str) -> None:
        self.decided.forget(key)
        self.demand.uncount(key)
        self.events.forget(key)

    # --- running ------------------------------------------------------------------------------

    async def start(self) -> None:
        await self.state.start()
        self._tasks = [
            asyncio.create_task(self._work(), name="dispatch"),
            *(
                asyncio.create_task(self.events.send(self._writes_waiting), name=f"events-{i}")
                for i in range(2)
            ),
            asyncio.create_task(self._resync(), name="resync"),
            asyncio.create_task(self._policy_status(), name="policy-status"),
        ]

    def _writes_waiting(self) -> bool:
        return bool(self.queue.urgent or self.writer.writing)

    async def _policy_status(self) -> None:
        while True:
            await self._policies_changed.wait()
            self._policies_changed.clear()
            await self.sync_policy_status()

    async def sync_policy_status(self) -> None:
        """A Ready condition on every DispatchPolicy: True when in force, False with why."""
        if self.is_leader():
            await sync_policy_status(self.manager, self.state, self.metrics)

    async def event(
        self,
        obj: dict[str, Any],
        kind: str,
        reason: str,
        message: str,
        decision: Decision | None = None,
    ) -> None:
        await self.events.say(obj, kind, reason, message, decision)

    async def stop_writing(self) -> None:
        """Cancels the writes under way (leadership lost); their workloads are decided
        again by whoever leads next."""
        tasks = list(self.writer.tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def stop(self) -> None:
        for task in [*self._tasks, *self.writer.tasks]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self.writer.tasks, return_exceptions=True)
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
                self._export_cordons()
            self.demand.expire_admitted()
            if due:
                last = time.monotonic()
                await self.sync_policy_status()
                self._export_health()

    def _export_health(self) -> None:
        for name, (healthy, _, age) in self.state.worker_health().items():
            self.metrics.worker_healthy.labels(name).set(1 if healthy else 0)
            self.metrics.snapshot_age.labels(name).set(age if age != float("inf") else -1)

    def _export_cordons(self) -> None:
        for name, view in self.state.worker_views().items():
            self.metrics.worker_cordoned.labels(name).set(1 if view.cordoned else 0)

    async def _work(self) -> None:
        await self.state.wait_synced()
        await self.state.wait_workers(timeout=10)
        # What the lists brought is looked at now, not at the resync's next tick (up to a
        # second later: a tenth of a 10,000-workload backlog's time).
        self.enqueue_pending()
        while True:
            self.heartbeat = time.monotonic()
            key = self.queue.next()
            if key is None:
                # Wake up now and then even with nothing to do: the heartbeat is what the
                # liveness probe reads.
                await self.queue.wait(self.settings.resync_seconds)
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
        others = self._others_of_group(wl)
        if not others:
            return view
        return replace(view, requests=group_requests([wl, *others.values()]))

    def _others_of_group(self, wl: dict[str, Any]) -> dict[str, dict[str, Any]] | None:
        """The other workloads of `wl`'s LeaderWorkerSet that exist now, by key; None for a
        workload alone."""
        group = group_of(wl)
        if group is None:
            return None
        return {
            key: member
            for key, member in self.state.workloads.store.items()
            if member is not wl and group_of(member) == group
        }

    def _group_demand(self, key: str) -> tuple[Resources | None, dict[str, Resources] | None]:
        """A LeaderWorkerSet primary's own demand and its other groups' (key -> demand),
        which `view` summed for its nomination; (None, None) for any other workload."""
        wl = self.state.workloads.store.get(key)
        annotations = ((wl or {}).get("metadata") or {}).get("annotations") or {}
        if wl is None or annotations.get(COMPONENT_INDEX) != "0":
            return None, None
        others = self._others_of_group(wl)
        if not others:
            return None, None
        try:
            return requests_of(wl), {k: requests_of(m) for k, m in others.items()}
        except MalformedWorkload:
            return None, None  # counted as it was nominated: the whole set's demand

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
        self.decided.settled.pop(key, None)
        if self.decided.still_refused(key, (wl.get("metadata") or {}).get("resourceVersion")):
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
                # Admitted: counted on its worker until what is read of it counts it; its
                # nominations, Events and settling are over.
                self.decided.forget(key)
                self.events.forget(key)
                self.demand.admitted_to(key, cluster)
            elif not found.eligible:
                # Deactivated, evicted (no quota reserved on the manager any more), its
                # check no longer Pending, or another check not Ready: none of it goes to
                # a worker now, so none of its demand is counted against one. Decided
                # again, it is recorded again. (A group following its primary's cluster
                # stays counted there: InFlightDemand.withdraw.)
                self.demand.withdraw(key)
                self.decided.settled.pop(key, None)
            return
        current = list((wl.get("status") or {}).get("nominatedClusterNames") or [])
        if not decision.nominate:
            self.metrics.no_feasible.labels(decision.blocker()).inc()
            await self.event(wl, "Warning", "NoFeasibleCluster", decision.summary, decision)
            return
        assert view is not None  # read whenever there is a decision
        if list(decision.nominate) == current:
            # Already in place (a restart, or our own write coming back): keep counting it.
            self.demand.record(key, decision, view)
            if decision.outcome == "nominated":
                self.decided.settle(key, wl, fleet)
            return
        if not self.is_leader() or key in self.writer.writing:
            return  # a write for it is under way; its completion looks at it again
        # Decisions stay one at a time (the in-flight demand is what keeps two of them
        # from taking the same last slot), so it is recorded now; the writes run
        # concurrently, a bounded number at once, at most one per workload.
        self.demand.record(key, decision, view)
        settles = fleet if decision.outcome == "nominated" else None
        await self.writer.start(
            key,
            lambda: self._actuate(wl, key, decision, current, settles),
            abandoned=lambda: self.demand.uncount(key),
        )

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
            result = await self.writer.write(wl, key, clusters)
            written = result.version
            if result.refused:
                self.decided.refuse(key, (wl.get("metadata") or {}).get("resourceVersion"))
            if result.again:
                self.enqueue(key)
        finally:
            self.writer.done(key)
            if written is not None:
                # Before the answer is given: the echo, once recognised, is looked up here.
                self.decided.expect_echo(key, wl, tuple(decision.nominate), fleet)
            else:  # failed, or cancelled (leadership lost): nothing of it is in flight
                self.demand.uncount(key)
            answered(nominated(wl, clusters, written) if written else None)
        if written is None:
            return
        reserved = quota_reserved_at(wl)
        if not current and reserved is not None:
            delay = (_now() - reserved).total_seconds()
            self.metrics.nomination_delay.observe(max(0.0, delay))
        for cluster in decision.nominate:
            if cluster not in current:
                self.metrics.nominations.labels(cluster).inc()
        verb = "Nominated" if decision.outcome == "nominated" else "WaitingForCapacity"
        await self.event(wl, "Normal", verb, nomination_message(key, decision), decision)
