"""Events the dispatcher writes on the manager: one per distinct decision on an object, sent
in the background at a bounded pace, behind the nominations that matter more."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from controller.kinds import EVENTS
from controller.kube import ApiError, Kube
from controller.metrics import Metrics
from controller.model import Decision
from controller.workloads import key_of

log = logging.getLogger("controller.events")
COMPONENT = "multikueue-fleet-dispatcher"
EVENT_MESSAGE_LIMIT = 1024
EVENT_CLUSTERS_SHOWN = 5
EVENT_BACKLOG = 10000  # Events waiting to be sent; beyond that they are dropped and counted
# Events yield to nominations: while nominations are being written, an Event waits for a
# pause, but never longer than this after it was made.
EVENT_MAX_DELAY_SECONDS = 30.0
# The Events all workloads together may cost the API server: a burst of EVENT_BURST, then
# EVENTS_PER_SECOND (client-go's recorder also rate-limits, per object; this bounds the sum).
EVENTS_PER_SECOND = 10.0
EVENT_BURST = 100

# (what it is about, type, reason, message, when, queued at): see EventRecorder.say.
Queued = tuple[tuple[Any, ...], str, str, str, str, float]


class Pace:
    """A rate with a burst (the generic cell rate algorithm): `delay(now)` is how long the
    next send must wait so that no more than `burst` plus `rate` per second go out."""

    def __init__(self, rate: float, burst: int) -> None:
        self.interval = 1.0 / rate
        self.tolerance = (burst - 1) * self.interval
        self._due = -math.inf  # when the next send would be due at the steady pace

    def delay(self, now: float) -> float:
        due = max(self._due, now)
        self._due = due + self.interval
        return max(0.0, due - now - self.tolerance)


def signature(decision: Decision) -> tuple[Any, ...]:
    """What makes two decisions the same for the people reading Events: the clusters chosen,
    the outcome, and each cluster's standing and category, but not the numbers."""
    return (decision.outcome, decision.nominate, decision.standings)


def nomination_message(key: str, decision: Decision) -> str:
    """Where a workload was nominated and why, and the first few clusters not chosen with
    their reasons: Events hold 1 KiB, so the rest are left to `controller explain`. Only
    those shown have their verdict made and their reason written out."""
    message = decision.summary
    others = [c for c, _, _ in decision.standings if c not in decision.nominate]
    if others:
        shown = [f"{c} ({decision.verdict(c).reason})" for c in others[:EVENT_CLUSTERS_SHOWN]]
        more = len(others) - len(shown)
        message += "; not chosen: " + "; ".join(shown)
        if more:
            message += f"; and {more} more (python -m controller explain {key})"
    return message


def _now() -> datetime:
    return datetime.now(UTC)


class EventRecorder:
    """What was last said on each object, the Events waiting to go, and their sending."""

    def __init__(
        self,
        manager: Kube,
        metrics: Metrics,
        identity: str,
        is_leader: Callable[[], bool],
    ) -> None:
        self.manager = manager
        self.metrics = metrics
        self.identity = identity
        self.is_leader = is_leader
        self.queue: asyncio.Queue[Queued] = asyncio.Queue(maxsize=EVENT_BACKLOG)
        # What was last said on each workload, as a hash: only equality matters, and
        # 10,000 pending workloads' full messages would be megabytes.
        self.last: dict[str, int] = {}
        self._pace = Pace(EVENTS_PER_SECOND, EVENT_BURST)

    def forget(self, key: str) -> None:
        self.last.pop(key, None)

    async def say(
        self,
        obj: dict[str, Any],
        kind: str,
        reason: str,
        message: str,
        decision: Decision | None = None,
    ) -> None:
        """One Event per distinct decision on an object (or, without one, per distinct
        message), so resyncs do not flood it. A decision is the same while it nominates
        the same clusters and judges each the same way: the numbers in its message (free
        quota, headroom, how long a worker has been silent) change at every resync and
        would make every message new."""
        key = key_of(obj)
        said = hash((reason, signature(decision) if decision is not None else message))
        if not self.is_leader() or self.last.get(key) == said:
            return
        # Sent in the background, after the nomination itself: like client-go's recorder,
        # Events are best effort and must not slow down or block the writes that matter.
        # Queued as the few strings that make one, not as a body nor with the object (that
        # would keep a replaced workload alive): 10,000 waiting Events stay a few megabytes.
        meta = obj.get("metadata") or {}
        about = (
            obj.get("apiVersion", "kueue.x-k8s.io/v1beta2"),
            obj.get("kind", "Workload"),
            meta.get("name"),
            meta.get("namespace"),
            meta.get("uid"),
        )
        made = _now().strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            self.queue.put_nowait(
                (about, kind, reason, message[:EVENT_MESSAGE_LIMIT], made, time.monotonic())
            )
        except asyncio.QueueFull:
            self.metrics.write_errors.labels("event-dropped").inc()
            return
        self.last[key] = said

    def body(
        self, about: tuple[Any, ...], kind: str, reason: str, message: str, made: str
    ) -> dict[str, Any]:
        api_version, object_kind, name, namespace, uid = about
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "generateName": f"{name}.",
                # Events on cluster-scoped objects (policies) live in "default", as kubectl's do.
                "namespace": namespace or "default",
            },
            "involvedObject": {
                "apiVersion": api_version,
                "kind": object_kind,
                "name": name,
                "namespace": namespace,
                "uid": uid,
            },
            "type": kind,
            "reason": reason,
            "message": message,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.identity,
            "firstTimestamp": made,
            "lastTimestamp": made,
            "count": 1,
        }

    async def send(self, writes_waiting: Callable[[], bool]) -> None:
        """Sends queued Events for ever; `writes_waiting` says whether nominations wait to
        be decided or written, which go first."""
        while True:
            about, kind, reason, message, made, queued = await self.queue.get()
            # A bounded rate overall, whatever the backlog: a burst, then a steady pace.
            wait = self._pace.delay(time.monotonic())
            if wait > 0:
                await asyncio.sleep(wait)
            # The API server's capacity goes to the writes that matter first: each Event
            # costs it as much as a nomination. A backlog delays Events by at most
            # EVENT_MAX_DELAY_SECONDS; with no backlog they go at once.
            while writes_waiting() and time.monotonic() - queued < EVENT_MAX_DELAY_SECONDS:
                await asyncio.sleep(0.05)
            body = self.body(about, kind, reason, message, made)
            try:
                await self.manager.create(
                    EVENTS, body, body["metadata"]["namespace"], answer="none"
                )
            except ApiError as exc:
                self.metrics.write_errors.labels("event").inc()
                log.warning("event on %s/%s: %s", about[3], about[2], exc)
