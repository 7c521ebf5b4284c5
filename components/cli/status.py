"""Is the fleet ready? What the Kueue docs have you check with `kubectl -o jsonpath`, for
every cluster at once: ClusterQueue, AdmissionCheck and MultiKueueCluster `Active`
conditions with reason and message, the Kueue and dispatcher Deployments, LocalQueues
mirrored on each worker, pending and admitted workload counts."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from controller.kube import ApiError, Kind, Kube
from controller.terminal import Painter

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

    def table(self, paint: Painter | None = None) -> str:
        paint = paint or Painter(False)
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
        lines = []
        for r in rows:
            cells = [r[i].ljust(widths[i]) for i in range(6)]
            if r[3].strip() in ("yes", "NO"):  # colour after padding: escapes take no width
                cells[3] = paint(cells[3], "green" if r[3] == "yes" else "red")
            lines.append(("  ".join(cells) + "  " + r[6]).rstrip())
        lines.append(
            paint("fleet ready", "green") if self.ready else paint("fleet NOT ready", "red")
        )
        return "\n".join(lines)

    def progress(self) -> str:
        """One line for a person waiting: how many checks pass, and the first that does not."""
        done = sum(1 for c in self.checks if c.ready)
        waiting = next((c for c in self.checks if not c.ready), None)
        text = f"{done} of {len(self.checks)} checks ready"
        if waiting is not None:
            reason = f"{waiting.reason}: {waiting.message}" if waiting.message else waiting.reason
            text += f"; waiting for {waiting.cluster} {waiting.kind} {waiting.name} ({reason})"
        return text


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


def kubeconfig_tls_problem(kubeconfig: Mapping[str, Any]) -> str | None:
    """Why the client could not even be built from this kubeconfig: CA data that is not
    base64 of a PEM certificate (the TLS library refuses it with an SSLError that names
    neither the cluster nor the file). None when it is usable."""
    current = kubeconfig.get("current-context")
    contexts = {c.get("name"): c.get("context") or {} for c in kubeconfig.get("contexts") or []}
    cluster_name = (contexts.get(current) or {}).get("cluster")
    clusters = {c.get("name"): c.get("cluster") or {} for c in kubeconfig.get("clusters") or []}
    data = (clusters.get(cluster_name) or {}).get("certificate-authority-data")
    if not data:
        return None
    try:
        pem = base64.b64decode(str(data), validate=True).decode("ascii")
    except (ValueError, UnicodeDecodeError):
        return "its certificate-authority-data is not base64 text of a PEM certificate"
    if "-----BEGIN CERTIFICATE-----" not in pem:
        return "its certificate-authority-data decodes to no PEM certificate"
    try:
        ssl.create_default_context(cadata=pem)
    except ssl.SSLError as exc:
        reason = exc.reason or str(exc)
        return f"its certificate-authority-data holds no usable certificate ({reason})"
    return None


def _unreachable(name: str, role: str, kube: Kube, reason: str) -> Check:
    who = "the manager" if role == "manager" else f"worker {name}"
    url = kube.api.configuration.host
    return Check(
        name, "Cluster", "api", False, "Unreachable", f"cannot reach {who} at {url}: {reason}"
    )


async def _cluster(
    name: str,
    role: str,
    kube: Kube,
    dispatcher: bool,
    manager_queues: set[str] | None,
    timeout: float,
) -> list[Check]:
    try:
        # One cheap request first: a cluster that is not there is said in one line at once.
        await kube.probe(timeout)
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
        # Nothing answered (status 0), or the API server answered with an error of its own.
        reason = exc.message if exc.status == 0 else f"it answered {exc.status}: {exc.message}"
        return [_unreachable(name, role, kube, reason)]


async def _bounded(
    name: str,
    role: str,
    kube: Kube,
    dispatcher: bool,
    manager_queues: set[str] | None,
    timeout: float,
) -> list[Check]:
    """A cluster's checks within `timeout`, whatever the requests' own limits are."""
    try:
        return await asyncio.wait_for(
            _cluster(name, role, kube, dispatcher, manager_queues, timeout), timeout
        )
    except TimeoutError:
        return [_unreachable(name, role, kube, f"no answer within {timeout:g}s")]


async def _manager_queues(kube: Kube, timeout: float) -> set[str] | None:
    try:
        items, _ = await asyncio.wait_for(kube.list(LOCAL_QUEUES), timeout)
    except (ApiError, TimeoutError):
        return None
    return {f"{q['metadata']['namespace']}/{q['metadata']['name']}" for q in items}


async def collect(
    kubeconfigs: Mapping[str, Mapping[str, Any]],
    roles: Mapping[str, str],
    dispatcher: bool = True,
    timeout: float = 5.0,
) -> FleetStatus:
    """kubeconfigs and roles ("manager" or "worker") by cluster name. Each cluster has
    `timeout` seconds to answer all its checks; one that does not is a row saying so."""
    kubes = {name: await Kube.from_kubeconfig(dict(cfg), name) for name, cfg in kubeconfigs.items()}
    for kube in kubes.values():
        # No retries: a status that waits out five backoffs per request is not a status.
        kube.attempts = 1
    try:
        manager = next(n for n, r in roles.items() if r == "manager")
        queues = await _manager_queues(kubes[manager], timeout)
        results = await asyncio.gather(
            *(
                _bounded(name, roles[name], kube, dispatcher, queues, timeout)
                for name, kube in kubes.items()
            )
        )
        return FleetStatus([c for checks in results for c in checks])
    finally:
        for kube in kubes.values():
            await kube.close()


async def wait_ready(
    kubeconfigs: Mapping[str, Mapping[str, Any]],
    roles: Mapping[str, str],
    wait: float,
    dispatcher: bool = True,
    interval: float = 5.0,
    timeout: float = 5.0,
    progress: Callable[[str], None] | None = None,
) -> FleetStatus:
    """Polls until the fleet is ready or `wait` seconds pass; the last status either way.
    After each poll that is not ready, `progress` gets a line saying what it waits for."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    while True:
        status = await collect(kubeconfigs, roles, dispatcher, timeout)
        elapsed = loop.time() - started
        if status.ready or elapsed >= wait:
            return status
        if progress is not None:
            progress(f"waiting ({elapsed:.0f}s of {wait:g}s): {status.progress()}")
        await asyncio.sleep(min(interval, max(0.0, wait - elapsed)))
