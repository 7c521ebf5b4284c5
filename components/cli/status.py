"""Is the fleet ready? What the Kueue docs have you check with `kubectl -o jsonpath`, for
every cluster at once: ClusterQueue, AdmissionCheck and MultiKueueCluster `Active`
conditions with reason and message, Kueue and the dispatcher, LocalQueues mirrored on each
worker, pending and admitted workload counts.

What is checked follows what the stack installed (`Installs`): the Kueue Deployment the
fleet applied, or for `kueue.install: existing` that the cluster serves Kueue's API; the
dispatcher's Deployment, or for `dispatcher.run: local` that a process holds its Lease."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from controller.api import CORDONED_LABEL
from controller.api.cluster_access import ApiError, Kind, Kube, connected, current_leader
from controller.api.terminal import Painter

KUEUE = "kueue.x-k8s.io"
DEPLOYMENTS = Kind("apps", "v1", "deployments", True)
CLUSTER_QUEUES = Kind(KUEUE, "v1beta2", "clusterqueues", False)
LOCAL_QUEUES = Kind(KUEUE, "v1beta2", "localqueues", True)
ADMISSION_CHECKS = Kind(KUEUE, "v1beta2", "admissionchecks", False)
MULTIKUEUE_CLUSTERS = Kind(KUEUE, "v1beta2", "multikueueclusters", False)
KUEUE_DEPLOYMENT = ("kueue-system", "kueue-controller-manager")
DISPATCHER_DEPLOYMENT = ("multikueue-fleet-system", "multikueue-fleet-dispatcher")
# controller/settings.py: the Lease every dispatcher replica, pod or local process, elects on.
DISPATCHER_LEASE = ("multikueue-fleet-system", "multikueue-fleet-dispatcher")
# MultiKueueCluster reasons no wait mends: the kubeconfig itself is refused (Kueue v0.19.2
# pkg/controller/admissionchecks/multikueue/multikueuecluster.go, loadClientConfig).
# BadKubeConfig is final too unless its Secret is only missing yet ("not found").
FINAL_REASONS = {"InsecureKubeConfig", "MultiKueueClusterProfileFeatureDisabled"}


@dataclass(frozen=True)
class Installs:
    """What the stack put on the fleet (the `installs` output of the Pulumi program), so
    status checks what is there to check."""

    kueue: Literal["managed", "existing"] = "managed"
    dispatcher: Literal["cluster", "local", "none"] = "cluster"

    @classmethod
    def from_json(cls, doc: Any) -> Installs:
        """From summary.json or the stack's outputs; absent (an older fleet): the defaults.
        ValueError names a value this code does not know."""
        if doc is None:
            return cls()
        if not isinstance(doc, Mapping):
            raise ValueError(f"installs is {type(doc).__name__}, not a mapping")
        kueue, dispatcher = doc.get("kueue", "managed"), doc.get("dispatcher", "cluster")
        if kueue not in ("managed", "existing"):
            raise ValueError(f"installs.kueue is {kueue!r}, not managed or existing")
        if dispatcher not in ("cluster", "local", "none"):
            raise ValueError(f"installs.dispatcher is {dispatcher!r}, not cluster, local or none")
        return cls(kueue, dispatcher)


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
    # Not ready, and waiting will not change that: `status --wait` stops on it.
    final: bool = False
    # A worker's MultiKueueCluster that the stack cordoned (workers[].cordoned): connected
    # or not, the dispatcher sends it nothing new.
    cordoned: bool = False


@dataclass
class FleetStatus:
    checks: list[Check] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return bool(self.checks) and all(c.ready for c in self.checks)

    @property
    def failed(self) -> list[Check]:
        """The checks that are not ready and will not become so by waiting."""
        return [c for c in self.checks if not c.ready and c.final]

    def as_json(self) -> str:
        return json.dumps(
            {"ready": self.ready, "checks": [asdict(c) for c in self.checks]}, indent=2
        )

    def table(self, paint: Painter | None = None) -> str:
        paint = paint or Painter(False)
        rows = [("CLUSTER", "KIND", "NAME", "READY", "PENDING", "ADMITTED", "REASON: MESSAGE")]
        for c in self.checks:
            detail = f"{c.reason}: {c.message}" if c.message else c.reason
            if c.cordoned:
                detail = f"Cordoned: nothing new is dispatched here; {detail}"
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
        if self.ready:
            lines.append(paint("fleet ready", "green"))
        else:
            lines.append(paint("fleet NOT ready", "red") + f": {self.not_ready_line()}")
        return "\n".join(lines)

    def not_ready_line(self) -> str:
        """Which checks are not ready, and the first one's why."""
        bad = [c for c in self.checks if not c.ready]
        if not bad:
            return "no checks ran"
        first = bad[0]
        why = f"{first.reason}: {first.message}" if first.message else first.reason
        more = f" (and {len(bad) - 1} more above)" if len(bad) > 1 else ""
        return f"{first.cluster} {first.kind} {first.name}: {why}{more}"

    def progress(self) -> str:
        """One line for a person waiting: how many checks pass, and the first that does not."""
        done = sum(1 for c in self.checks if c.ready)
        waiting = next((c for c in self.checks if not c.ready), None)
        text = f"{done} of {len(self.checks)} checks ready"
        if waiting is not None:
            reason = f"{waiting.reason}: {waiting.message}" if waiting.message else waiting.reason
            text += f"; waiting for {waiting.cluster} {waiting.kind} {waiting.name} ({reason})"
        return text


