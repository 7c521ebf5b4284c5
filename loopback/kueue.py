"""Kueue v0.19.2 on a loopback control plane: the project's own install objects for the
cluster (the release manifest with the Configuration and gate flags the project renders,
components/objects/kueue_install.py) applied as they are, except the Deployment, whose
manager runs here as a process with that same Configuration and those same flags.

A process outside a pod needs a few fields of the Configuration changed; only these are,
and each change is listed (`config_changes`) and written beside the configuration file:
- ports (webhook, metrics, health probes, visibility server): N Kueues share one machine, so
  each listens on 127.0.0.1 on ports of its own; the Services keep their ports and the
  egress proxy (loopback/egress.py) joins them to these;
- webhook.certDir: the default /tmp/k8s-webhook-server/serving-certs would be shared by every
  Kueue on the machine; internal certificate management stays on, so Kueue makes and injects
  its certificates itself, for its Service's DNS name, exactly as in a cluster. In a pod the
  kubelet mounts the Secret Kueue writes them to at that folder (config/components/manager at
  v0.19.2) and Kueue waits until the files appear (open-policy-agent/cert-controller
  ensureCertsMounted); here the launcher copies the Secret's files there, as the kubelet would;
- leaderElection.resourceNamespace: in a pod controller-runtime reads the namespace from the
  service-account mount (pkg/leaderelection at v0.24), which a process does not have.
The visibility server keeps its self-signed certificate in /visibility, a fixed path (an
emptyDir in the pod; pkg/visibility/server.go at v0.19.2): `ensure_visibility_certs` makes it
once for every Kueue on the machine, and `down` removes it when `up` made it.
Everything else is exactly as rendered, so Kueue's strict decoder, its gate checks and its
webhooks judge what the project would deploy.
"""

from __future__ import annotations

import base64
import copy
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from components.objects.kueue_config import CONFIG_KEY, CONFIG_MAP
from components.objects.kueue_install import KUEUE_CONTAINER, KUEUE_DEPLOYMENT
from loopback import pki
from loopback.controlplane import KUEUE, ControlPlane, StartError
from loopback.processes import free_port, log_tail, start, stop_all

NAMESPACE = "kueue-system"
# The container ports of Kueue's manager in its install (config/components/manager and
# config/default at v0.19.2): the Services point at these by number or name.
STAND_IN_ADDRESS = "192.0.2.10"
CONTAINER_PORTS = {"webhook": 9443, "metrics": 8443, "health": 8081, "visibility": 8082}


def split_install(
    objects: list[dict[str, Any]],
) -> tuple[dict[str, Any], list[str], list[dict[str, Any]]]:
    """The rendered Configuration, the manager's arguments, and every object but the
    Deployment (to apply as it is)."""
    config: dict[str, Any] | None = None
    args: list[str] | None = None
    rest: list[dict[str, Any]] = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        if obj["kind"] == "Deployment" and meta.get("name") == KUEUE_DEPLOYMENT:
            pod = obj["spec"]["template"]["spec"]
            container = next(c for c in pod["containers"] if c["name"] == KUEUE_CONTAINER)
            args = list(container.get("args") or [])
            continue
        if obj["kind"] == "ConfigMap" and meta.get("name") == CONFIG_MAP:
            config = yaml.safe_load(obj["data"][CONFIG_KEY])
        rest.append(obj)
    if config is None or args is None:
        raise StartError("the Kueue install objects lack its ConfigMap or Deployment")
    return config, args, rest


