"""Teardown of a fleet on existing/cloud clusters with work running, against the emulated
API server: the fleet's ClusterQueues are held (stopPolicy), the wait ends when the work
holding quota ends, and past the bound the error names what still holds quota."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from components.cli.teardown import DrainTimeout, stop_and_drain
from components.objects.labels import FLEET_LABEL
from tests.helpers.fleet_harness import workload as admitted_workload
from tests.helpers.kube_emulator import Emulator

K = "kueue.x-k8s.io"


def queue(name: str, fleet: str) -> dict[str, Any]:
    # Kueue's finalizer stays while workloads hold quota: deleting it now would hang.
    return {
        "metadata": {
            "name": name,
            "labels": {FLEET_LABEL: fleet},
            "finalizers": ["kueue.x-k8s.io/resource-in-use"],
        },
        "spec": {},
    }


def workload(
    name: str, cq: str, finished: bool = False, active: bool | None = None
) -> dict[str, Any]:
    """A Workload admitted to `cq` (QuotaReserved and Admitted: under Hold, Kueue releases
    a reservation that is not admitted yet), as Kueue's real CRD accepts it."""
    obj = admitted_workload(name, namespace="team", cluster="worker1", state="Ready")
    obj["status"]["admission"]["clusterQueue"] = cq
    reserved = obj["status"]["conditions"][0]
    obj["status"]["conditions"].append({**reserved, "type": "Admitted", "reason": "Admitted"})
    if finished:
        obj["status"]["conditions"].append(
            {**reserved, "type": "Finished", "reason": "Succeeded", "status": "True"}
        )
    if active is not None:
        obj["spec"]["active"] = active
    return obj


async def kueue(e: Emulator) -> None:
    """What Kueue's ClusterQueue controller does with a stopPolicy: Active=False, reason
    Stopped, for the generation its cache saw (kueue v0.19.2
    pkg/controller/core/clusterqueue_controller.go), a little later."""
    while True:
        for q in e.items(f"{K}/clusterqueues"):
            generation = q["metadata"]["generation"]
            conditions = (q.get("status") or {}).get("conditions") or []
            stopped = q["spec"].get("stopPolicy", "None") != "None"
            if stopped and not any(c["observedGeneration"] == generation for c in conditions):
                q["status"] = {
                    **(q.get("status") or {}),
                    "conditions": [
                        {
                            "type": "Active",
                            "status": "False",
                            "reason": "Stopped",
                            "message": "Can't admit new workloads: is stopped.",
                            "lastTransitionTime": "2026-11-23T10:00:00Z",
                            "observedGeneration": generation,
                        }
                    ],
                }
                e.put(f"{K}/clusterqueues", q)
        await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def running(e: Emulator, with_kueue: bool = True) -> AsyncIterator[Emulator]:
    task = asyncio.create_task(kueue(e)) if with_kueue else None
    try:
        yield e
    finally:
        if task:
            task.cancel()
        await e.stop()


async def cluster(name: str = "worker1") -> Emulator:
    e = Emulator(name)
    await e.start()
    e.put(f"{K}/clusterqueues", queue("cq", "ci-1"))
    e.put(f"{K}/clusterqueues", queue("theirs", "other-fleet"))
    e.put(f"{K}/workloads", workload("job-a", "cq"))
    e.put(f"{K}/workloads", workload("job-done", "cq", finished=True))
    e.put(f"{K}/workloads", workload("job-off", "cq", active=False))  # left Kueue's cache
    e.put(f"{K}/workloads", workload("their-job", "theirs"))
    return e


def test_past_the_bound_the_workloads_holding_quota_are_named() -> None:
    async def main() -> None:
        async with running(await cluster()) as e:
            with pytest.raises(DrainTimeout) as info:
                await stop_and_drain(
                    {"worker1": e.kubeconfig()}, "ci-1", bound=0.5, interval=0.05, log=print
                )
            message = str(info.value)
            assert "cluster worker1: team/job-a (ClusterQueue cq)." in message
            assert "job-done" not in message and "their-job" not in message
            assert "job-off" not in message  # deactivated: no longer holds quota
            assert "HoldAndDrain" in message and "MKF_DRAIN_TIMEOUT=SECONDS" in message
            # The queues stay held; the message says how to resume them instead.
            assert '{"spec":{"stopPolicy":"None"}}' in message
            assert e.get(f"{K}/clusterqueues", "cq")["spec"]["stopPolicy"] == "Hold"
            # Another fleet's queue keeps the CRD's default.
            assert e.get(f"{K}/clusterqueues", "theirs")["spec"]["stopPolicy"] == "None"

    asyncio.run(main())


def test_an_empty_list_counts_only_once_kueue_applied_the_hold() -> None:
    """Until the queue reports Active=False for the hold's generation, a scheduling cycle
    may still admit: no work in sight is not enough."""

    async def main() -> None:
        e = await cluster()
        e.put(f"{K}/workloads", workload("job-a", "cq", finished=True))
        async with running(e, with_kueue=False):
            with pytest.raises(DrainTimeout) as info:
                await stop_and_drain(
                    {"worker1": e.kubeconfig()}, "ci-1", bound=0.3, interval=0.05, log=print
                )
            assert "cluster worker1: ClusterQueue cq not yet stopped by Kueue" in str(info.value)
            # With Kueue answering, the same state drains at once.
            task = asyncio.create_task(kueue(e))
            try:
                await stop_and_drain(
                    {"worker1": e.kubeconfig()}, "ci-1", bound=5, interval=0.05, log=print
                )
            finally:
                task.cancel()

    asyncio.run(main())


