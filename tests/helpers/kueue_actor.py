"""Kueue's part in the dispatcher's tests, kept apart from the generic API server emulator:
the rules Kueue v0.19.2 enforces on the manager's Workloads, the API server's
resourceVersion precondition on a merge patch, and a worker's Kueue reserving quota for a
workload before the manager hears of it.

Rules, from kubernetes-sigs/kueue at v0.19.2:
- pkg/webhooks/workload_webhook.go (validateClusterNameUpdate): `status.clusterName` may be
  set only to a cluster in the *old* `status.nominatedClusterNames`.
- the Workload CRD's CEL rules (apis/kueue/v1beta2/workload_types.go): clusterName and
  nominatedClusterNames are never both set, and at most 20 names.
- pkg/controller/admissionchecks/multikueue/workload.go: the worker's Kueue admits its copy
  of the workload before the manager's MultiKueue controller sets clusterName (once it sees
  the copy Admitted, 539-540), which clears the nominations (1240-1250).
- pkg/controller/core/clusterqueue_controller.go: the worker's ClusterQueue status counts
  the copy (status.flavorsReservation, reservingWorkloads) only when the clusterqueue
  controller rewrites it, queued a batch period after the workload changed
  (NotifyWorkloadUpdate 249-268, AddAfter(constants.UpdatesBatchPeriod) 481-486, 1s in
  pkg/constants/constants.go 32-36; updateCqStatusIfChanged 513-561): so clusterName can
  come before the worker's ClusterQueue counts the copy (WorkerKueue, status_lag).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from controller.model import milli
from tests.helpers.fleet_harness import NS, K, cluster_queue
from tests.helpers.kube_emulator import Emulator, Request

WORKLOADS = f"{K}/workloads"
MAX_NOMINATIONS = 20


def workload_status_problem(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """Why Kueue's webhook or the Workload CRD refuses `new` replacing `old`, or None."""
    old_status, new_status = old.get("status") or {}, new.get("status") or {}
    cluster, nominated = new_status.get("clusterName"), new_status.get("nominatedClusterNames")
    if cluster and nominated:
        return "clusterName and nominatedClusterNames are mutually exclusive"
    if nominated and len(nominated) > MAX_NOMINATIONS:
        return f"nominatedClusterNames: at most {MAX_NOMINATIONS} items"
    old_nominated = old_status.get("nominatedClusterNames") or []
    if cluster and not old_status.get("clusterName") and cluster not in old_nominated:
        return "status.clusterName: when setting clusterName it must be one of the old nominations"
    if old_status.get("clusterName") and cluster != old_status.get("clusterName") and cluster:
        return "status.clusterName: field is immutable"
    return None


@dataclass
class KueueManager(Emulator):
    """The manager's API server with Kueue's Workload rules, and an API server's
    precondition: a merge patch that names a `metadata.resourceVersion` is refused with 409
    Conflict when the object has moved on. `before_write[path part]` runs once when a
    matching write arrives, before it is judged: the place to land a change (an eviction)
    between the dispatcher's decision and its write."""

    before_write: dict[str, Callable[[], None]] = field(default_factory=dict)
    conflicts: int = 0

    def __post_init__(self) -> None:
        self.rules[(WORKLOADS, "status")] = workload_status_problem

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.method == "PATCH":
            for part in [p for p in self.before_write if p in request.path]:
                self.before_write.pop(part)()
            text = await request.text()
            sent = ((json.loads(text) if text else {}).get("metadata") or {}).get("resourceVersion")
            parsed = self._parse(request.path)
            if sent and parsed is not None:
                group, plural, namespace, name, _ = parsed
                current = self.objects.get((group, plural), {}).get((namespace, name))
                if current is not None and current["metadata"]["resourceVersion"] != sent:
                    # Logged as the emulator logs every write, so tests see it was tried.
                    refused = Request(
                        request.method, request.path, {}, json.loads(text), request.content_type
                    )
                    self.requests.append(refused)
                    self._write_log.append(refused)
                    self.conflicts += 1
                    return self._status(
                        409,
                        "the object has been modified; please apply your changes to the "
                        "latest version and try again",
                    )
            return await super()._handle(_ReadAgain(request, text))  # type: ignore[arg-type]
        return await super()._handle(request)

    def set_cluster_name(self, name: str, cluster: str) -> None:
        """What the manager's MultiKueue controller does once a worker admitted the copy,
        held to the webhook's rule (AssertionError when Kueue would refuse it)."""
        old = self.get(WORKLOADS, name, NS)
        assert old is not None, name
        new = json.loads(json.dumps(old))
        new["status"]["clusterName"] = cluster
        new["status"].pop("nominatedClusterNames", None)
        problem = workload_status_problem(old, new)
        assert problem is None, f"Kueue refuses clusterName={cluster} on {name}: {problem}"
        self.put(WORKLOADS, new)


