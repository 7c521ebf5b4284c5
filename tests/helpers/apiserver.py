"""A real kube-apiserver (the envtest convention): KUBEBUILDER_ASSETS names a directory
holding `kube-apiserver` and `etcd`. `missing()` says why one cannot run here;
`running_apiserver` starts one with etcd; `install` gives it the CRDs the controller reads
(Kueue's real ones from the pinned release or its Go module: tests/helpers/upstream_data.py).
No pytest here: the controller benchmark uses it too (tests/helpers/envtest.py has the fixture)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import os
import shutil
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from controller.kinds import Kind
from controller.kube import ApiError, Kube
from controller.policy_api import crd as dispatch_policy_crd
from loopback import pki
from loopback.processes import free_port
from tests.helpers.fleet_harness import NS, K
from tests.helpers.upstream_data import real_crd_documents

ASSETS = os.environ.get("KUBEBUILDER_ASSETS", "")


def missing() -> str:
    if not ASSETS:
        return (
            "KUBEBUILDER_ASSETS is not set (point it at a directory with kube-apiserver and etcd)"
        )
    absent = [b for b in ("kube-apiserver", "etcd") if not (Path(ASSETS) / b).exists()]
    if absent:
        return f"KUBEBUILDER_ASSETS={ASSETS} lacks {', '.join(absent)}"
    if not shutil.which("openssl"):
        return "openssl is needed to make the API server's service-account key"
    return ""


TOKEN = "envtest-admin-token"
CRD_API = Kind("apiextensions.k8s.io", "v1", "customresourcedefinitions", False)
NAMESPACES = Kind("", "v1", "namespaces", False)


def stop(process: subprocess.Popen, grace: float = 30.0) -> None:
    """SIGTERM, then up to `grace` seconds to finish, then SIGKILL: kube-apiserver drains
    its requests and watches on the way out and often takes longer than 10 s."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _wait_serving(
    api: subprocess.Popen, port: int, log: Path, ca_file: Path, timeout: float = 90.0
) -> None:
    """Until /readyz answers ok; says why (the end of the server's log) when the process
    exits or the time is up, instead of letting a test fail later on a refused call."""
    context = ssl.create_default_context(cafile=str(ca_file))
    request = urllib.request.Request(
        f"https://127.0.0.1:{port}/readyz", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    deadline = time.monotonic() + timeout
    while True:
        if api.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"kube-apiserver exited with {api.returncode}:\n{tail}")
        try:
            with urllib.request.urlopen(request, timeout=5, context=context) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"kube-apiserver not ready after {timeout:.0f}s:\n{tail}")
        time.sleep(0.5)


@contextlib.contextmanager
def running_apiserver(work: Path) -> Iterator[dict[str, Any]]:
    """etcd and kube-apiserver from KUBEBUILDER_ASSETS, state under `work`; yields an admin
    kubeconfig (a static token) once the server is ready, and stops both on the way out (a
    grace period, then a kill); their logs are in `work`. Shared by the tests and the
    controller benchmark."""
    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    # The server's certificate, from a CA made for this run, which the kubeconfig trusts:
    # clients verify it as they would any cluster's (no insecure-skip-tls-verify).
    ca = pki.Authority(work, "ca", "envtest-ca")
    serving_cert, serving_key = ca.issue(
        work, "apiserver", "kube-apiserver", server_names=("localhost",), server_ips=("127.0.0.1",)
    )
    key = work / "sa.key"
    subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
    (work / "tokens.csv").write_text(f"{TOKEN},admin,admin,system:masters\n")
    etcd = subprocess.Popen(
        [
            str(Path(ASSETS) / "etcd"),
            "--data-dir",
            str(work / "etcd"),
            "--listen-client-urls",
            f"http://127.0.0.1:{etcd_port}",
            "--advertise-client-urls",
            f"http://127.0.0.1:{etcd_port}",
            "--listen-peer-urls",
            f"http://127.0.0.1:{peer_port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(work / "etcd.log").open("w"),
    )
    api_log = work / "kube-apiserver.log"
    api = subprocess.Popen(
        [
            str(Path(ASSETS) / "kube-apiserver"),
            "--etcd-servers",
            f"http://127.0.0.1:{etcd_port}",
            "--bind-address",
            "127.0.0.1",
            "--secure-port",
            str(api_port),
            "--tls-cert-file",
            str(serving_cert),
            "--tls-private-key-file",
            str(serving_key),
            "--token-auth-file",
            str(work / "tokens.csv"),
            "--service-account-issuer",
            "https://kubernetes.default.svc",
            "--service-account-key-file",
            str(key),
            "--service-account-signing-key-file",
            str(key),
            "--authorization-mode",
            "RBAC",
            "--service-cluster-ip-range",
            "10.0.0.0/24",
            "--disable-admission-plugins",
            "ServiceAccount",
        ],
        stdout=subprocess.DEVNULL,
        stderr=api_log.open("w"),
    )
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "envtest",
        "clusters": [
            {
                "name": "envtest",
                "cluster": {
                    "server": f"https://127.0.0.1:{api_port}",
                    "certificate-authority-data": base64.b64encode(ca.pem()).decode(),
                },
            }
        ],
        "users": [{"name": "admin", "user": {"token": TOKEN}}],
        "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": "admin"}}],
    }
    try:
        _wait_serving(api, api_port, api_log, ca.cert_path)
        yield kubeconfig
    finally:
        for process in (api, etcd):
            stop(process)