def test_a_cluster_that_stops_answering_is_retried_then_named() -> None:
    async def main() -> None:
        async with running(await cluster()) as e:
            e.put(f"{K}/workloads", workload("job-a", "cq", finished=True))
            e.fail("GET", "workloads", 403, times=1000)  # not retried by the client
            with pytest.raises(DrainTimeout) as info:
                await stop_and_drain(
                    {"worker1": e.kubeconfig()}, "ci-1", bound=0.5, interval=0.05, log=print
                )
            assert "cluster worker1: cannot be read (" in str(info.value)

    asyncio.run(main())


def test_a_kind_manager_is_held_but_only_lasting_clusters_are_waited_on() -> None:
    """An unheld kind manager would keep placing copies on the lasting worker; its own
    admitted work goes with the kind cluster, so the wait does not cover it."""

    async def main() -> None:
        manager = await cluster("manager")
        worker = await cluster("worker1")
        worker.put(f"{K}/workloads", workload("job-a", "cq", finished=True))
        async with running(manager), running(worker):
            await stop_and_drain(
                {"manager": manager.kubeconfig(), "worker1": worker.kubeconfig()},
                "ci-1",
                bound=5,
                interval=0.05,
                log=print,
                wait_on={"worker1"},
            )
            for e in (manager, worker):
                assert e.get(f"{K}/clusterqueues", "cq")["spec"]["stopPolicy"] == "Hold"
            assert manager.get(f"{K}/workloads", "job-a", "team")  # still holding: not waited

    asyncio.run(main())


def test_the_wait_ends_when_the_work_ends() -> None:
    async def main() -> None:
        async with running(await cluster()) as e:

            async def finish_later() -> None:
                await asyncio.sleep(0.2)
                e.put(f"{K}/workloads", workload("job-a", "cq", finished=True))

            finisher = asyncio.create_task(finish_later())
            await stop_and_drain(
                {"worker1": e.kubeconfig()}, "ci-1", bound=60, interval=0.05, log=print
            )
            await finisher
            assert e.get(f"{K}/clusterqueues", "cq")["spec"]["stopPolicy"] == "Hold"

    asyncio.run(main())


def test_the_script_entry_drains_only_lasting_clusters(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """scripts/down.sh pipes `pulumi stack output --json --show-secrets` into it."""
    import io
    import json

    from components.cli import teardown

    seen: list[list[str]] = []

    async def drain(
        kubeconfigs: dict[str, Any], fleet: str, bound: float, wait_on: set[str]
    ) -> None:
        seen.append(sorted(kubeconfigs))
        seen.append(sorted(wait_on))
        raise DrainTimeout("workloads still hold quota after 5s: team/job-a")

    outputs = {
        "fleet": "prod",
        "clusters": [
            {"name": "manager", "provider": "kind"},
            {"name": "w1", "provider": "existing"},
        ],
        "kubeconfigs": {"manager": "kind: Config\n", "w1": "kind: Config\n"},
    }
    monkeypatch.setattr(teardown, "stop_and_drain", drain)
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(outputs)))
    assert teardown.main() == 1
    assert seen == [["manager", "w1"], ["w1"]]  # every cluster held, the lasting waited on
    err = capsys.readouterr().err
    assert err.startswith("error: teardown stopped before destroy: ") and err.count("\n") == 1


def test_a_fleet_all_on_kind_needs_no_drain() -> None:
    from components.cli.teardown import drain_plan

    outputs = {
        "fleet": "dev",
        "clusters": [{"name": "manager", "provider": "kind"}, {"name": "w", "provider": "kind"}],
        "kubeconfigs": {"manager": "kind: Config\n", "w": "kind: Config\n"},
    }
    assert drain_plan(outputs) == ({}, set())


def test_a_cluster_whose_kubeconfig_cannot_be_used_is_skipped_with_a_note() -> None:
    async def main() -> None:
        worker = await cluster("worker1")
        worker.put(f"{K}/workloads", workload("job-a", "cq", finished=True))
        notes: list[str] = []
        async with running(worker):
            await stop_and_drain(
                {"gone": {"apiVersion": "v1", "kind": "Config"}, "worker1": worker.kubeconfig()},
                "ci-1",
                bound=5,
                interval=0.05,
                log=notes.append,
            )
        assert notes[0].startswith("cluster gone: cannot stop its ClusterQueues (")

    asyncio.run(main())


def test_clusters_the_stack_created_on_gke_and_eks_need_no_drain() -> None:
    """Only `existing` clusters outlive the fleet: GKE and EKS clusters the stack created go
    whole with their objects (deleted_with), like kind ones."""
    from components.cli.teardown import drain_plan

    outputs = {
        "fleet": "prod",
        "clusters": [{"name": "manager", "provider": "gke"}, {"name": "w", "provider": "eks"}],
        "kubeconfigs": {"manager": "kind: Config\n", "w": "kind: Config\n"},
    }
    assert drain_plan(outputs) == ({}, set())
    outputs["clusters"].append({"name": "lab", "provider": "existing"})
    outputs["kubeconfigs"]["lab"] = "kind: Config\n"
    kubeconfigs, lasting = drain_plan(outputs)
    assert sorted(kubeconfigs) == ["lab", "manager", "w"] and lasting == {"lab"}
