"""The demand the dispatcher counts against workers in flight: nominated workloads until a
worker admits them, and an admitted one on the worker that admitted it until what is read
of that worker counts the reservation."""

from __future__ import annotations

import time
from dataclasses import dataclass

from controller.fleet_state import FleetState
from controller.in_flight_index import InFlightIndex
from controller.model import Decision, InFlight, WorkloadView
from controller.policy import takes_room

# The longest an admitted workload's demand stays counted on the worker that admitted it
# while what is read of that worker does not show the reservation (its Workloads, or a
# rewrite of its ClusterQueue's status): Kueue v0.19.2 writes that status a batch period
# (1s) after the reservation, so this only bounds what a lost event would leave behind.
ADMITTED_UNSEEN_SECONDS = 10.0


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


class InFlightDemand:
    """`index`: what the policy reads; `admitted`: the admitted workloads in it."""

    def __init__(self, state: FleetState) -> None:
        self.state = state
        self.index = InFlightIndex()
        self.admitted: dict[str, Admitted] = {}

    def workloads(self) -> set[str]:
        return {*self.index.workloads(), *self.admitted}

    def uncount(self, key: str) -> None:
        self.index.remove(key)
        self.admitted.pop(key, None)

    def record(self, key: str, decision: Decision, view: WorkloadView) -> None:
        """Count the demand against each nominated worker's ClusterQueue until admission
        where it takes room there (policy.takes_room), but not where the worker's
        Workloads show its copy holding quota already: the reservation read from there
        counts it."""
        views = self.state.worker_views()
        workers = self.state.workers
        local_queue = f"{view.namespace}/{view.queue_name}"
        self.admitted.pop(key, None)
        counted = []
        for v in decision.chosen:
            worker = views.get(v.cluster)
            if worker is None or (v.cluster in workers and workers[v.cluster].holds(key)):
                continue
            queue_name = worker.local_queues.get(local_queue, "")
            if takes_room(v, worker.queues.get(queue_name)):
                counted.append(InFlight(key, v.cluster, queue_name, v.flavors, view.requests))
        self.index.replace(key, counted)

    def admitted_to(self, key: str, cluster: str) -> None:
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
        before = self.admitted.get(key)
        kept = [i for i in self.index.items(key) if i.cluster == cluster]
        self.uncount(key)
        connection = self.state.workers.get(cluster)
        if not kept or connection is None:
            return
        holds = connection.holds(key)
        if holds:
            return  # the copy's reservation is read from the worker already
        self.index.replace(key, kept)
        if before is not None and before.cluster == cluster:
            self.admitted[key] = before  # seen before: its clock and version stand
            return
        queue = kept[0].cluster_queue
        version = None if holds is not None else (connection.queue_version(queue) or "")
        self.admitted[key] = Admitted(
            cluster, queue, version, time.monotonic() + ADMITTED_UNSEEN_SECONDS
        )

    def counted_on(self, cluster: str, key: str | None) -> bool:
        """The worker `cluster`'s Workload `key` (every one, for None) holds quota there:
        its demand in flight there is counted in the worker's reservation now, and
        counting it in flight too would count it twice. Returns whether any stopped
        counting here."""
        connection = self.state.workers.get(cluster)
        if connection is None:
            return False
        keys = [key] if key is not None else self.index.workloads()
        dropped = False
        for k in keys:
            if cluster in self.index.clusters_of(k) and connection.holds(k):
                self.index.drop(k, cluster)
                dropped = True
                admitted = self.admitted.get(k)
                if admitted is not None and admitted.cluster == cluster:
                    del self.admitted[k]
        return dropped

    def queue_rewritten(self, cluster: str) -> None:
        """Something of worker `cluster` changed: the admitted workloads waiting there for
        a rewrite of their ClusterQueue's status (its Workloads unreadable) stop counting
        when it came."""
        if not self.admitted:
            return
        connection = self.state.workers.get(cluster)
        for key, admitted in list(self.admitted.items()):
            if admitted.cluster != cluster or admitted.queue_version is None:
                continue
            if connection is None or (
                connection.queue_version(admitted.cluster_queue) != admitted.queue_version
            ):
                self.uncount(key)

    def expire_admitted(self) -> None:
        """What a lost event, or a worker gone from the fleet, would leave counted."""
        now = time.monotonic()
        for key, admitted in list(self.admitted.items()):
            if now >= admitted.until or admitted.cluster not in self.state.workers:
                self.uncount(key)
