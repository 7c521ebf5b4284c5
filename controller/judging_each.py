"""The first judging engine: every cluster judged from scratch, one by one (`judge`, in
controller/judging.py). The decision uses it when no memo is given, or the workload asks
for no resource; the board (controller/judging_board.py) must agree with it."""

from __future__ import annotations

import heapq

from controller.judging import (
    CAN_PREEMPT,
    FITS,
    WAITS,
    ClusterJudged,
    Ranked,
    smallest,
)
from controller.model import Standing, Verdict


class EachJudged:
    """Every cluster judged from scratch, one by one."""

    def __init__(self, names: list[str], judged: list[ClusterJudged]) -> None:
        # A cluster listed twice (no valid config does) counts at its first place.
        self.position = {name: order for order, name in reversed(list(enumerate(names)))}
        self.judged = judged
        self._fitting = [
            (j.key, o, j.verdict.cluster) for o, j in enumerate(judged) if j.standing == FITS
        ]
        self._waiting = [
            (j.key, o, j.verdict.cluster) for o, j in enumerate(judged) if j.standing == WAITS
        ]

    def fits(self) -> bool:
        return bool(self._fitting)

    def best(self, count: int) -> list[Ranked]:
        return smallest(count, self._fitting)

    def waits(self) -> bool:
        return bool(self._waiting)

    def best_waiting(self, count: int) -> list[Ranked]:
        return heapq.nsmallest(count, self._waiting)

    def standing(self, name: str) -> int:
        return self.judged[self.position[name]].standing

    def preempts_now(self, name: str) -> bool:
        j = self.judged[self.position[name]]
        return j.standing == WAITS and j.key[0] == CAN_PREEMPT

    def verdict(self, name: str) -> Verdict:
        return self.judged[self.position[name]].verdict

    def verdicts(self) -> tuple[Verdict, ...]:
        return tuple(j.verdict for j in self.judged)

    def standings(self) -> tuple[Standing, ...]:
        return tuple((v.cluster, v.status, v.category) for v in self.verdicts())
