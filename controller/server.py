"""Liveness, readiness and metrics over HTTP, for the kubelet and Prometheus."""

from __future__ import annotations

import time
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from controller.metrics import Metrics

STUCK_AFTER_SECONDS = 120


def app(
    metrics: Metrics, ready: Callable[[], bool], heartbeat: Callable[[], float]
) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        # The dispatch loop touches its heartbeat on every workload and the resync wakes
        # it at least every resync period; a loop silent far longer is stuck.
        stuck = time.monotonic() - heartbeat() > STUCK_AFTER_SECONDS
        return web.Response(status=500 if stuck else 200, text="stuck" if stuck else "ok")

    async def readyz(_: web.Request) -> web.Response:
        ok = ready()
        return web.Response(status=200 if ok else 503, text="ok" if ok else "caches not synced")

    async def metrics_endpoint(_: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    application = web.Application()
    application.router.add_get("/healthz", healthz)
    application.router.add_get("/readyz", readyz)
    application.router.add_get("/metrics", metrics_endpoint)
    return application
