"""The fit cache: boards of columns (controller/judging_board.py) kept from one decision to
the next, bounded. Holds state across calls, so it is not pure, but it never changes a
decision: `decide` gives the same with or without it."""

from __future__ import annotations

from controller.in_flight_index import InFlightIndex
from controller.judging_board import Board
from controller.model import Policy, WorkerView


class FitMemo:
    """Boards kept across decisions, one per local queue and set of requested resources:
    the controller decides workload after workload on the same worker views, and between
    two decisions the demand in flight changes on one or two clusters only. A new worker
    view, policy, config or in-flight index starts a board afresh. `decide` gives the same
    decision with or without a memo."""

    # Beyond it, start again: a bounded cache (tens of KB each at 100 clusters), whatever
    # the workloads.
    MAX_BOARDS = 64

    def __init__(self) -> None:
        self._boards: dict[tuple[str, tuple[str, ...]], Board] = {}

    def board(
        self,
        local_queue: str,
        wanted: tuple[str, ...],
        names: list[str],
        workers: dict[str, WorkerView],
        policy: Policy,
        in_flight: InFlightIndex,
    ) -> Board:
        board = self._boards.get((local_queue, wanted))
        if board is None or not board.holds(names, workers, policy, in_flight):
            if len(self._boards) >= self.MAX_BOARDS:
                self._boards.clear()
            board = Board(local_queue, wanted, list(names), workers, policy, in_flight)
            self._boards[(local_queue, wanted)] = board
        return board
