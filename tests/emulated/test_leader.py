"""Leader election: why controller/leader.py is hand-written rather than kubernetes_asyncio's
`leaderelection` with a `LeaseLock` (the pinned kubernetes_asyncio), and that ours steps
down where that one does not."""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio.client import ApiClient, Configuration, V1Lease
from kubernetes_asyncio.client.rest import ApiException
from kubernetes_asyncio.leaderelection.electionconfig import Config
from kubernetes_asyncio.leaderelection.leaderelection import LeaderElection
from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

from controller.kube import ApiError, Kube
from controller.leader import LeaderElector
from tests.helpers import leader_scenarios
from tests.helpers.kube_emulator import Emulator


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


def _elector(
    leases: _Leases, identity: str, clock: Callable[[], float] | None = None
) -> LeaderElector:
    return LeaderElector(
        leases,  # type: ignore[arg-type]
        "ns",
        "dispatcher",
        identity,
        duration=60,
        clock=clock or time.monotonic,
    )


class _Clock:
    """A replica's monotonic clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_lease_that_ran_out_is_taken_over_and_a_live_one_is_not() -> None:
    """A leader that crashed never releases: the next replica waits until the lease has
    not changed for its duration, by the standby's own clock."""

    async def main() -> None:
        leases, clock = _Leases(), _Clock()
        a, b = _elector(leases, "replica-a"), _elector(leases, "replica-b", clock)
        assert await a.try_acquire()
        assert not await b.try_acquire()  # b sees a's lease for the first time
        clock.now += 59
        assert not await b.try_acquire()  # unchanged for 59 of its 60 seconds
        clock.now += 2
        assert await b.try_acquire()
        assert leases.lease is not None
        assert leases.lease["spec"]["holderIdentity"] == "replica-b"
        assert leases.lease["spec"]["leaseTransitions"] == 1

    asyncio.run(main())


def _skew(leases: _Leases, by: timedelta) -> None:
    """The holder renews with a clock `by` off: its renewTime is that far from ours."""
    assert leases.lease is not None
    stamp = (datetime.now(UTC) + by).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    leases._store({**leases.lease, "spec": {**leases.lease["spec"], "renewTime": stamp}})


def test_expiry_is_judged_by_the_standbys_clock_not_the_holders_renew_time() -> None:
    """client-go's isLeaseValid (observedTime + leaseDuration): a holder whose clock runs
    an hour behind looks expired by its renewTime, yet it renews, so the record keeps
    changing and the standby leaves it; one an hour ahead that died is still taken over."""

    async def main() -> None:
        leases, clock = _Leases(), _Clock()
        a, b = _elector(leases, "replica-a"), _elector(leases, "replica-b", clock)
        assert await a.try_acquire()
        for _ in range(5):  # five minutes of renewals every 30 s, an hour behind
            _skew(leases, timedelta(hours=-1))
            assert not await b.try_acquire()
            clock.now += 30
        _skew(leases, timedelta(hours=1))  # its last renewal, from a clock an hour ahead
        assert not await b.try_acquire()
        clock.now += 61
        assert await b.try_acquire()

    asyncio.run(main())


class _Stalled:
    """A client whose every request hangs (the server behind a lost network path)."""

    def __init__(self) -> None:
        self.calls = 0

    async def get(self, *_: Any, **__: Any) -> dict[str, Any]:
        self.calls += 1
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def test_a_stalled_leader_stops_at_its_renew_deadline() -> None:
    """Not after the client's own retries (five tries of 30 s): the try is cut off."""

    async def main() -> None:
        elector = LeaderElector(
            _Stalled(),  # type: ignore[arg-type]
            "ns",
            "dispatcher",
            "replica-a",
            duration=1.5,
            renew=0.1,
            deadline=0.5,
        )
        elector._set(True)
        elector._renewed_at = elector.clock()
        elector.changed.clear()
        started = asyncio.get_running_loop().time()
        task = asyncio.create_task(elector.run())
        await asyncio.wait_for(elector.changed.wait(), 5)
        took = asyncio.get_running_loop().time() - started
        assert elector.is_leader is False
        assert 0.4 <= took <= 1.2, took
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(main())


