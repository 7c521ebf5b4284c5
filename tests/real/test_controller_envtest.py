"""The dispatcher against a real kube-apiserver (the envtest convention): KUBEBUILDER_ASSETS
names a directory holding `kube-apiserver` and `etcd`. The manager is the real server;
workers stay emulated. Skips, saying why, when the binaries are not there."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controller.app import run
from controller.kinds import EVENTS, LEASES, SECRETS, WORKLOADS, Kind
from controller.kube import ApiError, Kube
from controller.metrics import Metrics
from tests.helpers import leader_scenarios
from tests.helpers.apiserver import install, missing, wait_ready
from tests.helpers.fleet_harness import (
    ACTIVE,
    NS,
    Fleet,
    K,
    admission_check,
    multikueue_cluster,
    multikueue_config,
    reader_secret,
    reader_token_secret,
    seed_worker,
    workload,
)

pytestmark = pytest.mark.skipif(bool(missing()), reason=missing() or "ok")


def test_dispatch_against_a_real_api_server(apiserver: dict[str, Any]) -> None:
    async def main() -> None:
        fleet = Fleet({"w1": {"cpu": "8", "reserved": "6"}, "w2": {"cpu": "8"}})
        await fleet.start_workers()
        manager = await Kube.from_kubeconfig(apiserver, "manager")
        try:
            await wait_ready(manager)
            await install(manager)
            await manager.create(Kind(K, "v1beta2", "admissionchecks", False), admission_check())
            await manager.create(
                Kind(K, "v1beta2", "multikueueconfigs", False), multikueue_config(["w1", "w2"])
            )
            clusters = Kind(K, "v1beta2", "multikueueclusters", False)
            for name, emulator in fleet.workers.items():
                await manager.create(clusters, multikueue_cluster(name))
                await manager.merge_patch(clusters, name, {"status": ACTIVE}, status=True)
                await manager.create(
                    SECRETS, reader_secret(name, emulator.kubeconfig()), "multikueue-fleet-system"
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


async def eventually(check: Any, what: str, timeout: float = 30) -> Any:
    """Polls an async check against the real server until it returns something true."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        result = await check()
        if result:
            return result
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)


