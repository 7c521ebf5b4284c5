"""The dispatcher against a real kube-apiserver (the envtest convention): KUBEBUILDER_ASSETS
names a directory holding `kube-apiserver` and `etcd`. The manager is the real server;
workers stay emulated. Skips, saying why, when the binaries are not there."""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.app import run
from controller.kube import EVENTS, LEASES, SECRETS, WORKLOADS, Kind, Kube
from controller.metrics import Metrics
from controller.policy_api import crd as dispatch_policy_crd
from tests.fleet_harness import NS, Fleet, K, workload

ASSETS = os.environ.get("KUBEBUILDER_ASSETS", "")


def _missing() -> str:
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


pytestmark = pytest.mark.skipif(bool(_missing()), reason=_missing() or "ok")
TOKEN = "envtest-admin-token"
CRD_API = Kind("apiextensions.k8s.io", "v1", "customresourcedefinitions", False)
NAMESPACES = Kind("", "v1", "namespaces", False)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    work = tmp_path_factory.mktemp("envtest")
    etcd_port, peer_port, api_port = _port(), _port(), _port()
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
        stderr=subprocess.DEVNULL,
    )
    api = subprocess.Popen(
        [
            str(Path(ASSETS) / "kube-apiserver"),
            "--etcd-servers",
            f"http://127.0.0.1:{etcd_port}",
            "--bind-address",
            "127.0.0.1",
            "--secure-port",
            str(api_port),
            "--cert-dir",
            str(work / "certs"),
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
        stderr=subprocess.DEVNULL,
    )
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "envtest",
        # The server's certificate is self-made for this test run only.
        "clusters": [
            {
                "name": "envtest",
                "cluster": {
                    "server": f"https://127.0.0.1:{api_port}",
                    "insecure-skip-tls-verify": True,
                },
            }
        ],
        "users": [{"name": "admin", "user": {"token": TOKEN}}],
        "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": "admin"}}],
    }
    try:
        yield kubeconfig
    finally:
        for process in (api, etcd):
            process.terminate()
            process.wait(10)


def _open_crd(group: str, kind: str, plural: str, scope: str) -> dict[str, Any]:
    """A CRD that keeps every field: Kueue's own CRDs are fetched at deploy time and are
    not available offline, and the dispatcher only needs their shape."""
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
                    "name": "v1beta2" if group == K else "v1alpha1",
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


async def _wait_ready(kube: Kube, timeout: float = 60) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            await kube.version()
            return
        except Exception:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.5)


async def _install(kube: Kube) -> None:
    crds = [
        _open_crd(K, "Workload", "workloads", "Namespaced"),
        _open_crd(K, "AdmissionCheck", "admissionchecks", "Cluster"),
        _open_crd(K, "MultiKueueConfig", "multikueueconfigs", "Cluster"),
        _open_crd(K, "MultiKueueCluster", "multikueueclusters", "Cluster"),
        _open_crd("multicluster.x-k8s.io", "ClusterProfile", "clusterprofiles", "Namespaced"),
        dispatch_policy_crd(),
    ]
    for body in crds:
        await kube.create(CRD_API, body)
    for ns in (NS, "multikueue-fleet-system", "kueue-system"):
        await kube.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        )
    await asyncio.sleep(2)  # CRDs become served


def test_dispatch_against_a_real_api_server(apiserver: dict[str, Any]) -> None:
    async def main() -> None:
        fleet = Fleet({"w1": {"cpu": "8", "reserved": "6"}, "w2": {"cpu": "8"}})
        for emulator in fleet.workers.values():
            await emulator.start()
        manager = await Kube.from_kubeconfig(apiserver, "manager")
        try:
            await _wait_ready(manager)
            await _install(manager)
            await manager.create(
                Kind(K, "v1beta2", "admissionchecks", False),
                {
                    "apiVersion": f"{K}/v1beta2",
                    "kind": "AdmissionCheck",
                    "metadata": {"name": "multikueue"},
                    "spec": {
                        "controllerName": "kueue.x-k8s.io/multikueue",
                        "parameters": {
                            "apiGroup": K,
                            "kind": "MultiKueueConfig",
                            "name": "multikueue",
                        },
                    },
                },
            )
            await manager.create(
                Kind(K, "v1beta2", "multikueueconfigs", False),
                {
                    "apiVersion": f"{K}/v1beta2",
                    "kind": "MultiKueueConfig",
                    "metadata": {"name": "multikueue"},
                    "spec": {"clusters": ["w1", "w2"]},
                },
            )
            clusters = Kind(K, "v1beta2", "multikueueclusters", False)
            for name, emulator in fleet.workers.items():
                await manager.create(
                    clusters,
                    {
                        "apiVersion": f"{K}/v1beta2",
                        "kind": "MultiKueueCluster",
                        "metadata": {"name": name},
                        "spec": {},
                    },
                )
                await manager.merge_patch(
                    clusters,
                    name,
                    {
                        "status": {
                            "conditions": [
                                {
                                    "type": "Active",
                                    "status": "True",
                                    "reason": "Active",
                                    "message": "ok",
                                    "lastTransitionTime": "2026-11-22T00:00:00Z",
                                }
                            ]
                        }
                    },
                    status=True,
                )
                text = yaml.safe_dump(emulator.kubeconfig())
                await manager.create(
                    SECRETS,
                    {
                        "apiVersion": "v1",
                        "kind": "Secret",
                        "metadata": {
                            "name": f"{name}-reader",
                            "labels": {"multikueue-fleet/worker": name},
                        },
                        "data": {"kubeconfig": base64.b64encode(text.encode()).decode()},
                    },
                    "multikueue-fleet-system",
                )
            wl = workload("real", cpu="2")
            status = wl.pop("status")
            await manager.create(WORKLOADS, wl, NS)
            await manager.merge_patch(WORKLOADS, "real", {"status": status}, NS, status=True)
            stop = asyncio.Event()
            task = asyncio.create_task(run(manager, fleet.settings, stop, Metrics(), port=0))

            async def nominated() -> list[str] | None:
                obj = await manager.get(WORKLOADS, "real", NS)
                return (obj.get("status") or {}).get("nominatedClusterNames")

            deadline = asyncio.get_running_loop().time() + 30
            while not await nominated():
                assert asyncio.get_running_loop().time() < deadline, "no nomination"
                await asyncio.sleep(0.2)
            assert await nominated() == ["w2"]
            deadline = asyncio.get_running_loop().time() + 10
            while True:
                events, _ = await manager.list(EVENTS, NS)
                if any(e.get("reason") == "Nominated" for e in events):
                    break
                assert asyncio.get_running_loop().time() < deadline, f"no event: {events}"
                await asyncio.sleep(0.2)
            lease = await manager.get(
                LEASES, "multikueue-fleet-dispatcher", "multikueue-fleet-system"
            )
            assert lease["spec"]["holderIdentity"] == fleet.settings.identity
            stop.set()
            await task
        finally:
            await manager.close()
            for emulator in fleet.workers.values():
                await emulator.stop()

    asyncio.run(main())
