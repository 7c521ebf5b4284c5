"""Teardown of a fleet on existing/cloud clusters with work running, against the emulated
API server: the fleet's ClusterQueues are held (stopPolicy), the wait ends when the work
holding quota ends, and past the bound the error names what still holds quota."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from components.labels import FLEET_LABEL
from components.teardown import DrainTimeout, stop_and_drain
from tests.fleet_harness import workload as admitted_workload
from tests.kube_emulator import Emulator

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


def workload(name: str, cq: str, finished: bool = False) -> dict[str, Any]:
    """A Workload admitted to `cq`, as Kueue's real CRD accepts it (the emulator checks)."""
    obj = admitted_workload(name, namespace="team", cluster="worker1", state="Ready")
    obj["status"]["admission"]["clusterQueue"] = cq
    if finished:
        reserved = obj["status"]["conditions"][0]
        obj["status"]["conditions"].append(
            {**reserved, "type": "Finished", "reason": "Succeeded", "status": "True"}
        )
    return obj


async def cluster() -> Emulator:
    e = Emulator("worker1")
    await e.start()
    e.put(f"{K}/clusterqueues", queue("cq", "ci-1"))
    e.put(f"{K}/clusterqueues", queue("theirs", "other-fleet"))
    e.put(f"{K}/workloads", workload("job-a", "cq"))
    e.put(f"{K}/workloads", workload("job-done", "cq", finished=True))
    e.put(f"{K}/workloads", workload("their-job", "theirs"))
    return e


def test_past_the_bound_the_workloads_holding_quota_are_named() -> None:
    async def main() -> None:
        e = await cluster()
        try:
            with pytest.raises(DrainTimeout) as info:
                await stop_and_drain(
                    {"worker1": e.kubeconfig()}, "ci-1", bound=0.2, interval=0.05, log=print
                )
            message = str(info.value)
            assert "cluster worker1: team/job-a (ClusterQueue cq)" in message
            assert "job-done" not in message and "their-job" not in message
            assert "HoldAndDrain" in message and "MKF_DRAIN_TIMEOUT=SECONDS" in message
            assert e.get(f"{K}/clusterqueues", "cq")["spec"]["stopPolicy"] == "Hold"
            # Another fleet's queue keeps the CRD's default.
            assert e.get(f"{K}/clusterqueues", "theirs")["spec"]["stopPolicy"] == "None"
        finally:
            await e.stop()

    asyncio.run(main())


def test_the_wait_ends_when_the_work_ends() -> None:
    async def main() -> None:
        e = await cluster()
        try:

            async def finish_later() -> None:
                await asyncio.sleep(0.2)
                e.put(f"{K}/workloads", workload("job-a", "cq", finished=True))

            finisher = asyncio.create_task(finish_later())
            await stop_and_drain(
                {"worker1": e.kubeconfig()}, "ci-1", bound=60, interval=0.05, log=print
            )
            await finisher
            assert e.get(f"{K}/clusterqueues", "cq")["spec"]["stopPolicy"] == "Hold"
        finally:
            await e.stop()

    asyncio.run(main())


def test_the_script_entry_drains_only_lasting_clusters(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """scripts/down.sh pipes `pulumi stack output --json --show-secrets` into it."""
    import io
    import json

    from components import teardown

    seen: list[list[str]] = []

    async def drain(kubeconfigs: dict[str, Any], fleet: str, bound: float) -> None:
        seen.append(sorted(kubeconfigs))
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
    assert seen == [["w1"]]
    err = capsys.readouterr().err
    assert err.startswith("error: teardown stopped before destroy: ") and err.count("\n") == 1
