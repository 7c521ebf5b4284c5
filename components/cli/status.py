"""Is the fleet ready? What the Kueue docs have you check with `kubectl -o jsonpath`, for
every cluster at once: ClusterQueue, AdmissionCheck and MultiKueueCluster `Active`
conditions with reason and message, the Kueue and dispatcher Deployments, LocalQueues
mirrored on each worker, pending and admitted workload counts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from controller.kube import ApiError, Kind, Kube

KUEUE = "kueue.x-k8s.io"
DEPLOYMENTS = Kind("apps", "v1", "deployments", True)
CLUSTER_QUEUES = Kind(KUEUE, "v1beta2", "clusterqueues", False)
LOCAL_QUEUES = Kind(KUEUE, "v1beta2", "localqueues", True)
ADMISSION_CHECKS = Kind(KUEUE, "v1beta2", "admissionchecks", False)
MULTIKUEUE_CLUSTERS = Kind(KUEUE, "v1beta2", "multikueueclusters", False)
KUEUE_DEPLOYMENT = ("kueue-system", "kueue-controller-manager")
DISPATCHER_DEPLOYMENT = ("multikueue-fleet-system", "multikueue-fleet-dispatcher")


@dataclass
class Check:
    cluster: str
    kind: str
    name: str
    ready: bool
    reason: str = ""
    message: str = ""
    pending: int | None = None
    admitted: int | None = None


@dataclass
class FleetStatus:
    checks: list[Check] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return bool(self.checks) and all(c.ready for c in self.checks)

    def as_json(self) -> str:
        return json.dumps(
            {"ready": self.ready, "checks": [asdict(c) for c in self.checks]}, indent=2
        )

    def table(self) -> str:
        rows = [("CLUSTER", "KIND", "NAME", "READY", "PENDING", "ADMITTED", "REASON: MESSAGE")]
        for c in self.checks:
            detail = f"{c.reason}: {c.message}" if c.message else c.reason
            rows.append(
                (
                    c.cluster,
                    c.kind,
                    c.name,
                    "yes" if c.ready else "NO",
                    "" if c.pending is None else str(c.pending),
                    "" if c.admitted is None else str(c.admitted),
                    detail,
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(6)]
        lines = ["  ".join(r[i].ljust(widths[i]) for i in range(6)) + "  " + r[6] for r in rows]
        lines.append("fleet ready" if self.ready else "fleet NOT ready")
        return "\n".join(line.rstrip() for line in lines)


def _active(obj: Mapping[str, Any]) -> tuple[bool, str, str]:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Active":
            return cond.get("status") == "True", cond.get("reason", ""), cond.get("message", "")
    return False, "NoCondition", "no Active condition yet"


async def _deployment(kube: Kube, cluster: str, kind: str, where: tuple[str, str]) -> Check:
    try:
        obj = await kube.get(DEPLOYMENTS, where[1], where[0])
    except ApiError as exc:
        return Check(
            cluster,
            kind,
            f"{where[0]}/{where[1]}",
            False,
            "NotFound" if exc.status == 404 else "Error",
            str(exc),
        )
    status = obj.get("status") or {}
    want = (obj.get("spec") or {}).get("replicas", 1)
    have = status.get("availableReplicas") or 0
    return Check(
        cluster,
        kind,
        f"{where[0]}/{where[1]}",
        have >= want and want > 0,
        "Available" if have >= want else "Unavailable",
        f"{have}/{want} replicas available",
    )


async def _conditions(kube: Kube, cluster: str, kind: Kind, label: str) -> list[Check]:
    items, _ = await kube.list(kind)
    checks = []
    for obj in items:
        ready, reason, message = _active(obj)
        status = obj.get("status") or {}
        counts = {}
        if kind is CLUSTER_QUEUES:
            counts = {
                "pending": int(status.get("pendingWorkloads") or 0),
                "admitted": int(status.get("admittedWorkloads") or 0),
            }
        checks.append(
            Check(cluster, label, obj["metadata"]["name"], ready, reason, message, **counts)
        )
    return checks


async def _cluster(
    name: str, role: str, kube: Kube, dispatcher: bool, manager_queues: set[str] | None
) -> list[Check]:
    try:
        checks = [await _deployment(kube, name, "Deployment", KUEUE_DEPLOYMENT)]
        checks += await _conditions(kube, name, CLUSTER_QUEUES, "ClusterQueue")
        if role == "manager":
            checks += await _conditions(kube, name, ADMISSION_CHECKS, "AdmissionCheck")
            checks += await _conditions(kube, name, MULTIKUEUE_CLUSTERS, "MultiKueueCluster")
            if dispatcher:
                checks.append(await _deployment(kube, name, "Deployment", DISPATCHER_DEPLOYMENT))
        elif manager_queues is not None:
            items, _ = await kube.list(LOCAL_QUEUES)
            here = {f"{q['metadata']['namespace']}/{q['metadata']['name']}" for q in items}
            missing = sorted(manager_queues - here)
            checks.append(
                Check(
                    name,
                    "LocalQueues",
                    "mirrored",
                    not missing,
                    "Mirrored" if not missing else "Missing",
                    ", ".join(missing)
                    if missing
                    else f"all {len(manager_queues)} of the manager's",
                )
            )
        return checks
    except ApiError as exc:
        return [Check(name, "Cluster", "api", False, "Unreachable", str(exc))]


async def collect(
    kubeconfigs: Mapping[str, Mapping[str, Any]], roles: Mapping[str, str], dispatcher: bool = True
) -> FleetStatus:
    """kubeconfigs and roles ("manager" or "worker") by cluster name."""
    kubes = {name: await Kube.from_kubeconfig(dict(cfg), name) for name, cfg in kubeconfigs.items()}
    try:
        manager = next(n for n, r in roles.items() if r == "manager")
        try:
            items, _ = await kubes[manager].list(LOCAL_QUEUES)
            queues: set[str] | None = {
                f"{q['metadata']['namespace']}/{q['metadata']['name']}" for q in items
            }
        except ApiError:
            queues = None
        results = await asyncio.gather(
            *(_cluster(name, roles[name], kube, dispatcher, queues) for name, kube in kubes.items())
        )
        return FleetStatus([c for checks in results for c in checks])
    finally:
        for kube in kubes.values():
            await kube.close()


async def wait_ready(
    kubeconfigs: Mapping[str, Mapping[str, Any]],
    roles: Mapping[str, str],
    timeout: float,
    dispatcher: bool = True,
    interval: float = 5.0,
) -> FleetStatus:
    """Polls until the fleet is ready or `timeout` passes; the last status either way."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        status = await collect(kubeconfigs, roles, dispatcher)
        if status.ready or asyncio.get_running_loop().time() >= deadline:
            return status
        await asyncio.sleep(interval)
