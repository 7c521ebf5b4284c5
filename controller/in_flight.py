"""The demand the dispatcher counts against workers in flight: nominated workloads until a
worker admits them, and an admitted one on the worker that admitted it until what is read
of that worker counts the reservation (a LeaderWorkerSet's other groups there too, until
each of their copies is read there)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from controller.fleet_state import FleetState
from controller.in_flight_index import InFlightIndex
from controller.model import Decision, InFlight, Resources, WorkloadView
from controller.policy import takes_room

# The longest an admitted workload's demand stays counted on the worker that admitted it
# while what is read of that worker does not show the reservation (its Workloads, or a
# rewrite of its ClusterQueue's status): Kueue v0.19.2 writes that status a batch period
# (1s) after the reservation, so this only bounds what a lost event would leave behind.
ADMITTED_UNSEEN_SECONDS = 10.0

# The longest a LeaderWorkerSet's other groups count in flight on the worker its primary was
# admitted on while that worker shows no copy of them. Kueue v0.19.2 sends them there only
# when it reconciles each of them after the primary's admission (enqueueComponentWorkloads,
# then syncToSingleCluster: pkg/controller/admissionchecks/multikueue/workload.go 787-893,
# 1261), each reconcile reading every worker through a client of 5 requests/s and burst 10
# (kueue issue 14973): 6 to 20 s on the KWOK fleet (BENCHMARKS.md section 5), so this only
# bounds what a lost event would leave behind.
FOLLOWERS_UNSEEN_SECONDS = 60.0


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


# key -> a LeaderWorkerSet primary's own demand and its other groups' (key -> demand);
# (None, None) for any other workload.
GroupDemand = Callable[[str], tuple[Resources | None, Mapping[str, Resources] | None]]


def _alone(key: str) -> tuple[None, None]:
    return None, None


class InFlightDemand:
    """`index`: what the policy reads; `admitted`: the admitted workloads in it;
    `group_demand`: what a LeaderWorkerSet's primary is made of (controller/dispatcher.py)."""

    def __init__(self, state: FleetState, group_demand: GroupDemand = _alone) -> None:
        self.state = state
        self.group_demand = group_demand
        self.index = InFlightIndex()
        self.admitted: dict[str, Admitted] = {}
        # A LeaderWorkerSet group's workload counted on the worker its primary was admitted
        # on (in `admitted` too, until its copy holds quota there) -> the primary's key.
        self.following: dict[str, str] = {}

    def workloads(self) -> set[str]:
        return {*self.index.workloads(), *self.admitted}

    def uncount(self, key: str) -> None:
        """`key`'s demand counts nowhere, nor that of the groups following it."""
        self._forget(key)
        for follower in [f for f, primary in self.following.items() if primary == key]:
            self._forget(follower)

    def _forget(self, key: str) -> None:
        self.index.remove(key)
        self.admitted.pop(key, None)
        self.following.pop(key, None)

    def withdraw(self, key: str) -> None:
        """`key` is not to be nominated now (evicted, deactivated, a group following its
        primary): its nominations' demand counts nowhere. A follower counted on its primary's
        worker stays counted there: Kueue is sending it (`admitted_to`)."""
        if key not in self.following:
            self.uncount(key)

    def record(self, key: str, decision: Decision, view: WorkloadView) -> None:
        """Count the demand against each nominated worker's ClusterQueue until admission
        where it takes room there (policy.takes_room), but not where the worker's
        Workloads show its copy holding quota already: the reservation read from there
        counts it."""
        views = self.state.worker_views()
        workers = self.state.workers
        local_queue = f"{view.namespace}/{view.queue_name}"
        self.uncount(key)  # nominated again: admitted nowhere, and its groups follow nothing
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
        ADMITTED_UNSEEN_SECONDS. A LeaderWorkerSet's other groups count there too
        (`_follow`)."""
        before = self.admitted.get(key)
        primary = self.following.get(key)
        kept = [i for i in self.index.items(key) if i.cluster == cluster]
        self._forget(key)
        for follower, of in list(self.following.items()):
            bound = self.admitted.get(follower)
            if of == key and (bound is None or bound.cluster != cluster):
                self._forget(follower)  # it follows the primary's cluster, not this one
        connection = self.state.workers.get(cluster)
        if not kept or connection is None:
            return
        holds = connection.holds(key)
        own = self._follow(key, kept[0]) if holds is not None else None
        if own is not None:
            kept = [replace(i, requests=own) for i in kept]
        if holds:
            return  # the copy's reservation is read from the worker already
        self.index.replace(key, kept)
        if primary is not None:
            self.following[key] = primary  # a group of a set: still counted as one
        if before is not None and before.cluster == cluster:
            self.admitted[key] = before  # seen before: its clock and version stand
            return
        queue = kept[0].cluster_queue
        version = None if holds is not None else (connection.queue_version(queue) or "")
        self.admitted[key] = Admitted(
            cluster, queue, version, time.monotonic() + ADMITTED_UNSEEN_SECONDS
        )

    def _follow(self, key: str, counted: InFlight) -> Resources | None:
        """Where `key` is a LeaderWorkerSet's primary whose copy `counted.cluster` admitted:
        its own demand (None for a workload alone), and each other group's counted there
        on its own from now. The primary was nominated for every group's demand, but its
        copy holds only its own; Kueue sends the other groups to that worker after it, each
        when MultiKueue reconciles it. Each counts until the worker's Workloads show its
        copy holding quota, it is gone, the primary goes back to the queue, or
        FOLLOWERS_UNSEEN_SECONDS have passed. Before, the whole set stopped counting the
        moment the primary's copy was seen, and the KWOK fleet packed two more sets onto a
        worker their groups then waited 70 to 80 s on (BENCHMARKS.md section 5). Not called
        where the worker's Workloads cannot be read: nothing would show a group's copy
        there before the bound."""
        own, followers = self.group_demand(key)
        connection = self.state.workers[counted.cluster]
        until = time.monotonic() + FOLLOWERS_UNSEEN_SECONDS
        for follower, requests in (followers or {}).items():
            if follower in self.following or connection.holds(follower):
                continue
            self.index.replace(follower, [replace(counted, workload=follower, requests=requests)])
            self.admitted[follower] = Admitted(counted.cluster, counted.cluster_queue, None, until)
            self.following[follower] = key
        return own

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
            counted = [i for i in self.index.items(k) if i.cluster == cluster]
            if counted and connection.holds(k):
                self.index.drop(k, cluster)
                dropped = True
                admitted = self.admitted.get(k)
                if admitted is not None and admitted.cluster == cluster:
                    del self.admitted[k]
                    self.following.pop(k, None)
                elif k not in self.following:
                    # Seen on the worker before the manager's clusterName: its groups
                    # follow it there as well.
                    self._follow(k, counted[0])
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
