"""Leader election: why controller/leader.py is hand-written rather than kubernetes_asyncio's
`leaderelection` with a `LeaseLock` (the pinned kubernetes_asyncio), and that ours steps
down where that one does not."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio.client import ApiClient, Configuration, V1Lease
from kubernetes_asyncio.client.rest import ApiException
from kubernetes_asyncio.leaderelection.electionconfig import Config
from kubernetes_asyncio.leaderelection.leaderelection import LeaderElection
from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

from controller.leader import LeaderElector


class _Coordination:
    """CoordinationV1Api as a server answers it: no Lease yet, the create succeeds, and
    then the API server cannot be reached (a network partition, the server restarting)."""

    def __init__(self) -> None:
        self.reads = 0

    async def read_namespaced_lease(self, name: str, namespace: str) -> V1Lease:
        self.reads += 1
        if self.reads == 1:
            missing = ApiException(status=404, reason="Not Found")
            missing.body = '{"kind": "Status", "code": 404, "reason": "NotFound"}'
            raise missing
        raise aiohttp.ClientConnectionError("connection refused")

    async def create_namespaced_lease(self, namespace: str, body: V1Lease, **_: Any) -> V1Lease:
        return body


def test_kubernetes_asyncio_leader_election_keeps_leading_when_the_server_is_unreachable() -> None:
    """The library's LeaseLock.get catches only ApiException. A connection error during
    renewal escapes LeaderElection.run without cancelling the onstarted_leading task or
    calling onstopped_leading: the replica keeps writing as leader while its lease runs
    out and another replica takes it, two writers at once. Ours steps down instead (the
    next test)."""

    async def main() -> None:
        api = ApiClient(Configuration())
        try:
            lock = LeaseLock("dispatcher", "multikueue-dispatcher", "replica-a", api)
            lock.api_instance = _Coordination()  # type: ignore[assignment]
            leading: list[asyncio.Task[Any]] = []
            stopped: list[bool] = []

            async def lead() -> None:
                leading.append(asyncio.current_task())  # type: ignore[arg-type]
                await asyncio.sleep(3600)

            async def stop() -> None:
                stopped.append(True)

            election = LeaderElection(Config(lock, 15, 10, 2, lead, stop))
            with pytest.raises(aiohttp.ClientConnectionError):
                await election.run()
            await asyncio.sleep(0)  # let the leading task start, if it was created
            assert leading and not leading[0].done(), "still leading after losing the server"
            assert stopped == []
            leading[0].cancel()
        finally:
            await api.close()

    asyncio.run(main())


class _Unreachable:
    """The controller's Kube client when the API server cannot be reached."""

    async def get(self, *_: Any, **__: Any) -> dict[str, Any]:
        raise aiohttp.ClientConnectionError("connection refused")


def test_ours_steps_down_when_the_server_is_unreachable() -> None:
    async def main() -> None:
        elector = LeaderElector(_Unreachable(), "ns", "dispatcher", "replica-a", renew=0.01)  # type: ignore[arg-type]
        elector._set(True)
        elector.changed.clear()
        task = asyncio.create_task(elector.run())
        await asyncio.wait_for(elector.changed.wait(), 5)
        assert elector.is_leader is False
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
