"""mkf status against a real kube-apiserver with Kueue's CRDs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from components.cli.status import (
    Installs,
    collect,
)
from tests.helpers.apiserver import missing
from tests.helpers.fleet_harness import K, active, admission_check, deployment, multikueue_cluster
from tests.helpers.kube_emulator import Emulator


@pytest.mark.skipif(bool(missing()), reason=missing() or "ok")
def test_status_against_a_real_api_server(apiserver: dict[str, Any]) -> None:
    """The manager on a real kube-apiserver (objects created and their status written the
    way Kueue would), the worker emulated."""
    from controller.kinds import Kind
    from controller.kube import Kube
    from tests.helpers.apiserver import install, wait_ready

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
                Installs(dispatcher="none"),
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


@pytest.mark.skipif(bool(missing()), reason=missing() or "ok")
def test_a_local_dispatcher_and_an_existing_kueue_on_a_real_api_server(
    apiserver: dict[str, Any],
) -> None:
    """The Lease as the dispatcher's own elector writes it on a real kube-apiserver (its
    MicroTime renewTime, as the server returns it): held means running; released (client-go's
    ReleaseOnCancel, leader.py) means none. Kueue's API served there passes the existing
    check."""
    from components.cli.status import _dispatcher_lease, _kueue_served
    from controller.kube import Kube
    from controller.leader import LeaderElector
    from tests.helpers.apiserver import install, wait_ready

    async def main() -> tuple[Any, Any, Any]:
        manager = await Kube.from_kubeconfig(apiserver, "manager")
        try:
            await wait_ready(manager)
            await install(manager)  # Kueue's CRDs and the fleet's namespace
            elector = LeaderElector(
                manager, "multikueue-fleet-system", "multikueue-fleet-dispatcher", "proc-a"
            )
            elector._set(await elector.try_acquire())  # one round of its run loop
            assert elector.is_leader
            held = await _dispatcher_lease(manager, "manager")
            await elector.release()
            released = await _dispatcher_lease(manager, "manager")
            served = await _kueue_served(manager, "manager")
        finally:
            await manager.close()
        return held, released, served

    held, released, served = asyncio.run(main())
    assert (held.ready, held.message) == (True, "proc-a holds the Lease")
    assert (released.ready, released.reason) == (False, "NotRunning")
    assert (served.ready, served.reason) == (True, "Served")