def process_config(
    rendered: dict[str, Any], ports: dict[str, int], cert_dir: Path
) -> tuple[dict[str, Any], list[str]]:
    """The rendered Configuration with only the fields a process needs changed, and a line
    per change."""
    config = copy.deepcopy(rendered)
    changes: list[str] = []

    def put(path: str, value: Any) -> None:
        *parents, leaf = path.split(".")
        node = config
        for part in parents:
            node = node.setdefault(part, {})
        old = node.get(leaf, "<default>")
        node[leaf] = value
        changes.append(f"{path}: {old} -> {value}")

    put("webhook.port", ports["webhook"])
    put("webhook.host", "127.0.0.1")
    put("webhook.certDir", str(cert_dir))
    put("metrics.bindAddress", f"127.0.0.1:{ports['metrics']}")
    put("health.healthProbeBindAddress", f"127.0.0.1:{ports['health']}")
    put("visibilityServer.bindAddress", "127.0.0.1")
    put("visibilityServer.bindPort", ports["visibility"])
    if not (config.get("leaderElection") or {}).get("resourceNamespace"):
        put("leaderElection.resourceNamespace", config.get("namespace") or NAMESPACE)
    return config, changes


def process_args(args: list[str], config_file: Path, kubeconfig: Path) -> list[str]:
    """The Deployment's arguments with --config pointing at the process's file, and the
    kubeconfig a pod would not need: given as the flag, not $KUBECONFIG, because Kueue's
    visibility server takes its delegated authentication from the flag and otherwise from
    the in-cluster service account (pkg/visibility/server.go at v0.19.2)."""
    args = [f"--config={config_file}" if a.startswith("--config=") else a for a in args]
    return [*args, f"--kubeconfig={kubeconfig}"]


def service_routes(
    client: Any, namespace: str, by_container: dict[int, int], named: dict[str, int]
) -> dict[str, int]:
    """Each Service of `namespace`, by ClusterIP:port, to the local port its target
    container port (`by_container`; a named target port through `named`) listens on."""
    found: dict[str, int] = {}
    for service in client.list("v1", "Service", namespace):
        ip = service["spec"].get("clusterIP")
        for port in service["spec"].get("ports") or []:
            target = port.get("targetPort", port["port"])
            number = named.get(target) if isinstance(target, str) else target
            if ip and ip != "None" and number in by_container:
                found[f"{ip}:{port['port']}"] = by_container[number]
    return found


def add_egress_routes(plane: ControlPlane, routes: dict[str, int]) -> None:
    """Adds routes to the plane's egress routes file (read by the proxy at each connection):
    several processes serve Services on one cluster, each adds its own."""
    path = plane.folder / "egress-routes.json"
    known = json.loads(path.read_text() or "{}") if path.is_file() else {}
    path.write_text(json.dumps({**known, **routes}))


def publish_endpoints(client: Any, namespace: str) -> None:
    """What the endpoint-slice controller publishes once a pod behind them is Ready: an
    EndpointSlice per Service of the namespace, so that the aggregator finds an API it serves
    available (kube-aggregator's availability controller checks the Service's endpoints
    before it calls it, k8s.io/kube-aggregator v0.36). The address is never dialled, as the
    API server calls the Service's ClusterIP through the egress proxy; it is from TEST-NET-1
    (RFC 5737), as Endpoints refuse loopback addresses."""
    for service in client.list("v1", "Service", namespace):
        name = service["metadata"]["name"]
        ports = service["spec"].get("ports") or []
        client.apply(
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": f"{name}-loopback",
                    "namespace": namespace,
                    "labels": {
                        "kubernetes.io/service-name": name,
                        "endpointslice.kubernetes.io/managed-by": "loopback-launcher",
                    },
                },
                "addressType": "IPv4",
                "endpoints": [{"addresses": [STAND_IN_ADDRESS], "conditions": {"ready": True}}],
                "ports": [
                    {"name": port.get("name"), "port": port.get("targetPort"), "protocol": "TCP"}
                    for port in ports
                    if isinstance(port.get("targetPort"), int)
                ]
                or [
                    {"name": port.get("name"), "port": port["port"], "protocol": "TCP"}
                    for port in ports
                ],
            }
        )


