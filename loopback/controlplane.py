"""One cluster's control plane on 127.0.0.1: etcd, kube-apiserver and
kube-controller-manager, each with its own identity, and kubeconfigs for who uses it.

The flags follow what kubeadm v1.36 gives the static pods (cmd/kubeadm/app/phases/controlplane/
manifests.go at v1.36.2), less what needs a node: RBAC authorization, client certificates
from the cluster CA, a service-account issuer and signing key, the front-proxy identity the
aggregator presents to Kueue's visibility API server. There is no kubelet: pods are created
and stay Pending, and everything the control plane decides (admission, webhooks, quota,
garbage collection, service-account tokens, namespace deletion) is real.
"""

from __future__ import annotations

import json
import ssl
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from loopback import pki
from loopback.processes import Started, free_port, log_tail, start, stop_all

ADMIN = pki.Identity("admin", "loopback-admin", ("system:masters",))
CONTROLLER_MANAGER = pki.Identity("kube-controller-manager", "system:kube-controller-manager")
# The user the API server's bootstrap RBAC binds system:kube-scheduler to (a worker with
# simulated nodes runs one: loopback/kwok.py).
SCHEDULER = pki.Identity("kube-scheduler", "system:kube-scheduler")
# Kueue's install binds its ClusterRole to this ServiceAccount (config/components/rbac at
# v0.19.2); RBAC matches a ServiceAccount subject by this user name, so a certificate with it
# has exactly the rights the pod's token would have.
KUEUE = pki.Identity(
    "kueue",
    "system:serviceaccount:kueue-system:kueue-controller-manager",
    ("system:serviceaccounts", "system:serviceaccounts:kueue-system"),
)
SERVICE_CIDR = "10.96.0.0/16"


class StartError(Exception):
    """A one-line reason a process of the fleet did not come up, with its log's end."""


