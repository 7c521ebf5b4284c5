"""Wiring: the dispatcher, leader election, the ClusterProfile duty and the HTTP probes,
run together until told to stop; and `explain`, which decides once and writes nothing."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from controller.dispatcher import Dispatcher
from controller.explain import dispatcher_line, find, pending, report, text
from controller.inventory import InventoryKeeper
from controller.kube import ApiError, Kube
from controller.leader import LeaderElector, current_leader
from controller.metrics import Metrics
from controller.profiles import SAMPLE_SECONDS, HealthHold, sync_profiles
from controller.server import app
from controller.settings import Settings

log = logging.getLogger("controller")


async def run(
    manager: Kube,
    settings: Settings,
    stop: asyncio.Event,
    metrics: Metrics | None = None,
    port: int | None = None,
    on_listening: Callable[[int], None] | None = None,
) -> Dispatcher:
    """Run until `stop` is set. `on_listening` gets the probe/metrics port once bound."""
    metrics = metrics or Metrics()
    elector = LeaderElector(
        manager,
        settings.namespace,
        settings.lease_name,
        settings.identity,
        settings.lease_duration_seconds,
        settings.lease_renew_seconds,
        settings.lease_renew_deadline_seconds,
    )
    dispatcher = Dispatcher(manager, settings, metrics, Kube.from_kubeconfig, elector.leading)
    runner = web.AppRunner(
        app(metrics, dispatcher.state.synced, lambda: dispatcher.heartbeat), handle_signals=False
    )
    await runner.setup()
    site = web.TCPSite(runner, "0.0.0.0", settings.metrics_port if port is None else port)
    await site.start()
    if on_listening is not None:
        on_listening(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

    async def on_leadership() -> None:
        while True:
            await elector.changed.wait()
            elector.changed.clear()
            metrics.leader.set(1 if elector.is_leader else 0)
            if elector.is_leader:
                # A new leader looks at everything: the old one may have died mid-way.
                dispatcher.look_at_everything()
                await dispatcher.sync_policy_status()
            else:
                # A write begun while leading would otherwise go on through the client's
                # retries (minutes) after another replica took over: two writers.
                await dispatcher.stop_writing()

    async def profiles() -> None:
        # Sampled at the probes' pace, so the hold sees a verdict that flips back between
        # two samples (controller/profiles.py: a flip is written once it has held).
        hold = HealthHold()
        while True:
            if elector.leading() and settings.cluster_profiles and dispatcher.state.synced():
                await sync_profiles(
                    manager,
                    dispatcher.state,
                    settings.cluster_profiles,
                    settings.kueue_namespace,
                    hold,
                )
            await asyncio.sleep(min(settings.resync_seconds, SAMPLE_SECONDS))

    keeper = InventoryKeeper(manager, dispatcher.state, settings.kueue_namespace, dispatcher.event)

    async def inventory() -> None:
        while True:
            await asyncio.sleep(min(settings.resync_seconds, 2))
            if not (elector.leading() and dispatcher.state.synced()):
                continue
            try:
                await keeper.step(datetime.now(UTC))
                dispatcher.excluded = keeper.excluded
            except ApiError as exc:
                log.warning("inventory: %s", exc)

    await dispatcher.start()
    tasks = [
        asyncio.create_task(elector.run(), name="leader"),
        asyncio.create_task(on_leadership(), name="leadership"),
        asyncio.create_task(profiles(), name="profiles"),
        asyncio.create_task(inventory(), name="inventory"),
    ]
    try:
        await stop.wait()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await dispatcher.stop()
        # Nothing writes any more: hand the lease over rather than let it run out.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(elector.release(), 5)
        await runner.cleanup()
    return dispatcher


async def explain_answers(
    manager: Kube, settings: Settings, name: str | None, timeout: float = 30
) -> tuple[list[dict[str, Any]], str | None]:
    """What the policy would do now for the workloads `name` names (a Workload, or a Job,
    JobSet or LeaderWorkerSet's), or with `name` None for every pending workload; and who
    holds the dispatcher's Lease (None: no dispatcher runs). NotFound before any cache is
    filled when `name` names nothing."""
    found = await find(manager, name) if name is not None else []
    dispatcher = Dispatcher(
        manager, settings, Metrics(), Kube.from_kubeconfig, is_leader=lambda: False
    )
    state = dispatcher.state
    await state.start()
    try:
        try:
            await state.wait_synced(timeout)
        except TimeoutError:
            # Say which lists are missing and why (a 404: the CRD is not installed).
            waiting = [
                f"{r.kind.plural} ({r.last_error})"
                for r in state.reflectors
                if not r.synced.is_set()
            ]
            raise TimeoutError(", ".join(waiting)) from None
        await state.wait_workers(timeout)
        if name is None:
            found = pending(dispatcher)
        answers = [report(dispatcher, f) for f in found]
    finally:
        await state.stop()
    return answers, await current_leader(manager, settings.namespace, settings.lease_name)


async def explain(manager: Kube, settings: Settings, name: str, timeout: float = 30) -> str:
    """The per-cluster table the policy would produce for the workloads `name` names now,
    after a line saying whether a dispatcher is running to act on it."""
    answers, holder = await explain_answers(manager, settings, name, timeout)
    return "\n\n".join([dispatcher_line(holder, settings), *(text(a, holder) for a in answers)])
