"""The second judging engine: a board of columns, one per cluster, for the workloads of one
local queue that ask for the same resources; a workload is judged by reading numbers off
the columns, and only the clusters that need it are judged one by one (`judge`, in
controller/judging.py). Same judgement as controller/judging_each.py, a fraction of the
CPU at 100 clusters; controller/fit_memo.py keeps boards across decisions."""

from __future__ import annotations

from functools import partial
from typing import Any

from controller.fit import EMPTY, ZERO, Fit, fits_reason, queue_load
from controller.in_flight_index import InFlightIndex
from controller.judging import (
    CAN_PREEMPT,
    CLIENT_BURST,
    FITS,
    MAY_PREEMPT,
    NO_PREEMPTION,
    OUT,
    STUCK,
    WAITS,
    Judgement,
    Key,
    Ranked,
    can_preempt,
    crowd,
    fit_key,
    judge,
    may_preempt,
    pick,
    screen,
    smallest,
    stuck,
    verdict_on,
)
from controller.model import (
    FlavorCapacity,
    Policy,
    QueueCapacity,
    Resources,
    Standing,
    Verdict,
    WorkerView,
    WorkloadView,
)

_INF = float("inf")
_BY_ITSELF = float("nan")  # in a shortfall column: judged by itself instead
_UNRANKED = (_INF,)  # ranks above any (device quota, -headroom)


def _first_flavors(
    queue: QueueCapacity, wanted: tuple[str, ...]
) -> tuple[list[FlavorCapacity], bool] | None:
    """The first flavor of the resource group of each wanted resource, and whether any of
    those groups has more flavors; None when a resource is in no group's first flavor or
    in several (no valid ClusterQueue does either), which leaves the cluster to be judged
    by itself."""
    flavors, more = [], False
    for r in wanted:
        groups = [group for group in queue.groups if r in group[0].nominal]
        if len(groups) != 1:
            return None
        flavors.append(groups[0][0])
        more = more or len(groups[0]) > 1
    return flavors, more