@dataclass
class ControlPlane:
    name: str
    folder: Path
    binaries: dict[str, Path]
    ports: dict[str, int] = field(default_factory=dict)
    started: list[Started] = field(default_factory=list)

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    @property
    def egress_socket(self) -> Path:
        # A Unix socket's path has at most 107 bytes (sun_path); a deep state folder gets a
        # short one under /tmp, named in the egress configuration all the same.
        path = self.folder / "egress.sock"
        if len(str(path)) > 100:
            path = Path(tempfile.gettempdir()) / f"mkf-egress-{self.ports['apiserver']}.sock"
        return path

    def kubeconfig_path(self, identity: pki.Identity) -> Path:
        return self.folder / f"{identity.file}.kubeconfig"

    # --- set-up ---------------------------------------------------------------------------

    def prepare(self) -> None:
        """Keys, certificates, kubeconfigs and the egress configuration; no process yet."""
        pki_dir = self.folder / "pki"
        pki_dir.mkdir(parents=True, exist_ok=True)
        for port in ("etcd", "etcd-peer", "apiserver"):
            self.ports[port] = free_port()
        ca = pki.Authority(pki_dir, "ca", f"{self.name}-ca")
        front = pki.Authority(pki_dir, "front-proxy-ca", f"{self.name}-front-proxy-ca")
        ca.issue(
            pki_dir,
            "apiserver",
            "kube-apiserver",
            server_names=(
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
            ),
            server_ips=("127.0.0.1",),
        )
        front.issue(pki_dir, "front-proxy-client", "front-proxy-client")
        pki.service_account_key(pki_dir)
        for identity in (ADMIN, CONTROLLER_MANAGER, SCHEDULER, KUEUE):
            cert, key = ca.issue(pki_dir, identity.file, identity.user, identity.groups)
            self.kubeconfig_path(identity).write_text(
                yaml.safe_dump(self._kubeconfig(ca.pem(), cert, key, identity), sort_keys=False)
            )
            self.kubeconfig_path(identity).chmod(0o600)
        (self.folder / "egress-routes.json").write_text("{}")
        (self.folder / "egress-selector.yaml").write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "apiserver.k8s.io/v1beta1",
                    "kind": "EgressSelectorConfiguration",
                    "egressSelections": [
                        {
                            "name": "cluster",
                            "connection": {
                                "proxyProtocol": "HTTPConnect",
                                "transport": {"uds": {"udsName": str(self.egress_socket)}},
                            },
                        }
                    ],
                }
            )
        )

    def _kubeconfig(
        self, ca_pem: bytes, cert: Path, key: Path, identity: pki.Identity
    ) -> dict[str, Any]:
        import base64

        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode()

        return {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": self.name,
            "clusters": [
                {
                    "name": self.name,
                    "cluster": {"server": self.server, "certificate-authority-data": b64(ca_pem)},
                }
            ],
            "users": [
                {
                    "name": identity.user,
                    "user": {
                        "client-certificate-data": b64(cert.read_bytes()),
                        "client-key-data": b64(key.read_bytes()),
                    },
                }
            ],
            "contexts": [
                {"name": self.name, "context": {"cluster": self.name, "user": identity.user}}
            ],
        }

    # --- processes ------------------------------------------------------------------------

    def start_etcd(self) -> None:
        data = self.folder / "etcd"
        self.started.append(
            start(
                f"{self.name}/etcd",
                [
                    str(self.binaries["etcd"]),
                    "--name",
                    self.name,
                    "--data-dir",
                    str(data),
                    "--listen-client-urls",
                    f"http://127.0.0.1:{self.ports['etcd']}",
                    "--advertise-client-urls",
                    f"http://127.0.0.1:{self.ports['etcd']}",
                    "--listen-peer-urls",
                    f"http://127.0.0.1:{self.ports['etcd-peer']}",
                    "--initial-advertise-peer-urls",
                    f"http://127.0.0.1:{self.ports['etcd-peer']}",
                    "--initial-cluster",
                    f"{self.name}=http://127.0.0.1:{self.ports['etcd-peer']}",
                    # A test fleet: no fsync per write (etcd's own flag for this).
                    "--unsafe-no-fsync",
                ],
                self.folder / "etcd.log",
            )
        )

    def start_egress(self, python: str) -> None:
        self.started.append(
            start(
                f"{self.name}/egress",
                [
                    python,
                    "-m",
                    "loopback.egress",
                    str(self.folder / "egress-routes.json"),
                    str(self.egress_socket),
                ],
                self.folder / "egress.log",
                env={"PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
            )
        )

    def start_apiserver(self) -> None:
        p = self.folder / "pki"
        self.started.append(
            start(
                f"{self.name}/kube-apiserver",
                [
                    str(self.binaries["kube-apiserver"]),
                    f"--etcd-servers=http://127.0.0.1:{self.ports['etcd']}",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={self.ports['apiserver']}",
                    f"--tls-cert-file={p / 'apiserver.crt'}",
                    f"--tls-private-key-file={p / 'apiserver.key'}",
                    f"--client-ca-file={p / 'ca.crt'}",
                    "--authorization-mode=Node,RBAC",
                    "--service-account-issuer=https://kubernetes.default.svc",
                    f"--service-account-key-file={p / 'sa.pub'}",
                    f"--service-account-signing-key-file={p / 'sa.key'}",
                    f"--service-cluster-ip-range={SERVICE_CIDR}",
                    f"--requestheader-client-ca-file={p / 'front-proxy-ca.crt'}",
                    "--requestheader-allowed-names=front-proxy-client",
                    "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                    "--requestheader-group-headers=X-Remote-Group",
                    "--requestheader-username-headers=X-Remote-User",
                    f"--proxy-client-cert-file={p / 'front-proxy-client.crt'}",
                    f"--proxy-client-key-file={p / 'front-proxy-client.key'}",
                    f"--egress-selector-config-file={self.folder / 'egress-selector.yaml'}",
                    # The `kubernetes` Service would otherwise list this machine's address.
                    "--endpoint-reconciler-type=none",
                    "--profiling=false",
                ],
                self.folder / "kube-apiserver.log",
            )
        )

    def start_controller_manager(self) -> None:
        p = self.folder / "pki"
        self.started.append(
            start(
                f"{self.name}/kube-controller-manager",
                [
                    str(self.binaries["kube-controller-manager"]),
                    f"--kubeconfig={self.kubeconfig_path(CONTROLLER_MANAGER)}",
                    # No serving: nothing scrapes it, and no port to collide with.
                    "--secure-port=0",
                    "--leader-elect=false",
                    "--use-service-account-credentials=true",
                    f"--service-account-private-key-file={p / 'sa.key'}",
                    f"--root-ca-file={p / 'ca.crt'}",
                    "--profiling=false",
                ],
                self.folder / "kube-controller-manager.log",
            )
        )

    # --- readiness ------------------------------------------------------------------------

    def ssl_context(self) -> ssl.SSLContext:
        p = self.folder / "pki"
        context = ssl.create_default_context(cafile=str(p / "ca.crt"))
        context.load_cert_chain(str(p / f"{ADMIN.file}.crt"), str(p / f"{ADMIN.file}.key"))
        return context

    def get(self, path: str, timeout: float = 5) -> Any:
        request = urllib.request.Request(self.server + path)
        with urllib.request.urlopen(request, timeout=timeout, context=self.ssl_context()) as r:
            body = r.read()
        return json.loads(body) if body[:1] in (b"{", b"[") else body.decode()

    def wait_serving(self, timeout: float) -> None:
        """Until the API server's /readyz is ok: its RBAC bootstrap roles included, which
        kube-controller-manager checks once as it starts and exits without."""
        self._wait("/readyz", "kube-apiserver", timeout)

    def wait_controllers(self, timeout: float) -> None:
        """Until the controller manager has made the default namespace's ServiceAccount (its
        service-account controller runs)."""
        self._wait(
            "/api/v1/namespaces/default/serviceaccounts/default", "kube-controller-manager", timeout
        )

    def _wait(
        self, path: str, who: str, timeout: float, alive: Callable[[], None] | None = None
    ) -> None:
        """Until `path` answers; `alive` (every process of the plane by default) raises when
        what is waited for exited."""
        deadline = time.monotonic() + timeout
        while True:
            (alive or self.check_alive)()
            try:
                self.get(path)
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise StartError(
                        f"{self.name}: {who} not ready after {timeout:.0f} s; "
                        f"its log ends: {log_tail(self.folder / f'{who}.log')}"
                    ) from None
                time.sleep(0.3)

    # --- an outage ------------------------------------------------------------------------

    def _records(self, program: str) -> list[Started]:
        return [p for p in self.started if p.name == f"{self.name}/{program}"]

    def stop_apiserver(self, grace: float = 5.0) -> None:
        """Stops the kube-apiserver: SIGTERM, then SIGKILL after `grace` seconds. On SIGTERM
        a v1.36 server stops listening at once but keeps the connections it has, watches
        included, for up to a minute, so its clients would not notice the outage for that
        long. etcd keeps the cluster's state; the other processes keep running and find the
        server gone."""
        records = self._records("kube-apiserver")
        stop_all([p.as_dict() for p in records], grace)
        self.started = [p for p in self.started if p not in records]

    def restart_apiserver(self, timeout: float) -> None:
        """Starts the kube-apiserver again on the same port, with the same certificates
        and etcd (so with every object as it was), and waits until it is ready. Clients
        that knew it reconnect by themselves: its address and CA are unchanged. Go's
        listener sets SO_REUSEADDR, so the port is free again at once even with
        connections of the old process in TIME_WAIT."""
        self.stop_apiserver()
        self.start_apiserver()
        (started,) = self._records("kube-apiserver")

        def alive() -> None:
            if started.exited():
                raise StartError(
                    f"{started.name} exited after a restart; its log ends: {log_tail(started.log)}"
                )

        self._wait("/readyz", "kube-apiserver", timeout, alive)

    def check_alive(self) -> None:
        for process in self.started:
            if process.exited():
                raise StartError(f"{process.name} exited; its log ends: {log_tail(process.log)}")
