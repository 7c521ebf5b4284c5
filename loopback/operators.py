"""Framework controllers on a loopback control plane, as processes: the LeaderWorkerSet
controller v0.9.0.

Each is built from its Go module at the version the project installs (tools/go.mod pins the
same versions Kueue v0.19.2 requires) and installed from that module's own
`config/default`, built with kustomize as each project's `make artifacts` does for its
release manifests.yaml. Everything is applied as it is but the Deployment, whose manager runs
here as a process with the Configuration from the install's ConfigMap, changed only where a
process outside a pod needs it (listed in `<name>-config-changes.txt`, as for Kueue):
- webhook, metrics and health ports on 127.0.0.1 (many controllers share one machine); the
  Services keep theirs and the egress proxy joins them;
- webhook.certDir, one per process, filled from the certificate Secret the controller writes
  (internal certificate management stays on), as the kubelet's secret volume would be;
- leaderElection.resourceNamespace, which a pod reads from its service-account mount.
It reaches its API server with a token of its own ServiceAccount (the TokenRequest API, what
the kubelet projects into its pod), so it has exactly the rights its install grants.

JobSet v0.12.0 builds from its module the same way but is not run: its certificate rotator
waits for the serving certificate in a fixed folder, whatever webhook.certDir says
(pkg/util/cert/cert.go at v0.12.0: `certDir = "/tmp/k8s-webhook-server/serving-certs"`),
where its pod mounts the Secret. Processes of several clusters on one machine would share
that folder, each cluster with its own CA, and it is also controller-runtime's default that
other webhook servers on the machine may use. Without it, nothing reconciles a JobSet here:
its child Jobs are never made, and Kueue admits and MultiKueue dispatches it all the same.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.model.frameworks import FRAMEWORKS
from components.objects.manifests import documents
from components.upstream import gomodule, toolchain
from loopback.controlplane import ADMIN, ControlPlane, StartError
from loopback.dispatcher import TOKEN_SECONDS, service_account_kubeconfig
from loopback.kueue import (
    add_egress_routes,
    apply_in_order,
    mount_secret,
    publish_endpoints,
    service_routes,
    wait_webhook_ready,
)
from loopback.processes import free_port, start, stop_all

# The container ports of each manager (config/components/manager at both tags).
CONTAINER_PORTS = {"webhook": 9443, "metrics": 8443, "health": 8081}
NAMED_PORTS = {"webhook-server": 9443, "https": 8443, "metrics": 8443}


@dataclass(frozen=True)
class Operator:
    framework: str  # its key in components.model.frameworks.FRAMEWORKS
    tool: str  # its binary in components.upstream.toolchain.TOOLS
    namespace: str
    # A kind its webhooks admit, created with dryRun to know they are served.
    probe: dict[str, Any]

    @property
    def module(self) -> str:
        return gomodule.FRAMEWORK_MODULES[self.framework]

    @property
    def version(self) -> str:
        return FRAMEWORKS[self.framework].bundles[0].version


OPERATORS: dict[str, Operator] = {
    "leaderworkerset": Operator(
        "leaderworkerset",
        "lws",
        "lws-system",
        {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": {"name": "loopback-probe", "namespace": "default"},
            "spec": {
                "leaderWorkerTemplate": {
                    "workerTemplate": {"spec": {"containers": [{"name": "c", "image": "i"}]}}
                }
            },
        },
    ),
}


def install_manifest(operator: Operator) -> list[dict[str, Any]]:
    """`kustomize build config/default` of the operator's module at the pinned version, on a
    copy (the module cache is read-only)."""
    kustomize = toolchain.build(["kustomize"], log=lambda _line: None)["kustomize"]
    module = gomodule.module_dir(operator.module, operator.version)
    with tempfile.TemporaryDirectory(prefix=f"{operator.tool}-config-") as tmp:
        config = Path(tmp) / "config"
        shutil.copytree(module / "config", config)
        for path in config.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        result = subprocess.run(
            [str(kustomize), "build", str(config / "default")],
            capture_output=True,
            text=True,
            check=False,
        )
    if result.returncode != 0:
        raise StartError(
            f"kustomize build failed on {operator.module}@{operator.version}'s config: "
            + " | ".join(result.stderr.strip().splitlines()[-3:])
        )
    return documents(result.stdout)


class OperatorProcess:
    """One framework controller on one control plane."""

    def __init__(self, plane: ControlPlane, operator: Operator, objects: list[dict[str, Any]]):
        self.plane = plane
        self.operator = operator
        deployment = next(o for o in objects if o["kind"] == "Deployment")
        pod = deployment["spec"]["template"]["spec"]
        self.service_account = pod["serviceAccountName"]
        self.args = list(pod["containers"][0].get("args") or [])
        config_map = next(
            v["configMap"]["name"] for v in pod.get("volumes") or [] if "configMap" in v
        )
        found = next(
            o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == config_map
        )
        self.rendered = yaml.safe_load(next(iter(found["data"].values())))
        self.install = [o for o in objects if o is not deployment]
        self.ports = {name: free_port() for name in CONTAINER_PORTS}
        self.name = operator.tool
        self.cert_dir = plane.folder / f"{self.name}-certs"
        self.config, self.changes = self._process_config()
        self.config_file = plane.folder / f"{self.name}-config.yaml"
        self.kubeconfig = plane.folder / f"{self.name}.kubeconfig"
        self.log = plane.folder / f"{self.name}.log"

    def _process_config(self) -> tuple[dict[str, Any], list[str]]:
        config = yaml.safe_load(yaml.safe_dump(self.rendered))
        changes: list[str] = []

        def put(path: str, value: Any) -> None:
            *parents, leaf = path.split(".")
            node = config
            for part in parents:
                node = node.setdefault(part, {})
            changes.append(f"{path}: {node.get(leaf, '<default>')} -> {value}")
            node[leaf] = value

        put("webhook.port", self.ports["webhook"])
        put("webhook.host", "127.0.0.1")
        put("webhook.certDir", str(self.cert_dir))
        put("metrics.bindAddress", f"127.0.0.1:{self.ports['metrics']}")
        put("health.healthProbeBindAddress", f"127.0.0.1:{self.ports['health']}")
        put("leaderElection.resourceNamespace", self.operator.namespace)
        return config, changes

    @property
    def secret_name(self) -> str:
        return str(
            (self.config.get("internalCertManagement") or {}).get("webhookSecretName")
            or f"{self.name}-webhook-server-cert"
        )

    def apply_install(self, client: Any) -> None:
        apply_in_order(client, self.install)

    def start(self, client: Any) -> None:
        self.config_file.write_text(yaml.safe_dump(self.config, sort_keys=False))
        (self.plane.folder / f"{self.name}-config-changes.txt").write_text(
            "\n".join(self.changes) + "\n"
        )
        token = client.service_account_token(
            self.service_account, self.operator.namespace, TOKEN_SECONDS
        )
        admin = yaml.safe_load(self.plane.kubeconfig_path(ADMIN).read_text())
        self.kubeconfig.write_text(
            yaml.safe_dump(service_account_kubeconfig(admin, token, self.service_account))
        )
        self.kubeconfig.chmod(0o600)
        by_container = {v: self.ports[k] for k, v in CONTAINER_PORTS.items()}
        add_egress_routes(
            self.plane, service_routes(client, self.operator.namespace, by_container, NAMED_PORTS)
        )
        publish_endpoints(client, self.operator.namespace)
        args = [a for a in self.args if not a.startswith("--config=")]
        binary = toolchain.require([self.operator.tool])[self.operator.tool]
        self.plane.started.append(
            start(
                f"{self.plane.name}/{self.name}",
                [str(binary), f"--config={self.config_file}", *args],
                self.log,
                env={"KUBECONFIG": str(self.kubeconfig)},
            )
        )

    def running(self) -> bool:
        return any(
            not p.exited() for p in self.plane.started if p.name == f"{self.plane.name}/{self.name}"
        )

    def relaunch(self, client: Any) -> None:
        """As the kubelet restarts its pod: same configuration, ports and certificates."""
        records = [p for p in self.plane.started if p.name == f"{self.plane.name}/{self.name}"]
        stop_all([p.as_dict() for p in records])
        self.plane.started = [p for p in self.plane.started if p not in records]
        self.start(client)

    def mount_cert_secret(self, client: Any) -> None:
        mount_secret(client, self.secret_name, self.operator.namespace, self.cert_dir)

    def wait_ready(
        self, client: Any, timeout: float, mount: Callable[[Any], object] | None = None
    ) -> None:
        """Until its readiness probe answers and the API server has called its webhook for
        a (dry-run) object of its kind; `mount` mounts its certificates (default: its own)."""
        wait_webhook_ready(
            self.plane,
            client,
            self.name,
            self.ports["health"],
            mount or self.mount_cert_secret,
            self.operator.probe,
            self.log,
            timeout,
        )
