"""Which workload is decided next: two deduplicated queues. Workloads that just changed
come first; re-evaluations of pending ones (the fleet changed, time passed) wait behind
them, so a burst of worker updates never delays a new workload behind thousands of
unchanged ones."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable


class WorkQueue:
    def __init__(self) -> None:
        self.urgent: dict[str, None] = {}
        self.later: dict[str, None] = {}
        self._wake = asyncio.Event()

    def add(self, key: str) -> None:
        self.later.pop(key, None)
        self.urgent[key] = None
        self._wake.set()

    def add_later(self, keys: Iterable[str]) -> None:
        for key in keys:
            self.later[key] = None
        self._wake.set()

    def next(self) -> str | None:
        for queue in (self.urgent, self.later):
            if queue:
                key = next(iter(queue))
                del queue[key]
                return key
        return None

    async def wait(self, timeout: float) -> None:
        """Until something is added, or `timeout` seconds passed."""
        self._wake.clear()
        # asyncio.wait, not wait_for: on Python 3.11 wait_for loses a cancellation that
        # arrives as the wake-up does, and the dispatcher's stop() hangs.
        waiter = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait((waiter,), timeout=timeout)
        finally:
            waiter.cancel()
