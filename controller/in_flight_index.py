"""The index of demand in flight that the policy reads: nominated but not admitted, summed
per (cluster, ClusterQueue, flavor), with a log of the clusters whose totals changed so a
board of columns (controller/judging_board.py) catches up instead of starting again. What
the dispatcher counts in flight, and until when, is decided in controller/in_flight.py,
which keeps this index up to date. Pure: no I/O, no clock."""

from __future__ import annotations

from collections.abc import Iterable

from controller.model import InFlight, Resources

_NO_USAGE: dict[str, Resources] = {}
CHANGES_KEPT = 100_000  # in-flight changes remembered for memos to catch up from


class InFlightIndex:
    """Demand nominated but not yet admitted, summed per (cluster, ClusterQueue, flavor) as
    nominations come and go, so a decision reads its totals instead of scanning every
    in-flight workload (the scan was 63% of decision time at 1,000 pending)."""

    def __init__(self) -> None:
        self._by_workload: dict[str, list[InFlight]] = {}
        self._totals: dict[tuple[str, str], dict[str, Resources]] = {}
        # How many workloads' demand is counted per (cluster, ClusterQueue): the copies that
        # one worker's MultiKueue client still has to carry (controller/judging.py
        # CLIENT_BURST).
        self._counts: dict[tuple[str, str], int] = {}
        # The clusters whose demand in flight changed, in order: a memo catches up from
        # where it was. `_dropped` entries were forgotten to keep the log bounded.
        self._changes: list[str] = []
        self._dropped = 0

    @classmethod
    def of(cls, items: Iterable[InFlight]) -> InFlightIndex:
        index = cls()
        for item in items:
            index.add(item)
        return index

    def _apply(self, item: InFlight, sign: int) -> None:
        self._changes.append(item.cluster)
        if len(self._changes) > CHANGES_KEPT:
            half = len(self._changes) // 2
            del self._changes[:half]
            self._dropped += half
        where = (item.cluster, item.cluster_queue)
        self._counts[where] = self._counts.get(where, 0) + sign
        bucket = self._totals.setdefault(where, {})
        for resource, amount in item.requests.items():
            flavor = item.flavors.get(resource)
            if flavor is not None:
                totals = bucket.setdefault(flavor, {})
                totals[resource] = totals.get(resource, 0) + sign * amount

    def add(self, item: InFlight) -> None:
        self._by_workload.setdefault(item.workload, []).append(item)
        self._apply(item, 1)

    def remove(self, workload: str) -> None:
        for item in self._by_workload.pop(workload, []):
            self._apply(item, -1)

    def replace(self, workload: str, items: Iterable[InFlight]) -> None:
        self.remove(workload)
        for item in items:
            self.add(item)

    @property
    def position(self) -> int:
        """How many changes there have been."""
        return self._dropped + len(self._changes)

    def knows(self, position: int) -> bool:
        """Whether the changes since `position` are still known."""
        return position >= self._dropped

    def changed_since(self, position: int) -> set[str]:
        return set(self._changes[position - self._dropped :])

    def workloads(self) -> list[str]:
        """The keys of the workloads whose demand is counted."""
        return list(self._by_workload)

    def items(self, workload: str) -> tuple[InFlight, ...]:
        """What is counted of `workload`, one entry per cluster."""
        return tuple(self._by_workload.get(workload, ()))

    def drop(self, workload: str, cluster: str) -> bool:
        """Stop counting `workload`'s demand on `cluster` (only there); whether any was."""
        items = self._by_workload.get(workload)
        if not items or not any(i.cluster == cluster for i in items):
            return False
        self.replace(workload, [i for i in items if i.cluster != cluster])
        return True

    def clusters_of(self, workload: str) -> set[str]:
        """The clusters where `workload`'s own demand is in flight."""
        return {i.cluster for i in self._by_workload.get(workload, ())}

    def __len__(self) -> int:
        return len(self._by_workload)

    def totals(self, cluster: str, cluster_queue: str) -> dict[str, Resources]:
        """flavor -> resource -> all the demand in flight there."""
        return self._totals.get((cluster, cluster_queue), _NO_USAGE)

    def count(self, cluster: str, cluster_queue: str, excluding: str = "") -> int:
        """How many workloads have demand in flight there, `excluding` not among them."""
        own = sum(
            1
            for i in self._by_workload.get(excluding, ())
            if i.cluster == cluster and i.cluster_queue == cluster_queue
        )
        return self._counts.get((cluster, cluster_queue), 0) - own

    def usage(self, cluster: str, cluster_queue: str, excluding: str) -> dict[str, Resources]:
        """flavor -> resource -> demand in flight there, not counting `excluding`'s own."""
        totals = self.totals(cluster, cluster_queue)
        own = [
            i
            for i in self._by_workload.get(excluding, ())
            if i.cluster == cluster and i.cluster_queue == cluster_queue
        ]
        if not own:
            return totals
        adjusted = {flavor: dict(resources) for flavor, resources in totals.items()}
        for item in own:
            for resource, amount in item.requests.items():
                flavor = item.flavors.get(resource)
                if flavor is not None:
                    adjusted[flavor][resource] -= amount
        return adjusted