class Board:
    """The clusters of one config for the workloads of one local queue that ask for the same
    resources, on one set of worker views, one policy and one in-flight index: what does not
    depend on the amounts is worked out once (which clusters the filter keeps; for the
    others, resource by resource, the flavor the request lands on, its quota, and what is
    free of it), so that a decision, even on a workload of a shape never seen before, reads
    columns of numbers instead of judging every cluster again. At 100 clusters judging each
    took ~10 µs of CPU per cluster; a column takes a fraction of a microsecond.

    What is free follows the in-flight index: only the clusters whose demand in flight
    changed since are read again. A decision keeps the columns it was made on (they are
    copied, not changed, when demand moves), so its verdicts, made only when read, are the
    ones it was decided on.

    Where the workload lands is certain in a group of one flavor, or in the first flavor
    when it fits there: a cluster with a group of several flavors that it does not fit in at
    the first is judged by itself, as are the clusters it is nominated to or has demand in
    flight on (its own share changes the answer there)."""

    def __init__(
        self,
        local_queue: str,
        wanted: tuple[str, ...],
        names: list[str],
        workers: dict[str, WorkerView],
        policy: Policy,
        in_flight: InFlightIndex,
    ) -> None:
        self.local_queue, self.wanted, self.names = local_queue, wanted, names
        self.workers, self.policy, self.index = workers, policy, in_flight
        self.seen = in_flight.position
        self.position = {name: order for order, name in reversed(list(enumerate(names)))}
        self.out: dict[int, Verdict] = {}  # filtered: the same for every workload here
        self.alone: list[int] = []  # places of the clusters always judged by themselves
        kept: list[tuple[bool, int, QueueCapacity, list[FlavorCapacity], bool]] = []
        unique = len(self.position) == len(names)
        for order, name in enumerate(names):
            category, reason, queue = screen(workers.get(name), local_queue, wanted, policy)
            if queue is None:
                self.out[order] = Verdict(name, "filtered", reason, category=category)
                continue
            layout = _first_flavors(queue, wanted) if unique else None
            if layout is None:
                self.alone.append(order)
            else:
                # Not nominated there (those are judged by themselves), so all its pending
                # workloads are ahead.
                stuck = bool(queue.strict_fifo and queue.pending)
                kept.append((stuck, order, queue, *layout))
        # The columns: one entry per cluster kept, in config order, but those whose
        # StrictFIFO queue has workloads pending (nothing behind the head gets in) last:
        # the first `open` are where the workload may fit.
        kept.sort(key=lambda c: c[:2])
        self.open = sum(1 for c in kept if not c[0])
        self.orders = [c[1] for c in kept]
        self.cluster = [names[c[1]] for c in kept]
        self.queues = [c[2] for c in kept]
        # Where the workload waits, how promising each column is before the workload's
        # priority and shortfall are known: MAY_PREEMPT columns are checked when ranked,
        # and those that can preempt for it become CAN_PREEMPT.
        self.first = [
            STUCK if c[0] else MAY_PREEMPT if may_preempt(c[2]) else NO_PREEMPTION for c in kept
        ]
        self.flavor = [[c[3][j].name for c in kept] for j in range(len(wanted))]
        self.nominal = [[c[3][j].nominal[r] for c in kept] for j, r in enumerate(wanted)]
        self.reserved = [[c[3][j].reserved.get(r, 0) for c in kept] for j, r in enumerate(wanted)]
        self.smallest = [min(column, default=0) for column in self.nominal]
        self.several = [k for k, c in enumerate(kept) if c[4]]  # groups of several flavors
        # Where the workload lands when it fits, as Fit lists it (group by group).
        self.placed = [
            {r: group[0].name for group in c[2].groups for r in wanted if r in group[0].nominal}
            for c in kept
        ]
        devices = [j for j, r in enumerate(wanted) if "/" in r]  # extended resources
        self.devices = bool(devices)
        # The smallest quota of a requested device, where the workload lands (Fit's
        # device_quota when it fits).
        self.device = [
            min((self.nominal[j][k] for j in devices), default=None) for k in range(len(kept))
        ]
        self.column = {name: k for k, name in enumerate(self.cluster)}
        self.free = [[0] * len(kept) for _ in wanted]
        self.counts = [0] * len(kept)  # nominations in flight there
        for k in range(len(kept)):
            self._read_free(k)
        self.loads: dict[int, float] = {}  # for LeastLoaded, read when ranked

    def holds(
        self,
        names: list[str],
        workers: dict[str, WorkerView],
        policy: Policy,
        in_flight: InFlightIndex,
    ) -> bool:
        return (
            self.workers is workers
            and self.index is in_flight
            and self.names == names
            and (self.policy is policy or self.policy == policy)
            and in_flight.knows(self.seen)
        )

    def _read_free(self, k: int) -> None:
        cluster, queue = self.cluster[k], self.queues[k].name
        used = self.index.totals(cluster, queue)
        # Not the workload's own: where it has demand in flight it is judged by itself.
        self.counts[k] = self.index.count(cluster, queue)
        for j, r in enumerate(self.wanted):
            flavor = used.get(self.flavor[j][k]) or EMPTY
            self.free[j][k] = self.nominal[j][k] - self.reserved[j][k] - flavor.get(r, ZERO)

    def _catch_up(self) -> None:
        index = self.index
        if self.seen == index.position:
            return
        changed = [self.column[c] for c in index.changed_since(self.seen) if c in self.column]
        self.seen = index.position
        if changed:
            self.free = [column.copy() for column in self.free]  # decisions keep theirs
            self.counts = self.counts.copy()
            for k in changed:
                self._read_free(k)
                self.loads.pop(k, None)

    def shortfall(self, amounts: list[int]) -> list[float]:
        """Per column, what Fit computes: the largest share of a flavor's quota the
        workload is short of (<= 0: it fits, and its negation is the least share left free
        after it), inf where it never fits."""
        short: list[float] = []
        for j, (a, nominal, free) in enumerate(zip(amounts, self.nominal, self.free, strict=True)):
            columns = zip(nominal, free, strict=True)
            if a > self.smallest[j]:  # too large for some
                column = [(a - f) / n if n >= a else _INF for n, f in columns]
            else:
                column = [(a - f) / n for n, f in columns]
            short = [s if s > r else r for s, r in zip(short, column, strict=True)] if j else column
        return short

    def judge(self, workload: WorkloadView) -> Judgement:
        self._catch_up()
        return BoardJudged(self, workload)

    def load(self, k: int) -> float:
        if k not in self.loads:
            queue = self.queues[k]
            self.loads[k] = queue_load(queue, self.index.totals(self.cluster[k], queue.name))
        return self.loads[k]

    def fit_key(self, k: int, s: float, counts: list[int]) -> Key:
        return fit_key(self.policy.strategy, min(1.0, 0.0 - s), self.device[k], counts[k])

    def verdict(
        self, k: int, s: float, free: list[list[int]], counts: list[int], workload: WorkloadView
    ) -> Verdict:
        """Column `k`'s verdict on `workload`, short `s`, with what was `free` then and the
        nominations in flight then (`counts`)."""
        name = self.cluster[k]
        if s <= 0.0 and k < self.open:
            headroom = min(1.0, 0.0 - s)
            placed, shown = self.placed[k], counts[k] if crowd(counts[k]) else 0
            why = partial(fits_reason, placed, headroom, shown)
            return Verdict(name, "fits", why, headroom, placed)
        used: dict[str, Resources] = {}
        for j, r in enumerate(self.wanted):
            amount = self.nominal[j][k] - self.reserved[j][k] - free[j][k]
            used.setdefault(self.flavor[j][k], {})[r] = amount
        queue = self.queues[k]
        fit = Fit(queue, workload.requests, used)
        return verdict_on(name, queue, fit, stuck(queue, name, workload) if fit.possible else 0)[0]