def mount_secret(client: Any, name: str, namespace: str, folder: Path) -> bool:
    """What the kubelet does for a secret volume: the Secret's keys as files in `folder`,
    once its controller has filled it with a serving certificate; True when they are there."""
    secret = client.get("v1", "Secret", name, namespace)
    data = (secret or {}).get("data") or {}
    if not {"tls.crt", "tls.key"} <= set(data):
        return False
    folder.mkdir(parents=True, exist_ok=True)
    for key, value in data.items():
        target = folder / key
        content = base64.b64decode(value)
        if not target.is_file() or target.read_bytes() != content:
            target.write_bytes(content)
            target.chmod(0o600)
    return True


def wait_webhook_ready(
    plane: ControlPlane,
    client: Any,
    what: str,
    health_port: int,
    mount_certs: Callable[[Any], object],
    probe_object: dict[str, Any],
    log: Path,
    timeout: float,
) -> None:
    """Until a manager's readiness probe answers and the API server has called its webhook
    for a dry-run create of `probe_object`: its certificates made, mounted (`mount_certs`
    copies its Secret into its folder, as the kubelet mounts it), injected and served.
    Stops at once, with its log, if any process of `plane` exited."""
    deadline = time.monotonic() + timeout
    probe = f"http://127.0.0.1:{health_port}/readyz"
    last = ""
    while True:
        plane.check_alive()
        mount_certs(client)
        try:
            with urllib.request.urlopen(probe, timeout=3) as answer:
                ready = answer.status == 200
        except (OSError, urllib.error.HTTPError) as exc:
            ready, last = False, f"readyz: {exc}"
        if ready:
            try:
                client.dry_run_create(probe_object)
                return
            except Exception as exc:  # noqa: BLE001 - any refusal means not ready yet
                last = f"webhook: {exc}"
        if time.monotonic() > deadline:
            raise StartError(
                f"{plane.name}: {what} not ready after {timeout:.0f} s ({last}); "
                f"its log ends: {log_tail(log)}"
            )
        time.sleep(0.5)


# Seconds Kueue gets after SIGTERM. Kueue v0.19.2 built here, once its controllers run, sits
# out SIGTERM silently (seen: 25 s and more, its API server up); its pod has the default
# 30 s grace (no terminationGracePeriodSeconds in the release manifest), after which the
# kubelet kills it. Nothing here judges its shutdown: waiting longer is time lost.
KUEUE_GRACE = 3.0


def install_order(obj: dict[str, Any]) -> int:
    """Namespaces and CRDs first (what the rest lives in), webhook configurations last."""
    kind = obj["kind"]
    if kind in ("Namespace", "CustomResourceDefinition"):
        return 0
    if kind.endswith("WebhookConfiguration") or kind == "APIService":
        return 2
    return 1


def apply_in_order(client: Any, objects: Sequence[dict[str, Any]]) -> None:
    """Server-side apply in `install_order`, every CRD Established before anything else."""
    ordered = sorted(objects, key=install_order)  # stable: CRDs keep the order given
    first = [o for o in ordered if install_order(o) == 0]
    for obj in first:
        client.apply(obj)
    # Waited for once all are sent, not one by one: the server establishes them meanwhile,
    # and each wait reads a CRD (some of a megabyte) back.
    for obj in first:
        if obj["kind"] == "CustomResourceDefinition":
            client.wait_established(obj["metadata"]["name"])
    for obj in ordered[len(first) :]:
        client.apply(obj)


