"""The dispatcher against a real kube-apiserver (the envtest convention): KUBEBUILDER_ASSETS
names a directory holding `kube-apiserver` and `etcd`. The manager is the real server;
workers stay emulated. Skips, saying why, when the binaries are not there."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controller.app import run
from controller.kube import EVENTS, LEASES, SECRETS, WORKLOADS, Kind, Kube
from controller.metrics import Metrics
from tests.envtest import install, missing, wait_ready
from tests.fleet_harness import (
    ACTIVE,
    NS,
    Fleet,
    K,
    admission_check,
    multikueue_cluster,
    multikueue_config,
    reader_secret,
    workload,
)

pytestmark = pytest.mark.skipif(bool(missing()), reason=missing() or "ok")


def test_dispatch_against_a_real_api_server(apiserver: dict[str, Any]) -> None:
    async def main() -> None:
        fleet = Fleet({"w1": {"cpu": "8", "reserved": "6"}, "w2": {"cpu": "8"}})
        for emulator in fleet.workers.values():
            await emulator.start()
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