def _final(kind: Kind, reason: str, message: str) -> bool:
    if kind is not MULTIKUEUE_CLUSTERS:
        return False
    return reason in FINAL_REASONS or (reason == "BadKubeConfig" and "not found" not in message)


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
        final = not ready and _final(kind, reason, message)
        labels = (obj.get("metadata") or {}).get("labels") or {}
        cordoned = kind is MULTIKUEUE_CLUSTERS and labels.get(CORDONED_LABEL) == "true"
        checks.append(
            Check(
                cluster,
                label,
                obj["metadata"]["name"],
                ready,
                reason,
                message,
                **counts,
                final=final,
                cordoned=cordoned,
            )
        )
    return checks


async def _kueue_served(kube: Kube, cluster: str) -> Check:
    """`kueue.install: existing`: someone else's Kueue, wherever it runs; what the fleet
    needs of it is that the cluster serves Kueue's v1beta2 API (its ClusterQueues' Active
    conditions, checked beside this, say whether Kueue's controller works)."""
    try:
        await kube.list(CLUSTER_QUEUES)
    except ApiError as exc:
        if exc.status != 404:
            raise
        return Check(
            cluster,
            "Kueue",
            "kueue.x-k8s.io/v1beta2",
            False,
            "NotServed",
            "the cluster does not serve Kueue's v1beta2 API (kueue.install: existing): install "
            "Kueue v0.19.2 there, or set kueue.install: managed",
            final=True,
        )
    return Check(cluster, "Kueue", "kueue.x-k8s.io/v1beta2", True, "Served", "installed by others")


async def _dispatcher_lease(kube: Kube, cluster: str) -> Check:
    """`dispatcher.run: local`: no Deployment; a dispatcher is running when a process holds
    its Lease and renewed it within the Lease's duration (controller/leader.py)."""
    name = f"{DISPATCHER_LEASE[0]}/{DISPATCHER_LEASE[1]}"
    holder = await current_leader(kube, *DISPATCHER_LEASE)
    if holder is None:
        return Check(
            cluster,
            "Dispatcher",
            name,
            False,
            "NotRunning",
            "no process holds the Lease (none started, or it stopped): start it: python -m "
            "controller --kubeconfig <dispatcher kubeconfig> --config <settings> run "
            "(docs/dispatcher.md)",
        )
    return Check(cluster, "Dispatcher", name, True, "Leading", f"{holder} holds the Lease")


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
    installs: Installs,
    manager_queues: set[str] | None,
    timeout: float,
) -> list[Check]:
    try:
        # One cheap request first: a cluster that is not there is said in one line at once.
        await kube.probe(timeout)
        if installs.kueue == "existing":
            checks = [await _kueue_served(kube, name)]
            if not checks[0].ready:
                return checks
        else:
            checks = [await _deployment(kube, name, "Deployment", KUEUE_DEPLOYMENT)]
        checks += await _conditions(kube, name, CLUSTER_QUEUES, "ClusterQueue")
        if role == "manager":
            checks += await _conditions(kube, name, ADMISSION_CHECKS, "AdmissionCheck")
            checks += await _conditions(kube, name, MULTIKUEUE_CLUSTERS, "MultiKueueCluster")
            if installs.dispatcher == "cluster":
                checks.append(await _deployment(kube, name, "Deployment", DISPATCHER_DEPLOYMENT))
            elif installs.dispatcher == "local":
                checks.append(await _dispatcher_lease(kube, name))
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
        check = _unreachable(name, role, kube, reason)
        if exc.status in (401, 403):  # the credentials are refused: no wait mends that
            check.reason, check.final = "Refused", True
            check.message += ": the kubeconfig's credentials are refused; run `mkf up` again"
        return [check]


async def _bounded(
    name: str,
    role: str,
    kube: Kube,
    installs: Installs,
    manager_queues: set[str] | None,
    timeout: float,
) -> list[Check]:
    """A cluster's checks within `timeout`, whatever the requests' own limits are."""
    try:
        return await asyncio.wait_for(
            _cluster(name, role, kube, installs, manager_queues, timeout), timeout
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
    installs: Installs = Installs(),
    timeout: float = 5.0,
) -> FleetStatus:
    """kubeconfigs and roles ("manager" or "worker") by cluster name. Each cluster has
    `timeout` seconds to answer all its checks; one that does not is a row saying so."""
    # No retries: a status that waits out five backoffs per request is not a status.
    async with connected(kubeconfigs, attempts=1) as kubes:
        manager = next(n for n, r in roles.items() if r == "manager")
        queues = await _manager_queues(kubes[manager], timeout)
        results = await asyncio.gather(
            *(
                _bounded(name, roles[name], kube, installs, queues, timeout)
                for name, kube in kubes.items()
            )
        )
        return FleetStatus([c for checks in results for c in checks])


async def wait_ready(
    kubeconfigs: Mapping[str, Mapping[str, Any]],
    roles: Mapping[str, str],
    wait: float,
    installs: Installs = Installs(),
    interval: float = 5.0,
    timeout: float = 5.0,
    progress: Callable[[str], None] | None = None,
) -> FleetStatus:
    """Polls until the fleet is ready, a check fails in a way no wait mends, or `wait`
    seconds pass; the last status either way. After each poll that is not ready, `progress`
    gets a line saying what it waits for."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    while True:
        status = await collect(kubeconfigs, roles, installs, timeout)
        elapsed = loop.time() - started
        if status.ready or status.failed or elapsed >= wait:
            return status
        if progress is not None:
            progress(f"waiting ({elapsed:.0f}s of {wait:g}s): {status.progress()}")
        await asyncio.sleep(min(interval, max(0.0, wait - elapsed)))
