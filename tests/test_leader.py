"""Leader election: why controller/leader.py is hand-written rather than kubernetes_asyncio's
`leaderelection` with a `LeaseLock` (the pinned kubernetes_asyncio), and that ours steps
down where that one does not."""

from __future__ import annotations

import asyncio
import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio.client import ApiClient, Configuration, V1Lease
from kubernetes_asyncio.client.rest import ApiException
from kubernetes_asyncio.leaderelection.electionconfig import Config
from kubernetes_asyncio.leaderelection.leaderelection import LeaderElection
from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

from controller.kube import ApiError
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


class _Leases:
    """One Lease as the API server keeps it: a replace with a stale resourceVersion is a
    409, as on the real server."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0

    async def get(self, _resource: str, name: str, namespace: str) -> dict[str, Any]:
        if self.lease is None:
            raise ApiError(404, f"leases {name} not found")
        return copy.deepcopy(self.lease)

    async def create(self, _resource: str, body: dict[str, Any], _namespace: str) -> None:
        if self.lease is not None:
            raise ApiError(409, "already exists")
        self._store(body)

    async def replace(self, _resource: str, body: dict[str, Any]) -> None:
        assert self.lease is not None
        if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise ApiError(409, "the object has been modified")
        self._store(body)

    def _store(self, body: dict[str, Any]) -> None:
        self.version += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(self.version)


def _elector(leases: _Leases, identity: str) -> LeaderElector:
    return LeaderElector(leases, "ns", "dispatcher", identity, duration=60)  # type: ignore[arg-type]


def test_a_lease_that_ran_out_is_taken_over_and_a_live_one_is_not() -> None:
    """A leader that crashed never releases: the next replica waits until its lease ran out."""

    async def main() -> None:
        leases = _Leases()
        a, b = _elector(leases, "replica-a"), _elector(leases, "replica-b")
        assert await a.try_acquire()
        assert not await b.try_acquire()  # a's lease is fresh
        assert leases.lease is not None
        stale = datetime.now(UTC) - timedelta(seconds=61)
        leases.lease["spec"]["renewTime"] = stale.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        assert await b.try_acquire()
        assert leases.lease["spec"]["holderIdentity"] == "replica-b"
        assert leases.lease["spec"]["leaseTransitions"] == 1

    asyncio.run(main())


def test_a_clean_stop_hands_the_lease_over_and_only_its_own() -> None:
    async def main() -> None:
        leases = _Leases()
        a, b = _elector(leases, "replica-a"), _elector(leases, "replica-b")
        a._set(await a.try_acquire())
        await a.release()
        assert leases.lease is not None
        spec = leases.lease["spec"]
        assert (spec["holderIdentity"], spec["leaseDurationSeconds"]) == ("", 1)
        assert a.is_leader is False
        # The next replica takes it at once, without waiting out the 60 seconds.
        b._set(await b.try_acquire())
        assert b.is_leader and leases.lease["spec"]["holderIdentity"] == "replica-b"
        # A replica that lost the lease meanwhile (it thinks it leads) leaves b's alone.
        a._set(True)
        await a.release()
        assert leases.lease["spec"]["holderIdentity"] == "replica-b"
        assert leases.lease["spec"]["leaseDurationSeconds"] == 60
        # A follower writes nothing on stopping.
        before = leases.version
        await _elector(leases, "replica-c").release()
        assert leases.version == before

    asyncio.run(main())