class BoardJudged:
    """One workload judged from a board: the columns at once, the rest one by one."""

    def __init__(self, board: Board, workload: WorkloadView) -> None:
        self.board, self.workload, self.free = board, workload, board.free
        self.counts = board.counts
        self.position = board.position
        self.amounts = [workload.requests[r] for r in board.wanted]
        short = board.shortfall(self.amounts)
        # Judged by themselves: the clusters always so, those with a group of several
        # flavors the workload does not fit in at the first, and those where its own share
        # counts.
        alone = list(board.alone)
        for k in board.several:
            if short[k] > 0.0:
                alone.append(board.orders[k])
                short[k] = _BY_ITSELF
        own = set(workload.nominated)
        own.update(board.index.clusters_of(workload.key))
        for name in own:
            k = board.column.get(name)
            if k is not None and short[k] == short[k]:  # not by itself already (NaN)
                alone.append(board.orders[k])
                short[k] = _BY_ITSELF
        self.short = short
        names = board.names
        self.exact = {
            order: judge(
                names[order],
                board.workers.get(names[order]),
                board.local_queue,
                board.wanted,
                workload,
                board.policy,
                board.index,
            )
            for order in alone
        }
        self.exact_fitting = [
            (j.key, order, names[order]) for order, j in self.exact.items() if j.standing == FITS
        ]
        # Each open column's rank where the workload fits, ordered as its key (fit_key),
        # unranked where it does not: in config order, the first of the smallest is the best.
        opened = short[: board.open]
        strategy = board.policy.strategy
        # Floats, or (device quota, -headroom) pairs: compared in C, not built as keys.
        self.rank: list[Any]
        self.unranked: Any
        if strategy == "MostFreeQuota" and board.devices:
            self.unranked = _UNRANKED
            self.rank = [
                (d, -(h if (h := 0.0 - s) < 1.0 else 1.0)) if s <= 0.0 else _UNRANKED
                for s, d in zip(opened, board.device[: board.open], strict=True)
            ]
        else:
            self.unranked = _INF
            if strategy == "MostFreeQuota":
                self.rank = [
                    -(h if (h := 0.0 - s) < 1.0 else 1.0) if s <= 0.0 else _INF for s in opened
                ]
            elif strategy == "BestFit":
                self.rank = [
                    (h if (h := 0.0 - s) < 1.0 else 1.0) if s <= 0.0 else _INF for s in opened
                ]
            else:
                self.rank = [0.0 if s <= 0.0 else _INF for s in opened]
        counts = self.counts[: board.open]
        if counts and max(counts) >= CLIENT_BURST:
            # Ranked by tens of nominations in flight first (fit_key), then as above.
            self.rank = [
                (c // CLIENT_BURST, r) if r != self.unranked else _UNRANKED
                for c, r in zip(counts, self.rank, strict=True)
            ]
            self.unranked = _UNRANKED
        self.top = min(self.rank, default=self.unranked)

    def fits(self) -> bool:
        return self.top != self.unranked or bool(self.exact_fitting)

    def best(self, count: int) -> list[Ranked]:
        board, short = self.board, self.short
        ranked = [
            (board.fit_key(k, short[k], self.counts), board.orders[k], board.cluster[k])
            for k in pick(self.rank, self.top, self.unranked, count)
        ]
        return smallest(count, ranked + self.exact_fitting) if self.exact_fitting else ranked

    def waits(self) -> bool:
        short = self.short
        return (
            any(0.0 < s < _INF for s in short)
            or any(s <= 0.0 for s in short[self.board.open :])  # fits, behind a stuck head
            or any(j.standing == WAITS for j in self.exact.values())
        )

    def best_waiting(self, count: int) -> list[Ranked]:
        """The columns where the workload waits (short of quota, or behind a stuck head),
        ranked by the first two parts of their key (`_wait_key`), and those judged by
        themselves."""
        board = self.board
        # A queue that preempts, where the workload is short of quota: can it, for this one?
        first = list(board.first)
        for k, (f, s) in enumerate(zip(board.first, self.short, strict=True)):
            if f == MAY_PREEMPT and 0.0 < s < _INF and self._can_preempt(k):
                first[k] = CAN_PREEMPT
        columns = zip(self.short, first, strict=True)
        if board.policy.when_nothing_fits == "WaitOnBest":
            rank = [
                (f, s if s > 0.0 else 0.0)
                if 0.0 < s < _INF or (s <= 0.0 and f == STUCK)
                else _UNRANKED
                for s, f in columns
            ]
        else:
            rank = [
                (f, board.load(k)) if 0.0 < s < _INF or (s <= 0.0 and f == STUCK) else _UNRANKED
                for k, (s, f) in enumerate(columns)
            ]
        ranked = [
            ((*rank[k], 0.0), board.orders[k], board.cluster[k])
            for k in pick(rank, min(rank, default=_UNRANKED), _UNRANKED, count)
        ]
        ranked += [
            (j.key, order, board.names[order])
            for order, j in self.exact.items()
            if j.standing == WAITS
        ]
        return smallest(count, ranked)

    def _can_preempt(self, k: int) -> bool:
        """can_preempt for column `k`, where the workload waits short of quota: what it is
        missing, resource by resource, in the flavor it lands on (what Fit finds)."""
        board, free, queue = self.board, self.free, self.board.queues[k]
        if queue.held is None:
            return True
        missing = {
            (board.flavor[j][k], r): a - free[j][k]
            for j, (r, a) in enumerate(zip(board.wanted, self.amounts, strict=True))
            if a > free[j][k]
        }
        return can_preempt(queue, self.workload.priority, missing)

    def standing(self, name: str) -> int:
        order = self.position[name]
        if order in self.board.out:
            return OUT
        if order in self.exact:
            return self.exact[order].standing
        k = self.board.column[name]
        s = self.short[k]
        if s <= 0.0:
            return FITS if k < self.board.open else WAITS
        return WAITS if s < _INF else OUT

    def preempts_now(self, name: str) -> bool:
        order = self.position[name]
        if order in self.board.out:
            return False
        if order in self.exact:
            j = self.exact[order]
            return j.standing == WAITS and j.key[0] == CAN_PREEMPT
        k = self.board.column[name]
        return (
            self.board.first[k] == MAY_PREEMPT and 0.0 < self.short[k] < _INF
        ) and self._can_preempt(k)

    def verdict(self, name: str) -> Verdict:
        return self._at(self.position[name])

    def _at(self, order: int) -> Verdict:
        board = self.board
        if order in board.out:
            return board.out[order]
        if order in self.exact:
            return self.exact[order].verdict
        k = board.column[board.names[order]]
        return board.verdict(k, self.short[k], self.free, self.counts, self.workload)

    def verdicts(self) -> tuple[Verdict, ...]:
        return tuple(self._at(order) for order in range(len(self.board.names)))

    def standings(self) -> tuple[Standing, ...]:
        """What `verdicts` would say of each cluster's standing, read from the columns
        without making the verdicts."""
        board, short, exact = self.board, self.short, self.exact
        said = []
        for order, name in enumerate(board.names):
            if order in board.out:
                said.append((name, "filtered", board.out[order].category))
            elif order in exact:
                v = exact[order].verdict
                said.append((name, v.status, v.category))
            else:
                k = board.column[name]
                s = short[k]
                if s <= 0.0:
                    said.append((name, "fits" if k < board.open else "waits", ""))
                elif s < _INF:
                    said.append((name, "waits", ""))
                else:
                    said.append((name, "filtered", "too-large"))
        return tuple(said)
