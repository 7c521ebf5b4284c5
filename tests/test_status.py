"""`status` against emulated clusters seeded with healthy and unhealthy objects: the table,
the JSON and the exit codes."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.cli.status import collect, kubeconfig_tls_problem
from tests.apiserver import missing
from tests.fleet_harness import NS, K, admission_check, cluster_queue, multikueue_cluster
from tests.kube_emulator import Emulator

ROOT = Path(__file__).resolve().parent.parent


def deployment(namespace: str, name: str, available: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": 1},
        "status": {"availableReplicas": available},
    }


def active(kind_name: str, ok: bool, reason: str = "Active", message: str = "") -> dict:
    return {
        "metadata": {"name": kind_name},
        "status": {
            "conditions": [
                {
                    "type": "Active",
                    "status": "True" if ok else "False",
                    "reason": reason,
                    "message": message,
                    "lastTransitionTime": "2026-11-22T00:00:00Z",
                }
            ]
        },
    }


async def fleet(healthy: bool = True) -> tuple[Emulator, Emulator]:
    manager, worker = Emulator("manager"), Emulator("worker1")
    for e in (manager, worker):
        await e.start()
        e.put("apps/deployments", deployment("kueue-system", "kueue-controller-manager", 1))
        cq = cluster_queue("8", "32Gi")
        cq["status"]["pendingWorkloads"], cq["status"]["admittedWorkloads"] = 3, 5
        e.put(f"{K}/clusterqueues", cq)
        e.put(
            f"{K}/localqueues",
            {
                "metadata": {"name": "user-queue", "namespace": NS},
                "spec": {"clusterQueue": "cluster-queue"},
            },
        )
    manager.put(
        "apps/deployments", deployment("multikueue-fleet-system", "multikueue-fleet-dispatcher", 1)
    )
    manager.put(f"{K}/admissionchecks", active("multikueue", True))
    manager.put(
        f"{K}/multikueueclusters",
        active(
            "worker1",
            healthy,
            "Active" if healthy else "ClientConnectionFailed",
            "" if healthy else "the server has asked for the client to provide credentials",
        ),
    )
    if not healthy:
        manager.put(
            f"{K}/localqueues",
            {
                "metadata": {"name": "gpu", "namespace": NS},
                "spec": {"clusterQueue": "cluster-queue"},
            },
        )
        worker.put("apps/deployments", deployment("kueue-system", "kueue-controller-manager", 0))
    return manager, worker


def configs(manager: Emulator, worker: Emulator) -> tuple[dict, dict]:
    return (
        {"manager": manager.kubeconfig(), "worker1": worker.kubeconfig()},
        {"manager": "manager", "worker1": "worker"},
    )


def test_a_ready_fleet() -> None:
    async def main() -> None:
        manager, worker = await fleet()
        try:
            status = await collect(*configs(manager, worker))
        finally:
            await manager.stop()
            await worker.stop()
        assert status.ready
        kinds = {(c.cluster, c.kind, c.name) for c in status.checks}
        assert ("manager", "MultiKueueCluster", "worker1") in kinds
        assert (
            "manager",
            "Deployment",
            "multikueue-fleet-system/multikueue-fleet-dispatcher",
        ) in kinds
        assert ("worker1", "LocalQueues", "mirrored") in kinds
        table = status.table()
        assert table.splitlines()[-1] == "fleet ready"
        row = next(line for line in table.splitlines() if "ClusterQueue" in line)
        assert row.split()[3:6] == ["yes", "3", "5"]

    asyncio.run(main())


def test_what_is_wrong_is_named() -> None:
    async def main() -> None:
        manager, worker = await fleet(healthy=False)
        try:
            status = await collect(*configs(manager, worker))
        finally:
            await manager.stop()
            await worker.stop()
        assert not status.ready
        bad = {(c.cluster, c.kind, c.name): c for c in status.checks if not c.ready}
        mkc = bad[("manager", "MultiKueueCluster", "worker1")]
        assert mkc.reason == "ClientConnectionFailed"
        assert "provide credentials" in mkc.message
        assert bad[("worker1", "LocalQueues", "mirrored")].message == f"{NS}/gpu"
        kueue = bad[("worker1", "Deployment", "kueue-system/kueue-controller-manager")]
        assert kueue.message == "0/1 replicas available"
        assert json.loads(status.as_json())["ready"] is False

    asyncio.run(main())


def test_an_unreachable_cluster() -> None:
    async def main() -> None:
        manager, worker = await fleet()
        worker.down = True
        try:
            status = await collect(*configs(manager, worker))
        finally:
            await manager.stop()
            await worker.stop()
        (check,) = [c for c in status.checks if c.cluster == "worker1"]
        assert (check.ready, check.reason) == (False, "Unreachable")

    asyncio.run(main())


def test_command_line_exit_codes_and_json(tmp_path: Path) -> None:
    async def main() -> None:
        manager, worker = await fleet()
        try:
            (tmp_path / "kubeconfigs").mkdir()
            clusters = []
            for name, e, role in (("manager", manager, "manager"), ("worker1", worker, "worker")):
                path = tmp_path / "kubeconfigs" / f"{name}.yaml"
                path.write_text(yaml.safe_dump(e.kubeconfig()))
                clusters.append(
                    {"name": name, "role": role, "kubeconfig": f"kubeconfigs/{name}.yaml"}
                )
            (tmp_path / "summary.json").write_text(json.dumps({"clusters": clusters}))

            async def status(*args: str) -> tuple[int, str]:
                process = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "components",
                    "status",
                    "--dir",
                    str(tmp_path),
                    *args,
                    cwd=ROOT,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                )
                out, _ = await process.communicate()
                return process.returncode or 0, out.decode()

            code, out = await status("--json")
            assert code == 0 and json.loads(out)["ready"] is True
            manager.put(f"{K}/multikueueclusters", active("worker1", False, "BadKubeConfig"))
            code, out = await status()
            assert code == 1
            assert out.splitlines()[-1] == "fleet NOT ready"
            assert "BadKubeConfig" in out
            code, _ = await status("--wait", "1")
            assert code == 1
        finally:
            await manager.stop()
            await worker.stop()

    asyncio.run(main())


@pytest.mark.skipif(bool(missing()), reason=missing() or "ok")
def test_status_against_a_real_api_server(apiserver: dict[str, Any]) -> None:
    """The manager on a real kube-apiserver (objects created and their status written the
    way Kueue would), the worker emulated."""
    from controller.kube import Kind, Kube
    from tests.apiserver import install, wait_ready

    deployments = Kind("apps", "v1", "deployments", True)
    checks = Kind(K, "v1beta2", "admissionchecks", False)
    clusters = Kind(K, "v1beta2", "multikueueclusters", False)

    async def main() -> None:
        worker = Emulator("worker1")
        await worker.start()
        worker.put("apps/deployments", deployment("kueue-system", "kueue-controller-manager", 1))
        manager = await Kube.from_kubeconfig(apiserver, "manager")
        try:
            await wait_ready(manager)
            await install(manager)
            pod = {
                "metadata": {"labels": {"app": "kueue"}},
                "spec": {
                    "containers": [
                        {"name": "manager", "image": "registry.k8s.io/kueue/kueue:v0.19.2"}
                    ]
                },
            }
            await manager.create(
                deployments,
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": {"name": "kueue-controller-manager", "namespace": "kueue-system"},
                    "spec": {
                        "replicas": 1,
                        "selector": {"matchLabels": {"app": "kueue"}},
                        "template": pod,
                    },
                },
                "kueue-system",
            )
            await manager.merge_patch(
                deployments,
                "kueue-controller-manager",
                # Valid for apps/v1 status validation: available <= ready <= replicas.
                {
                    "status": {
                        "replicas": 1,
                        "updatedReplicas": 1,
                        "readyReplicas": 1,
                        "availableReplicas": 1,
                    }
                },
                "kueue-system",
                status=True,
            )
            # Specs the real CRDs accept (Kueue's, from the pinned release or its Go module).
            for kind, spec_of, body in (
                (checks, admission_check(), active("multikueue", True)),
                (
                    clusters,
                    multikueue_cluster("worker1"),
                    active("worker1", False, "BadKubeConfig", "no token"),
                ),
            ):
                status = body.pop("status")
                await manager.create(kind, {**spec_of, **body, "spec": spec_of["spec"]})
                await manager.merge_patch(
                    kind, body["metadata"]["name"], {"status": status}, status=True
                )
            result = await collect(
                {"manager": apiserver, "worker1": worker.kubeconfig()},
                {"manager": "manager", "worker1": "worker"},
                dispatcher=False,
            )
        finally:
            await manager.close()
            await worker.stop()
        assert not result.ready
        (mkc,) = [c for c in result.checks if c.kind == "MultiKueueCluster"]
        assert (mkc.ready, mkc.reason, mkc.message) == (False, "BadKubeConfig", "no token")
        kueue = next(c for c in result.checks if c.cluster == "manager" and c.kind == "Deployment")
        assert kueue.ready

    asyncio.run(main())


def _with_ca(kubeconfig: dict[str, Any], ca_data: str) -> dict[str, Any]:
    for entry in kubeconfig["clusters"]:
        entry["cluster"] = {**entry["cluster"], "certificate-authority-data": ca_data}
        entry["cluster"].pop("insecure-skip-tls-verify", None)
    return kubeconfig


def _self_signed_ca_data(tmp_path: Path) -> str:
    key, cert = tmp_path / "ca.key", tmp_path / "ca.crt"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=test-ca", "-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return base64.b64encode(cert.read_bytes()).decode()


@pytest.mark.parametrize(
    ("ca_data", "said"),
    [
        (base64.b64encode(b"not a certificate").decode(), "decodes to no PEM certificate"),
        ("%%% not base64 %%%", "is not base64 text of a PEM certificate"),
        (
            base64.b64encode(
                b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
            ).decode(),
            "holds no usable certificate",
        ),
    ],
)
def test_a_kubeconfig_whose_ca_is_not_a_certificate_is_named(
    tmp_path: Path, ca_data: str, said: str
) -> None:
    """It was an SSLError naming neither the cluster nor the file."""
    kubeconfig = _with_ca(Emulator("m").kubeconfig(), ca_data)
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(kubeconfig))
    clusters = [{"name": "manager", "role": "manager", "kubeconfig": "m.yaml"}]
    (tmp_path / "summary.json").write_text(json.dumps({"clusters": clusters}))
    result = subprocess.run(
        [sys.executable, "-m", "components", "status", "--dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert f"{tmp_path / 'm.yaml'} (cluster manager): its certificate-authority-data" in line
    assert said in line


def test_a_kubeconfig_with_a_real_ca_is_used(tmp_path: Path) -> None:
    """A real certificate (and a kubeconfig without CA data) passes the check."""
    kubeconfig = _with_ca(Emulator("m").kubeconfig(), _self_signed_ca_data(tmp_path))
    assert kubeconfig_tls_problem(kubeconfig) is None
    assert kubeconfig_tls_problem(Emulator("m").kubeconfig()) is None