def open_crd(
    group: str, kind: str, plural: str, scope: str, version: str | None = None
) -> dict[str, Any]:
    """A CRD that keeps every field: the fallback where Kueue's real CRDs are not on this
    machine (tests that depend on the real schema skip there), or one served at `version`."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"kind": kind, "plural": plural},
            "versions": [
                {
                    "name": version or ("v1beta2" if group == K else "v1alpha1"),
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


def real_crds() -> list[dict[str, Any]] | None:
    """Kueue's CRDs (tag v0.19.2) and the ClusterProfile CRD; None when they cannot be had.
    Without Kueue running beside this API server nothing serves the conversion webhook that
    Kueue's install gives its CRDs, so they are served without one (one stored version)."""
    docs = real_crd_documents()
    if not docs:
        return None
    found = []
    for doc in docs:
        crd = copy.deepcopy(doc)
        crd["spec"].pop("conversion", None)
        crd["metadata"].pop("annotations", None)
        found.append(crd)
    return found


def crds() -> list[dict[str, Any]]:
    """What `install` applies: the real CRDs when they are here, else open ones; and ours."""
    found = real_crds()
    if found is None:
        found = [
            open_crd(K, "Workload", "workloads", "Namespaced"),
            open_crd(K, "AdmissionCheck", "admissionchecks", "Cluster"),
            open_crd(K, "MultiKueueConfig", "multikueueconfigs", "Cluster"),
            open_crd(K, "MultiKueueCluster", "multikueueclusters", "Cluster"),
            open_crd(K, "ClusterQueue", "clusterqueues", "Cluster"),
            open_crd(K, "LocalQueue", "localqueues", "Namespaced"),
            open_crd("multicluster.x-k8s.io", "ClusterProfile", "clusterprofiles", "Namespaced"),
        ]
    return [*found, dispatch_policy_crd()]


async def wait_ready(kube: Kube, timeout: float = 60) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            await kube.version()
            return
        except Exception:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.5)


async def install(kube: Kube) -> None:
    namespaces = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        for ns in (NS, "multikueue-fleet-system", "kueue-system")
    ]
    # The server lives for a whole test module: a second test finds these already there.
    wanted = crds()
    for kind, body in [(CRD_API, c) for c in wanted] + [(NAMESPACES, n) for n in namespaces]:
        try:
            await kube.create(kind, body)
        except ApiError as exc:
            if exc.status != 409:
                raise
    # A CRD is served once its Established condition is True.
    deadline = asyncio.get_running_loop().time() + 60
    for crd in wanted:
        while True:
            got = await kube.get(CRD_API, crd["metadata"]["name"])
            conditions = (got.get("status") or {}).get("conditions") or []
            if any(
                c.get("type") == "Established" and c.get("status") == "True" for c in conditions
            ):
                break
            if asyncio.get_running_loop().time() > deadline:
                raise RuntimeError(f"CRD {crd['metadata']['name']} not established after 60s")
            await asyncio.sleep(0.2)
