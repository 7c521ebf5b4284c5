"""`status` against emulated clusters seeded with healthy and unhealthy objects: the table,
the JSON and the exit codes."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.cli.fleet_dir import FleetDirError, read_stack_outputs
from components.cli.status import (
    MULTIKUEUE_CLUSTERS,
    Installs,
    _final,
    collect,
    kubeconfig_tls_problem,
    wait_ready,
)
from tests.helpers.fleet_harness import NS, K, active, cluster_queue, deployment
from tests.helpers.kube_emulator import Emulator
from tests.helpers.stack_texts import cli

ROOT = Path(__file__).resolve().parents[2]


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
            assert out.splitlines()[-1].startswith("fleet NOT ready: manager MultiKueueCluster")
            assert "BadKubeConfig" in out
            code, _ = await status("--wait", "1")
            assert code == 1
        finally:
            await manager.stop()
            await worker.stop()

    asyncio.run(main())


def lease(holder: str, renewed_ago: float, duration: int = 15) -> dict[str, Any]:
    stamp = (datetime.now(UTC) - timedelta(seconds=renewed_ago)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {
        "metadata": {"name": "multikueue-fleet-dispatcher", "namespace": "multikueue-fleet-system"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration, "renewTime": stamp},
    }


async def loopback_like() -> tuple[Emulator, Emulator]:
    """A fleet as the loopback stack makes it: Kueue installed by others (no Deployment of
    the fleet's), the dispatcher a local process (no Deployment, only its Lease)."""
    manager, worker = await fleet()
    for e in (manager, worker):
        e.objects.pop(("apps", "deployments"), None)
    return manager, worker


def test_existing_kueue_and_a_local_dispatcher_can_be_ready() -> None:
    """`kueue.install: existing` and `dispatcher.run: local` (the loopback stack): no
    Deployment is expected; a dispatcher holding its Lease is."""
    existing_local = Installs(kueue="existing", dispatcher="local")

    async def main() -> None:
        manager, worker = await loopback_like()
        try:
            manager.put("coordination.k8s.io/leases", lease("dispatcher-local", 2))
            ready = await collect(*configs(manager, worker), existing_local)
            managed = await collect(*configs(manager, worker))  # what status did before
            manager.put("coordination.k8s.io/leases", lease("dispatcher-local", 60))
            stale = await collect(*configs(manager, worker), existing_local)
        finally:
            await manager.stop()
            await worker.stop()
        assert ready.ready, ready.table()
        rows = {(c.cluster, c.kind): c for c in ready.checks}
        assert rows[("manager", "Kueue")].reason == "Served"
        assert rows[("manager", "Dispatcher")].message == "dispatcher-local holds the Lease"
        assert not any(c.kind == "Deployment" for c in ready.checks)
        assert not managed.ready  # the Deployments the fleet did not install are missing
        assert not stale.ready
        (dispatcher,) = [c for c in stale.checks if c.kind == "Dispatcher"]
        assert dispatcher.reason == "NotRunning"
        assert "python -m controller" in dispatcher.message
        assert (
            stale.table()
            .splitlines()[-1]
            .startswith(
                "fleet NOT ready: manager Dispatcher multikueue-fleet-system/multikueue-fleet-"
            )
        )

    asyncio.run(main())


def test_existing_kueue_not_served_is_said_and_final() -> None:
    async def main() -> None:
        manager, worker = await loopback_like()
        worker.fail("GET", "clusterqueues", 404, times=5)
        try:
            status = await collect(*configs(manager, worker), Installs(kueue="existing"))
        finally:
            await manager.stop()
            await worker.stop()
        (kueue,) = [c for c in status.checks if c.cluster == "worker1"]
        assert (kueue.kind, kueue.reason, kueue.final) == ("Kueue", "NotServed", True)
        assert "install Kueue v0.19.2 there" in kueue.message

    asyncio.run(main())


def test_wait_stops_on_a_failure_no_wait_mends() -> None:
    async def main() -> tuple[Any, float]:
        manager, worker = await fleet()
        manager.put(
            f"{K}/multikueueclusters",
            active("worker1", False, "InsecureKubeConfig", "insecure TLS verification"),
        )
        try:
            loop = asyncio.get_running_loop()
            started = loop.time()
            status = await wait_ready(*configs(manager, worker), 60, interval=0.2)
            return status, loop.time() - started
        finally:
            await manager.stop()
            await worker.stop()

    status, took = asyncio.run(main())
    assert took < 10 and not status.ready
    assert [(c.kind, c.reason) for c in status.failed] == [
        ("MultiKueueCluster", "InsecureKubeConfig")
    ]


def test_a_secret_not_there_yet_is_waited_for() -> None:
    """BadKubeConfig because the kubeconfig's Secret is not created yet mends itself."""
    assert not _final(MULTIKUEUE_CLUSTERS, "BadKubeConfig", 'secrets "worker1" not found')
    assert _final(MULTIKUEUE_CLUSTERS, "BadKubeConfig", "tokenFile is not allowed")


def test_status_of_a_plain_pulumi_up_reads_the_stack_outputs(tmp_path: Path) -> None:
    """`status --stack NAME`: the outputs `pulumi stack output --json --show-secrets` prints
    (here from a runner that answers as the CLI does), nothing written to disk."""

    async def main() -> Any:
        manager, worker = await loopback_like()
        manager.put("coordination.k8s.io/leases", lease("dispatcher-local", 1))
        outputs = {
            "fleet": "loopback",
            "clusters": [
                {"name": "manager", "role": "manager"},
                {"name": "worker1", "role": "worker"},
            ],
            "kubeconfigs": {
                "manager": yaml.safe_dump(manager.kubeconfig()),
                "worker1": yaml.safe_dump(worker.kubeconfig()),
            },
            "installs": {"kueue": "existing", "dispatcher": "local"},
        }
        calls: list[list[str]] = []

        def run(command: list[str], **_: Any) -> Any:
            calls.append(command)
            return subprocess.CompletedProcess(command, 0, json.dumps(outputs), "")

        try:
            fleet_read = read_stack_outputs("loopback", tmp_path, run, lambda _: "/bin/pulumi")
            status = await collect(fleet_read.kubeconfigs, fleet_read.roles, fleet_read.installs)
        finally:
            await manager.stop()
            await worker.stop()
        assert calls == [
            ["pulumi", "stack", "output", "--json", "--show-secrets", "--stack", "loopback"]
        ]
        assert list(tmp_path.iterdir()) == []
        return status

    assert asyncio.run(main()).ready

    def failing(command: list[str], **_: Any) -> Any:
        said = "error: no stack named 'nope' found\n"
        return subprocess.CompletedProcess(command, 255, "", said)

    with pytest.raises(FleetDirError, match=r"no stack named 'nope' found.*pulumi stack ls"):
        read_stack_outputs("nope", tmp_path, failing, lambda _: "/bin/pulumi")

    def empty(command: list[str], **_: Any) -> Any:
        return subprocess.CompletedProcess(command, 0, "{}", "")

    with pytest.raises(FleetDirError, match="run `pulumi up --stack new` first"):
        read_stack_outputs("new", tmp_path, empty, lambda _: "/bin/pulumi")


def test_status_stack_and_installs_errors_are_one_line(tmp_path: Path) -> None:
    no_cli = cli("status", "--stack", "loopback", env={"PATH": str(tmp_path)})
    assert no_cli.returncode == 2, no_cli.stderr
    assert no_cli.stderr.count("\n") == 1 and "Pulumi CLI, which is not on PATH" in no_cli.stderr
    (tmp_path / "m.yaml").write_text(yaml.safe_dump({"clusters": []}))
    (tmp_path / "summary.json").write_text(
        json.dumps(
            {
                "clusters": [{"name": "m", "role": "manager", "kubeconfig": "m.yaml"}],
                "installs": {"kueue": "helm"},
            }
        )
    )
    bad = cli("status", "--dir", str(tmp_path))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "installs.kueue is 'helm', not managed or existing" in bad.stderr


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


def test_a_stack_output_kubeconfig_whose_ca_is_not_a_certificate_is_named(tmp_path: Path) -> None:
    """`status --stack`: the same check on the kubeconfigs the stack's outputs hold, which
    have no file to name: the stack's output and the cluster."""
    kubeconfig = _with_ca(Emulator("m").kubeconfig(), base64.b64encode(b"no cert").decode())
    outputs = {
        "clusters": [{"name": "manager", "role": "manager"}],
        "kubeconfigs": {"manager": yaml.safe_dump(kubeconfig)},
    }

    def run(command: list[str], **_: Any) -> Any:
        return subprocess.CompletedProcess(command, 0, json.dumps(outputs), "")

    with pytest.raises(FleetDirError) as raised:
        read_stack_outputs("loopback", tmp_path, run, lambda _: "/bin/pulumi")
    said = str(raised.value)
    assert said.startswith("stack loopback's output kubeconfigs.manager (cluster manager): ")
    assert "decodes to no PEM certificate" in said and "pulumi up --stack loopback" in said
