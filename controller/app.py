"""Wiring: the dispatcher, leader election, the ClusterProfile duty and the HTTP probes,
run together until told to stop; and `explain`, which decides once and writes nothing."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime

from aiohttp import web

from controller.dispatcher import Dispatcher
from controller.inventory import InventoryKeeper
from controller.kube import ApiError, Kube
from controller.leader import LeaderElector
from controller.metrics import Metrics
from controller.policy import show
from controller.profiles import sync_profiles
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
    dispatcher = Dispatcher(
        manager, settings, metrics, Kube.from_kubeconfig, lambda: elector.is_leader
    )
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

    async def profiles() -> None:
        while True:
            if elector.is_leader and settings.cluster_profiles and dispatcher.state.synced():
                await sync_profiles(
                    manager, dispatcher.state, settings.cluster_profiles, settings.kueue_namespace
                )
            await asyncio.sleep(min(settings.resync_seconds, 10))

    keeper = InventoryKeeper(manager, dispatcher.state, settings.kueue_namespace, dispatcher.event)

    async def inventory() -> None:
        while True:
            await asyncio.sleep(min(settings.resync_seconds, 2))
            if not (elector.is_leader and dispatcher.state.synced()):
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


def _amounts(resources: dict[str, int]) -> str:
    return ", ".join(f"{r} {show(r, a)}" for r, a in sorted(resources.items())) or "nothing"


async def explain(manager: Kube, settings: Settings, key: str, timeout: float = 30) -> str:
    """The per-cluster table the policy would produce for one workload now."""
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
        return _table(dispatcher, key)
    finally:
        await state.stop()


def _table(dispatcher: Dispatcher, key: str) -> str:
    wl = dispatcher.state.workloads.store.get(key)
    if wl is None:
        return f"No workload {key} on the manager."
    found, decision, policy_name = dispatcher.evaluate(key)
    status = wl.get("status") or {}
    spec = wl.get("spec") or {}
    lines = [
        f"Workload {key}  (LocalQueue {spec.get('queueName')}, ClusterQueue "
        f"{(status.get('admission') or {}).get('clusterQueue', '-')})"
    ]
    lines.append(
        "Currently nominated: " + (", ".join(status.get("nominatedClusterNames") or []) or "-")
    )
    if decision is None:
        lines.append(f"Not dispatched now: {found.reason}.")
        return "\n".join(lines)
    policy = dispatcher.state.policy_set().for_queue(
        (status.get("admission") or {}).get("clusterQueue", ""), dispatcher.settings.default_policy
    )
    lines.append(f"Demand: {_amounts(dispatcher.view(wl).requests)}")
    lines.append(
        f"Policy: {policy_name} ({policy.strategy}, nominate "
        f"{policy.clusters_to_nominate}, widen after {policy.widen_after_seconds:g}s, "
        f"when nothing fits: {policy.when_nothing_fits}"
        + (f", clusters with {policy.cluster_selector}" if policy.cluster_selector else "")
        + ")"
    )
    width = max([len("CLUSTER"), *(len(v.cluster) for v in decision.verdicts)])
    lines.append(f"{'CLUSTER':<{width}}  {'VERDICT':<8}  {'SCORE':>6}  REASON")
    for v in decision.verdicts:
        score = f"{v.score:.2f}" if v.score is not None else "-"
        lines.append(f"{v.cluster:<{width}}  {v.status:<8}  {score:>6}  {v.reason}")
    lines.append(
        "Would nominate: " + (", ".join(decision.nominate) or "nothing") + f" ({decision.outcome})"
    )
    return "\n".join(lines)