class _Flaky(_Leases):
    """The lease store, failing the next `failures` reads with a connection error."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = 0

    async def get(self, _resource: str, name: str, namespace: str) -> dict[str, Any]:
        if self.failures:
            self.failures -= 1
            raise aiohttp.ClientConnectionError("connection reset")
        return await super().get(_resource, name, namespace)


def test_a_failed_renewal_is_retried_until_the_deadline_then_the_leader_stops() -> None:
    """client-go retries a renewal every retry period until the renew deadline: one
    dropped connection does not make the leader flap (and re-examine every workload)."""

    async def main() -> None:
        leases, clock = _Flaky(), _Clock()
        a = LeaderElector(leases, "ns", "d", "replica-a", 15, 2, 10, clock)  # type: ignore[arg-type]
        await a.step()
        assert a.is_leader
        leases.failures = 99
        clock.now += 2
        await a.step()
        assert a.is_leader  # 2 s without renewal, deadline 10 s
        clock.now += 8
        await a.step()
        assert not a.is_leader  # 10 s: stop writing
        leases.failures = 0
        await a.step()
        assert a.is_leader  # its own lease, renewed again

    asyncio.run(main())


class _FailsSlowly(_Leases):
    """The lease store; once `failing`, each read fails after `after` seconds."""

    def __init__(self, after: float) -> None:
        super().__init__()
        self.after = after
        self.failing = False

    async def get(self, _resource: str, name: str, namespace: str) -> dict[str, Any]:
        if self.failing:
            await asyncio.sleep(self.after)
            raise aiohttp.ClientConnectionError("connection reset")
        return await super().get(_resource, name, namespace)


def test_a_leader_whose_renewals_fail_stops_at_the_deadline_not_a_retry_period_later() -> None:
    """A try that fails just before the deadline (0.95 s of 1 s) must not leave the leader
    writing until its next try a retry period later (1.45 s, about the lease's 1.5 s, when
    a standby takes over): client-go's retries end at the renew deadline, and `leading()`
    is false from the deadline on, whenever the loop next runs."""

    async def main() -> None:
        leases = _FailsSlowly(after=0.45)
        a = LeaderElector(
            leases,  # type: ignore[arg-type]
            "ns",
            "d",
            "replica-a",
            duration=1.5,
            renew=0.5,
            deadline=1.0,
        )
        task = asyncio.create_task(a.run())
        try:
            while not a.leading():
                await asyncio.sleep(0.01)
            leases.failing = True
            renewed = a._renewed_at
            assert renewed is not None
            stopped_writing = stepped_down = None
            while stepped_down is None:
                await asyncio.sleep(0.01)
                if stopped_writing is None and not a.leading():
                    stopped_writing = time.monotonic() - renewed
                if not a.is_leader:
                    stepped_down = time.monotonic() - renewed
            assert stopped_writing is not None
            assert 0.9 <= stopped_writing <= 1.05, stopped_writing
            assert stepped_down <= 1.2, stepped_down
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(main())


def test_a_leader_that_sees_another_holder_stops_at_once() -> None:
    async def main() -> None:
        leases, clock = _Leases(), _Clock()
        a = LeaderElector(leases, "ns", "d", "replica-a", 15, 2, 10, clock)  # type: ignore[arg-type]
        await a.step()
        assert leases.lease is not None
        spec = leases.lease["spec"]
        leases._store({**leases.lease, "spec": {**spec, "holderIdentity": "replica-b"}})
        await a.step()
        assert not a.is_leader

    asyncio.run(main())


def test_leader_against_the_emulator_when_stalled_and_skewed() -> None:
    async def main() -> None:
        server = Emulator("manager")
        await server.start()
        try:

            async def connect() -> Kube:
                return await Kube.from_kubeconfig(server.kubeconfig(), "manager")

            await leader_scenarios.stalled_leader(connect)
            await leader_scenarios.skewed_holder(connect)
        finally:
            await server.stop()

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
