"""A worker's health as the dispatcher judges it, against an emulated worker that behaves
as a real API server does (nothing sent on an idle watch): quiet is healthy, a server that
stops or stops answering is unreachable with the reason, and one that returns is used
again within seconds. Time is a fake clock the test moves, never a sleep."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from controller.fleet_state import WorkerConnection
from controller.kube import Kube
from tests.helpers.fleet_harness import seed_worker, until
from tests.helpers.kube_emulator import Emulator


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def with_worker(test: Callable[[Emulator, WorkerConnection, Clock], Awaitable[None]]) -> None:
    async def main() -> None:
        worker = Emulator("w1")
        await worker.start()
        seed_worker(worker, {})
        clock = Clock()
        kube = await Kube.from_kubeconfig(worker.kubeconfig(), "w1")
        connection = WorkerConnection(
            "w1", kube, lambda *_: None, probe_interval=0.05, probe_timeout=0.5, clock=clock
        )
        connection.start()
        try:
            await until(lambda: connection.health(60)[0], what="w1 healthy at first")
            await asyncio.wait_for(test(worker, connection, clock), 30)
        finally:
            await connection.stop()
            await worker.stop()

    asyncio.run(main())


async def unreachable(connection: WorkerConnection) -> str:
    """Waits for the verdict to turn; returns its reason."""
    await until(lambda: not connection.health(60)[0], what="w1 unreachable")
    return connection.health(60)[1]


async def probes_pass(connection: WorkerConnection, count: int = 2) -> None:
    start = connection.prober.probes
    await until(lambda: connection.prober.probes >= start + count, what="probes")


def test_a_quiet_worker_stays_healthy() -> None:
    async def test(worker: Emulator, connection: WorkerConnection, clock: Clock) -> None:
        seen = (connection.queues.last_seen, connection.local_queues.last_seen)
        clock.now += 300  # five quiet minutes, well past the old 60 s staleness
        await probes_pass(connection)
        assert connection.health(60) == (True, "", 0.0)
        # Nothing came on the watches (no event, no bookmark): quiet is not an outage.
        assert (connection.queues.last_seen, connection.local_queues.last_seen) == seen
        assert {r.path for r in worker.requests[-2:]} == {"/version"}

    with_worker(test)


def test_a_stopped_worker_is_unreachable_with_the_reason_and_comes_back() -> None:
    async def test(worker: Emulator, connection: WorkerConnection, clock: Clock) -> None:
        relists = connection.queues.relists
        await worker.stop()
        reason = await unreachable(connection)
        await probes_pass(connection)
        reason = connection.health(60)[1]
        assert reason.startswith("GET /version failed: "), reason
        assert "Cannot connect" in reason or "refused" in reason, reason
        await worker.start()  # the same port, the same objects
        await until(lambda: connection.health(60)[0], what="healthy again")
        # It came back with fresh data: the watches started over from a list.
        assert connection.queues.relists > relists
        assert set(connection.queues.store) == {"cluster-queue"}

    with_worker(test)


def test_a_worker_that_stops_answering_is_unreachable_then_returns() -> None:
    async def test(worker: Emulator, connection: WorkerConnection, clock: Clock) -> None:
        worker.stalled = True  # requests arrive, nothing answers; the watches stay open
        reason = await unreachable(connection)
        assert "no answer within 0.5s" in reason, reason
        worker.stalled = False
        await until(lambda: connection.health(60)[0], what="healthy again")

    with_worker(test)


def test_one_slow_answer_is_forgiven() -> None:
    async def test(worker: Emulator, connection: WorkerConnection, clock: Clock) -> None:
        worker.fail("GET", "/version", 503, times=1)
        await until(lambda: worker.faults[0].remaining == 0, what="the failed probe")
        await probes_pass(connection, 1)
        assert connection.health(60)[0]
        assert connection.prober.failures == 0  # the next probe answered

    with_worker(test)


def test_probes_that_stop_are_noticed() -> None:
    async def test(worker: Emulator, connection: WorkerConnection, clock: Clock) -> None:
        assert connection._probing is not None
        connection._probing.cancel()
        clock.now += 61
        healthy, reason, silence = connection.health(60)
        assert not healthy and reason == "GET /version has not answered for more than 60s"
        assert silence >= 61

    with_worker(test)


def test_a_stop_that_comes_as_a_probe_is_refused_ends_the_probes() -> None:
    """The stop's cancellation lands in the instant a probe of a worker that refuses
    connections fails (the refusal is in, the prober has not yet run on). On Python 3.11
    asyncio.wait_for around the probe returned the refusal and dropped the cancellation:
    the prober went on probing and stop() waited for it for ever."""

    async def main() -> None:
        worker = Emulator("w1")
        await worker.start()
        await worker.stop()  # nothing listens: every connection is refused
        kube = await Kube.from_kubeconfig(worker.kubeconfig(), "w1")
        connection = WorkerConnection("w1", kube, lambda *_: None, probe_interval=0.05)
        stopping: list[asyncio.Task] = []
        real = kube._call

        async def call(method: str, path: str, *rest: object) -> object:
            try:
                return await real(method, path, *rest)  # type: ignore[arg-type]
            finally:
                if path == "/version" and connection.prober.probes >= 2 and not stopping:
                    stopping.append(asyncio.ensure_future(connection.stop()))

        kube._call = call  # type: ignore[method-assign]
        connection.start()
        try:
            await until(lambda: stopping, what="a stop as a probe is refused")
            started = asyncio.get_running_loop().time()
            await asyncio.wait_for(asyncio.shield(stopping[0]), 5)
            assert asyncio.get_running_loop().time() - started < 5
            assert connection._probing is not None and connection._probing.cancelled()
        finally:
            for task in [*connection._watching, connection._probing]:
                if task is not None:
                    task.cancel()
            await kube.close()

    asyncio.run(asyncio.wait_for(main(), 30))
