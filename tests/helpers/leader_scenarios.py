"""Leader-election scenarios run the same way against the emulator (tests/emulated/test_leader.py)
and against a real kube-apiserver (tests/real/test_controller_envtest.py): a leader whose
requests stall, and a holder whose clock is skewed. Each takes a factory of controller
clients (Kube) connected to the server under test."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from controller.kinds import LEASES
from controller.kube import ApiError, Kube
from controller.leader import LeaderElector

NAMESPACE = "default"
# A lease short enough for a test, long enough for a loaded machine's round trips.
DURATION, RENEW, DEADLINE = 3.0, 0.2, 2.0


class Partitioned:
    """A replica's client whose requests hang once `cut` (a lost network path between
    that replica and the API server): nothing fails, nothing answers."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.cut = False

    async def _pass(self, call: Awaitable[Any]) -> Any:
        if self.cut:
            call.close()  # type: ignore[attr-defined]
            await asyncio.Event().wait()
        return await call

    async def get(self, *args: Any, **kwargs: Any) -> Any:
        return await self._pass(self.kube.get(*args, **kwargs))

    async def create(self, *args: Any, **kwargs: Any) -> Any:
        return await self._pass(self.kube.create(*args, **kwargs))

    async def replace(self, *args: Any, **kwargs: Any) -> Any:
        return await self._pass(self.kube.replace(*args, **kwargs))


async def until(check: Callable[[], bool], timeout: float = 20) -> float:
    """Waits until `check()`; the loop time it became true."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not check():
        assert loop.time() < end, "timed out"
        await asyncio.sleep(0.02)
    return loop.time()


def _elector(kube: Any, name: str, identity: str) -> LeaderElector:
    return LeaderElector(kube, NAMESPACE, name, identity, DURATION, RENEW, DEADLINE)


async def stalled_leader(connect: Callable[[], Awaitable[Kube]]) -> None:
    """A leader whose requests hang stops writing by its renew deadline, before the
    standby takes over: never two writers, and no waiting out the client's retries."""
    kube_a, kube_b = await connect(), await connect()
    path_a = Partitioned(kube_a)
    a, b = _elector(path_a, "stalled", "replica-a"), _elector(kube_b, "stalled", "replica-b")
    tasks = [asyncio.create_task(a.run())]
    try:
        await until(lambda: a.is_leader)
        tasks.append(asyncio.create_task(b.run()))
        await asyncio.sleep(4 * RENEW)  # b has seen a's lease
        assert not b.is_leader
        cut = asyncio.get_running_loop().time()
        path_a.cut = True
        a_stopped = await until(lambda: not a.is_leader)
        b_took = await until(lambda: b.is_leader)
        assert a_stopped - cut <= DEADLINE + RENEW + 0.5, a_stopped - cut
        assert a_stopped < b_took, "the standby took over while the old leader still wrote"
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await kube_a.close()
        await kube_b.close()


async def skewed_holder(connect: Callable[[], Awaitable[Kube]]) -> None:
    """A holder whose clock is an hour behind keeps renewing (its renewTime always looks
    an hour old): the standby does not take over while the record keeps changing. When
    it stops (its last renewTime an hour ahead, a clock that runs fast), the standby takes
    over once the record has not changed for the lease's duration by its own clock."""
    writer, kube_b = await connect(), await connect()
    name = "skewed"

    def lease(skew: timedelta, version: str | None) -> dict[str, Any]:
        stamp = (datetime.now(UTC) + skew).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        meta: dict[str, Any] = {"name": name, "namespace": NAMESPACE}
        if version:
            meta["resourceVersion"] = version
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta,
            "spec": {
                "holderIdentity": "skewed-holder",
                "leaseDurationSeconds": int(DURATION),
                "acquireTime": stamp,
                "renewTime": stamp,
            },
        }

    behind = timedelta(hours=-1)
    try:
        await writer.create(LEASES, lease(behind, None), NAMESPACE)
    except ApiError as exc:
        assert exc.status == 409, exc
    b = _elector(kube_b, name, "replica-b")
    task = asyncio.create_task(b.run())
    try:
        loop = asyncio.get_running_loop()
        end = loop.time() + 2 * DURATION
        while loop.time() < end:
            current = await writer.get(LEASES, name, NAMESPACE)
            await writer.replace(LEASES, lease(behind, current["metadata"]["resourceVersion"]))
            assert not b.is_leader, "took a lease its holder kept renewing"
            await asyncio.sleep(RENEW * 2)
        current = await writer.get(LEASES, name, NAMESPACE)
        ahead = lease(timedelta(hours=1), current["metadata"]["resourceVersion"])
        await writer.replace(LEASES, ahead)
        stopped = loop.time()
        took = await until(lambda: b.is_leader)
        assert DURATION - RENEW <= took - stopped <= DURATION + 2, took - stopped
        final = await writer.get(LEASES, name, NAMESPACE)
        assert final["spec"]["holderIdentity"] == "replica-b"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await writer.close()
        await kube_b.close()
