"""What the dispatcher remembers of its own decisions, so that a workload is not decided
again when nothing it was decided on changed: our nominations coming back through the
watch, workloads nominated where they fit, and writes the API server refused."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from controller.nominations import same_but_nominations
from controller.workloads import parse_time


def quota_reserved_at(workload: dict[str, Any]) -> datetime | None:
    for cond in (workload.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "QuotaReserved" and cond.get("status") == "True":
            return parse_time(cond.get("lastTransitionTime"))
    return None


class Decided:
    """`widen_period(wl)`: the seconds after which the policy in force for `wl` widens its
    nominations (0: never); a settled workload is decided again when widening is due."""

    def __init__(self, widen_period: Callable[[dict[str, Any]], float]) -> None:
        self.widen_period = widen_period
        # Our own nominations coming back through the watch: key -> (the workload as it was
        # decided on, the clusters written, the fleet key when it settles). Nothing else
        # changed, so no new decision.
        self.echo: dict[str, tuple[dict[str, Any], tuple[str, ...], Any]] = {}
        # Workloads nominated where they fit, and what that was decided on: key -> (the
        # workload, the fleet key, when widening is due). A resync skips them while all
        # three hold; 10,000 of them waiting for admission are otherwise 10,000 decisions
        # that find what they found before.
        self.settled: dict[str, tuple[dict[str, Any], Any, float]] = {}
        # Workloads whose nomination the API server refused (conflict, invalid): key -> the
        # resourceVersion it was decided on. Decided again only on a newer version.
        self.refused: dict[str, str | None] = {}

    def keys(self) -> set[str]:
        return {*self.echo, *self.settled, *self.refused}

    def forget(self, key: str) -> None:
        self.echo.pop(key, None)
        self.refused.pop(key, None)
        self.settled.pop(key, None)

    def settle(self, key: str, wl: dict[str, Any], fleet: Any) -> None:
        """Remember that `wl` is nominated where it fits, until widening is due."""
        since = quota_reserved_at(wl)
        period = self.widen_period(wl)
        due = math.inf
        if period > 0 and since is not None:
            waited = (datetime.now(UTC) - since).total_seconds()
            due = time.monotonic() + period - waited % period
        self.settled[key] = (wl, fleet, due)

    def is_settled(self, key: str, wl: dict[str, Any], fleet: Any, now: float) -> bool:
        """Nominated where it fits, decided on this very workload and fleet, and widening
        is not due: deciding it again would find what was found before."""
        settled = self.settled.get(key)
        return bool(settled and settled[0] is wl and settled[1] == fleet and now < settled[2])

    def expect_echo(
        self, key: str, decided_on: dict[str, Any], written: tuple[str, ...], fleet: Any
    ) -> None:
        """Our nomination of `written` on `decided_on` was made; `fleet`: the fleet key of
        a decision that nominated where the workload fits (None otherwise), so its echo
        settles it."""
        self.echo[key] = (decided_on, written, fleet)

    def is_echo(self, key: str, obj: dict[str, Any]) -> bool:
        """Is this change only the nomination we wrote? Deciding again would find the same
        (the fleet's changes are looked at by the resync), at a cost per nomination."""
        decided_on, written, fleet = self.echo.pop(key, (None, (), None))
        if decided_on is None:
            return False
        now_nominated = tuple((obj.get("status") or {}).get("nominatedClusterNames") or ())
        if now_nominated != written or not same_but_nominations(decided_on, obj):
            return False
        if fleet is not None:
            self.settle(key, obj, fleet)
        return True

    def refuse(self, key: str, version: str | None) -> None:
        self.refused[key] = version

    def still_refused(self, key: str, version: str | None) -> bool:
        """A write decided on `version` was refused: its successor, when the watch brings
        it, is looked at (its change enqueues it). Any other version clears the refusal."""
        refused = self.refused.pop(key, None)
        if refused is not None and refused == version:
            self.refused[key] = refused
            return True
        return False