class Kueue:
    def __init__(self, plane: ControlPlane, objects: list[dict[str, Any]], binary: Path) -> None:
        self.plane = plane
        self.binary = binary
        self.rendered, self.args, self.install = split_install(objects)
        self.ports = {name: free_port() for name in CONTAINER_PORTS}
        self.config, self.changes = process_config(
            self.rendered, self.ports, plane.folder / "kueue-certs"
        )
        self.config_file = plane.folder / "kueue-config.yaml"

    def apply_install(self, client: Any, crds: Sequence[dict[str, Any]] = ()) -> None:
        """Server-side apply of the install objects, in order, as the launcher; `crds` first
        (what Kueue needs served before it starts: the ClusterProfile CRD in that mode, the
        frameworks' kinds it watches)."""
        apply_in_order(client, [*crds, *self.install])

    def routes(self, client: Any) -> dict[str, int]:
        """Each Service of Kueue's namespace, by ClusterIP:port, to the local port of the
        container port it targets."""
        by_container = {v: self.ports[k] for k, v in CONTAINER_PORTS.items()}
        named = {"webhook-server": 9443, "https": 8443, "visibility": 8082}
        return service_routes(client, NAMESPACE, by_container, named)

    def publish_endpoints(self, client: Any) -> None:
        publish_endpoints(client, NAMESPACE)

    def start(self, client: Any) -> None:
        self.config_file.write_text(yaml.safe_dump(self.config, sort_keys=False))
        (self.plane.folder / "kueue-config-changes.txt").write_text("\n".join(self.changes) + "\n")
        add_egress_routes(self.plane, self.routes(client))
        self.publish_endpoints(client)
        self.plane.started.append(
            start(
                f"{self.plane.name}/kueue",
                [
                    str(self.binary),
                    *process_args(self.args, self.config_file, self.plane.kubeconfig_path(KUEUE)),
                ],
                self.plane.folder / "kueue.log",
                grace=KUEUE_GRACE,
            )
        )

    def running(self) -> bool:
        return any(
            not p.exited() for p in self.plane.started if p.name == f"{self.plane.name}/kueue"
        )

    def relaunch(self, client: Any) -> None:
        """What the kubelet does for Kueue's pod (restartPolicy Always) once its manager
        exited, e.g. on losing its leader lease while its API server was away (Kueue v0.19.2
        exits then: "Could not run manager", cmd/kueue/main.go): the same binary,
        Configuration, ports and certificates, started again."""
        records = [p for p in self.plane.started if p.name == f"{self.plane.name}/kueue"]
        stop_all([p.as_dict() for p in records])
        self.plane.started = [p for p in self.plane.started if p not in records]
        self.start(client)

    def mount_cert_secret(self, client: Any) -> None:
        name = (self.config.get("internalCertManagement") or {}).get("webhookSecretName")
        if name:
            mount_secret(client, name, NAMESPACE, Path(self.config["webhook"]["certDir"]))

    def wait_ready(
        self, client: Any, timeout: float, mount: Callable[[Any], object] | None = None
    ) -> None:
        """Until Kueue's readiness probe answers and the API server has called its webhook
        for a (dry-run) ResourceFlavor: certificates made, injected and served. `mount`
        mounts them (default: this Kueue's; a fleet's mounts every Kueue's, see
        loopback/fleet.py)."""
        wait_webhook_ready(
            self.plane,
            client,
            "Kueue",
            self.ports["health"],
            mount or self.mount_cert_secret,
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ResourceFlavor",
                "metadata": {"name": "loopback-probe"},
            },
            self.plane.folder / "kueue.log",
            timeout,
        )


VISIBILITY_CERT_DIR = Path("/visibility")


def ensure_visibility_certs(folder: Path = VISIBILITY_CERT_DIR) -> bool:
    """The self-signed pair Kueue's visibility server would write at start
    (k8s.io/apiserver SecureServingOptions.MaybeDefaultWithSelfSignedCerts: apiserver.crt
    and apiserver.key, used as they are when present), made once so that N Kueues starting
    together never read a half-written file; True when this call made the folder."""
    made = not folder.exists()
    try:
        folder.mkdir(mode=0o755, exist_ok=True)
        if not (folder / "apiserver.crt").is_file():
            ca = pki.Authority(folder, "visibility-ca", "kueue-visibility-ca")
            ca.issue(
                folder,
                "apiserver",
                "localhost",
                server_names=("localhost",),
                server_ips=("127.0.0.1",),
            )
    except OSError as exc:
        raise StartError(
            f"cannot write {folder} ({exc.strerror}): Kueue v0.19.2's visibility server keeps "
            f"its certificate there; create it once with `sudo install -d -m 1777 {folder}`"
        ) from None
    return made
