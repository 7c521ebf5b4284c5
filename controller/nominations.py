"""Writing nominations: `status.nominatedClusterNames` on a manager Workload, by merge patch
on the status subresource, conditioned on the resourceVersion it was decided on; a bounded
number at once, at most one per workload."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from controller.kinds import WORKLOADS
from controller.kube import ApiError, Kube
from controller.metrics import Metrics

log = logging.getLogger("controller.nominations")


def nominated(wl: dict[str, Any], clusters: list[str], version: str) -> dict[str, Any]:
    """The workload (as cached) that our nomination of `clusters` made at `version`: the
    patch carried the version it was decided on, so nothing else changed (Kueue v0.19.2's
    Workload mutating webhook is on CREATE only, and the fields the cache keeps that a
    status write changes are the nominations and the version)."""
    return {
        **wl,
        "metadata": {**(wl.get("metadata") or {}), "resourceVersion": version},
        "status": {**(wl.get("status") or {}), "nominatedClusterNames": clusters},
    }


def same_but_nominations(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Equal apart from status.nominatedClusterNames and the resourceVersion."""
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    if old.get("spec") != new.get("spec") or any(
        old_meta.get(k) != new_meta.get(k) for k in ("uid", "annotations")
    ):
        return False
    old_status, new_status = dict(old.get("status") or {}), dict(new.get("status") or {})
    old_status.pop("nominatedClusterNames", None)
    new_status.pop("nominatedClusterNames", None)
    return old_status == new_status


@dataclass(frozen=True)
class Written:
    """What became of one nomination write. `version`: the workload's new resourceVersion
    when it was made on a known one ("" when not), None when it was not made. `refused`:
    the API server refused the version it was decided on (conflict, invalid), so deciding
    again before the watch brings a newer one would repeat it. `again`: decide it again."""

    version: str | None
    refused: bool = False
    again: bool = False


class NominationWriter:
    """The writes under way: a bounded number at once, at most one per workload."""

    def __init__(self, manager: Kube, metrics: Metrics, concurrent: int) -> None:
        self.manager = manager
        self.metrics = metrics
        self.slots = asyncio.Semaphore(concurrent)
        self.writing: set[str] = set()
        self.tasks: set[asyncio.Task] = set()
        self._open: dict[str, asyncio.Task] = {}  # started, `done` not yet called

    async def start(
        self,
        key: str,
        write: Callable[[], Coroutine[Any, Any, None]],
        abandoned: Callable[[], None] = lambda: None,
    ) -> None:
        """Runs `write()` (which calls `done(key)` when its write is answered) in the
        background once a slot is free; made only then, so a stop while waiting for a
        slot leaves no coroutine never awaited. A task cancelled before its first step
        (leadership lost in the same turn of the loop: `Dispatcher.stop_writing`) never
        runs its coroutine, `finally` included, so `done` is called for it here, and
        `abandoned` undoes what its caller counted; otherwise its slot would be lost and
        its workload never written again (a flapping leader starved of CPU did exactly
        that: tests/unit/test_dispatch_units.py)."""
        self.writing.add(key)
        await self.slots.acquire()
        task = asyncio.create_task(write())
        self._open[key] = task
        self.tasks.add(task)

        def finished(task: asyncio.Task) -> None:
            self.tasks.discard(task)
            if self._open.get(key) is task:
                self.done(key)
                abandoned()

        task.add_done_callback(finished)

    def done(self, key: str) -> None:
        self._open.pop(key, None)
        self.slots.release()
        self.writing.discard(key)

    async def write(self, wl: dict[str, Any], key: str, clusters: list[str]) -> Written:
        """The write, on the condition that the workload is still the one decided on: the
        patch carries its resourceVersion, which the API server checks (409 Conflict when
        it moved on). An eviction clears clusterName and the nominations, and on the external
        dispatcher path Kueue v0.19.2 uses the list as soon as the check is Pending again
        (nominateAndSynchronizeWorkers in
        pkg/controller/admissionchecks/multikueue/workload.go): a list decided before it
        must never land after it."""
        namespace, name = key.split("/", 1)
        version = (wl.get("metadata") or {}).get("resourceVersion")
        patch: dict[str, Any] = {"status": {"nominatedClusterNames": clusters}}
        if version:
            patch["metadata"] = {"resourceVersion": version}
        try:
            answer = await self.manager.merge_patch(
                WORKLOADS, name, patch, namespace, status=True, answer="version"
            )
        except ApiError as exc:
            if exc.status in (404, 409, 422):
                # Gone, or changed under us (evicted, admitted meanwhile): look again, on
                # the state the watch brings, never retry the old list. Until the watch
                # has a newer version, deciding would only repeat the refused write.
                log.info("nominating %s: %s; deciding again on its next version", key, exc)
                gone = exc.status == 404
                return Written(None, refused=not gone, again=not gone)
            self.metrics.write_errors.labels("workload").inc()
            log.warning("nominating %s failed after retries: %s", key, exc)
            return Written(None, again=True)
        return Written((answer.get("metadata") or {}).get("resourceVersion", "") if version else "")