def test_inventory_against_a_real_api_server(apiserver: dict[str, Any]) -> None:
    """Profiles join in order through the real server's subresources, the joined cluster is
    reached with a token Secret and gets work, a profile that goes leaves, and the
    stack-managed cluster is never touched."""
    from dataclasses import replace

    from controller.kinds import CLUSTER_PROFILES, MULTIKUEUE_CLUSTERS, MULTIKUEUE_CONFIGS
    from controller.policy_api import GROUP, PLURAL, VERSION
    from tests.helpers.kube_emulator import Emulator

    policies = Kind(GROUP, VERSION, PLURAL, False)

    async def main() -> None:
        worker = Emulator("inv-a", required_token="reader-token")
        await worker.start()
        seed_worker(worker, {"cpu": "16"})
        manager = await Kube.from_kubeconfig(apiserver, "manager")
        settings = replace(Fleet({}).settings, inventory=True, identity="inventory-test")
        try:
            await wait_ready(manager)
            await install(manager)
            check = admission_check()
            check["metadata"]["name"] = "inventory"
            check["spec"]["parameters"]["name"] = "inventory"
            await manager.create(Kind(K, "v1beta2", "admissionchecks", False), check)
            stack_cluster = multikueue_cluster("stack-w", {"app.kubernetes.io/managed-by": "x"})
            await manager.create(MULTIKUEUE_CLUSTERS, stack_cluster)
            # inv-b names a server nothing answers on (the CRD requires one).
            unreachable = "https://inv-b.invalid:6443"
            for name, zone, server in (("inv-a", "b", worker.url), ("inv-b", "a", unreachable)):
                await manager.create(
                    CLUSTER_PROFILES,
                    {
                        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
                        "kind": "ClusterProfile",
                        "metadata": {"name": name, "labels": {"zone": zone}},
                        "spec": {"clusterManager": {"name": "gke-fleet"}},
                    },
                    "kueue-system",
                )
                provider = {"name": "secretreader", "cluster": {"server": server}}
                await manager.merge_patch(
                    CLUSTER_PROFILES,
                    name,
                    {"status": {"accessProviders": [provider]}},
                    "kueue-system",
                    status=True,
                )
            await manager.create(
                policies,
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "DispatchPolicy",
                    "metadata": {"name": "inventory"},
                    "spec": {
                        "inventory": {"multiKueueConfig": "inventory", "orderBy": "label:zone"}
                    },
                },
            )
            await manager.create(
                SECRETS, reader_token_secret("inv-a", "reader-token"), "multikueue-fleet-system"
            )
            stop = asyncio.Event()
            task = asyncio.create_task(run(manager, settings, stop, Metrics(), port=0))

            async def config() -> list[str]:
                try:
                    obj = await manager.get(MULTIKUEUE_CONFIGS, "inventory")
                except ApiError:
                    return []
                return obj["spec"]["clusters"]

            assert await eventually(config, "the config") == ["inv-b", "inv-a"]  # zone order
            mkc = await manager.get(MULTIKUEUE_CLUSTERS, "inv-a")
            assert mkc["spec"]["clusterSource"] == {"clusterProfileRef": {"name": "inv-a"}}
            assert mkc["metadata"]["labels"]["zone"] == "b"
            await manager.merge_patch(MULTIKUEUE_CLUSTERS, "inv-a", {"status": ACTIVE}, status=True)

            wl = workload("inv-job", cpu="2")
            wl["status"]["admissionChecks"][0]["name"] = "inventory"
            status = wl.pop("status")
            await manager.create(WORKLOADS, wl, NS)
            await manager.merge_patch(WORKLOADS, "inv-job", {"status": status}, NS, status=True)

            async def nominated() -> list[str] | None:
                obj = await manager.get(WORKLOADS, "inv-job", NS)
                return (obj.get("status") or {}).get("nominatedClusterNames")

            assert await eventually(nominated, "a nomination") == ["inv-a"]

            async def joined() -> list[str]:
                obj = await manager.get(policies, "inventory")
                return ((obj.get("status") or {}).get("inventory") or {}).get("joined") or []

            assert await eventually(joined, "the policy status") == ["inv-b", "inv-a"]

            # inv-b leaves the inventory; nothing runs there, so it leaves at once.
            await manager.request("DELETE", CLUSTER_PROFILES.path("kueue-system", "inv-b"))

            async def left() -> bool:
                return await config() == ["inv-a"]

            await eventually(left, "inv-b to leave the config")

            async def gone() -> bool:
                try:
                    await manager.get(MULTIKUEUE_CLUSTERS, "inv-b")
                except ApiError as exc:
                    return exc.status == 404
                return False

            await eventually(gone, "inv-b's MultiKueueCluster to go")
            kept = await manager.get(MULTIKUEUE_CLUSTERS, "stack-w")
            assert kept["metadata"]["labels"] == stack_cluster["metadata"]["labels"]
            stop.set()
            await task
        finally:
            await manager.close()
            await worker.stop()

    asyncio.run(main())


def test_leader_election_against_a_real_api_server(apiserver: dict[str, Any]) -> None:
    """The scenarios of tests/emulated/test_leader.py's emulator test, judged by the real server's
    Lease storage, resourceVersions and MicroTime handling."""

    async def main() -> None:
        async def connect() -> Kube:
            return await Kube.from_kubeconfig(apiserver, "manager")

        probe = await connect()
        try:
            await wait_ready(probe)
        finally:
            await probe.close()
        await leader_scenarios.stalled_leader(connect)
        await leader_scenarios.skewed_holder(connect)

    asyncio.run(main())