class _ReadAgain:
    """A request whose body was read, for the emulator to read again."""

    can_read_body = True

    def __init__(self, request: web.Request, text: str) -> None:
        self._request, self._text = request, text

    async def text(self) -> str:
        return self._text

    def __getattr__(self, name: str) -> Any:
        return getattr(self._request, name)


def worker_reserves(worker: Emulator, cpu: str, total: str, memory: str = "32Gi") -> None:
    """The worker's Kueue rewrites its ClusterQueue's status after admitting a copy: its
    reservation now totals `total` cpu (the copy included) and nothing waits in it. Only
    the status write, which real Kueue makes a batch period after the admission: for the
    admission itself, with that lag, see WorkerKueue."""
    cq = cluster_queue(cpu, memory, total)
    cq["status"]["pendingWorkloads"] = 0
    worker.put(f"{K}/clusterqueues", cq)


def _amount(milli_units: int) -> str:
    whole, part = divmod(milli_units, 1000)
    return f"{milli_units}m" if part else str(whole)


@dataclass
class WorkerKueue:
    """A worker's Kueue admitting MultiKueue's copies, as v0.19.2 does it: the copy is
    written with QuotaReserved and Admitted (the manager's MultiKueue controller may set
    clusterName from then on), and its ClusterQueue's status counts it `status_lag`
    seconds later (the clusterqueue controller's batch period, 1s; see the module's
    docstring). 0: in the same step, as the emulator did before, kinder than Kueue; None:
    only when flush() is called, for tests that must decide inside the lag."""

    worker: Emulator
    status_lag: float | None = 1.0
    _due: list[dict[str, Any]] = field(default_factory=list)
    _timers: list[asyncio.TimerHandle] = field(default_factory=list)

    def admit(self, original: dict[str, Any]) -> dict[str, Any]:
        """The worker's copy of the manager's `original` (which has quota reserved on the
        manager), admitted in the same ClusterQueue; returns it."""
        copy = json.loads(json.dumps(original))
        meta = copy["metadata"]
        copy["metadata"] = {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": {"kueue.x-k8s.io/multikueue-origin": "multikueue"},
        }
        status = copy["status"]
        status.pop("nominatedClusterNames", None)
        status.pop("clusterName", None)
        status.pop("admissionChecks", None)
        when = status["conditions"][0]["lastTransitionTime"]
        status["conditions"] = [
            {"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": when}
            for t in ("QuotaReserved", "Admitted")
        ]
        copy = self.worker.put(WORKLOADS, copy)
        if self.status_lag == 0:
            self._count(copy)
        else:
            self._due.append(copy)
            if self.status_lag is not None:
                loop = asyncio.get_running_loop()
                self._timers.append(loop.call_later(self.status_lag, self._count_due, copy))
        return copy

    def _count_due(self, copy: dict[str, Any]) -> None:
        if any(c is copy for c in self._due):
            self._due = [c for c in self._due if c is not copy]
            self._count(copy)

    def flush(self) -> None:
        """The ClusterQueue status writes that are due, made now."""
        due, self._due = self._due, []
        for copy in due:
            self._count(copy)

    def _count(self, copy: dict[str, Any]) -> None:
        admission = copy["status"]["admission"]
        cq = self.worker.get(f"{K}/clusterqueues", admission["clusterQueue"])
        assert cq is not None, admission["clusterQueue"]
        cq = json.loads(json.dumps(cq))
        status = cq.setdefault("status", {})
        reservations = {f["name"]: f for f in status.setdefault("flavorsReservation", [])}
        for assignment in admission["podSetAssignments"]:
            for resource, amount in assignment["resourceUsage"].items():
                flavor_name = assignment["flavors"][resource]
                empty = {"name": flavor_name, "resources": []}
                flavor = reservations.setdefault(flavor_name, empty)
                if flavor not in status["flavorsReservation"]:
                    status["flavorsReservation"].append(flavor)
                entry = next((r for r in flavor["resources"] if r["name"] == resource), None)
                if entry is None:
                    entry = {"name": resource, "total": "0", "borrowed": "0"}
                    flavor["resources"].append(entry)
                entry["total"] = _amount(milli(entry["total"]) + milli(amount))
        status["reservingWorkloads"] = int(status.get("reservingWorkloads") or 0) + 1
        status["admittedWorkloads"] = int(status.get("admittedWorkloads") or 0) + 1
        status["pendingWorkloads"] = 0
        self.worker.put(f"{K}/clusterqueues", cq)
