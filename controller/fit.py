"""How one workload's requests land on one worker's ClusterQueue: the arithmetic of fit.
Pure: plain data in, plain data out.

Fit is judged against the worker's Kueue quota (nominal minus reserved minus what is
already in flight to it), the way Kueue on that worker will judge it: resource group by
resource group, the first flavor in order that holds every requested resource of the
group. Borrowing from a cohort is not counted: the estimate stays on the safe side. Both
judging engines (controller/judging_each.py, controller/judging_board.py) read it, and
the words a verdict says of amounts (`show`) are made here, where the amounts are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from controller.model import MILLI, FlavorCapacity, QueueCapacity, Resources

# Shared defaults of the fit arithmetic (read-only: never written through).
ZERO = 0
EMPTY: Resources = {}
Missing = dict[tuple[str, str], int]  # (flavor, resource) -> amount short


_BINARY_UNITS = (("Ti", 1024**4), ("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024))


def show(resource: str, amount: int) -> str:
    """Milli-unit amounts in the units people write in a quota or a pod: bytes in the
    largest binary unit that keeps a number of at least 1 (64Mi, 1.5Gi), cores as a number
    or in millicores below one (500m), other resources as plain counts."""
    if resource == "memory" or resource.endswith("storage") or resource.startswith("hugepages-"):
        size = amount / MILLI
        for unit, factor in _BINARY_UNITS:
            if size >= factor:
                return f"{size / factor:.4g}{unit}"
        return f"{size:.4g}"
    if resource == "cpu" and amount % MILLI:
        return f"{amount}m"
    return f"{amount / MILLI:.6g}"


def _free(nominal: Resources, reserved: Resources, in_flight: Resources, resource: str) -> int:
    return (
        nominal.get(resource, ZERO) - reserved.get(resource, ZERO) - in_flight.get(resource, ZERO)
    )


def _less(reserved: Resources, own: Resources) -> Resources:
    """A reservation without what may be the workload's own share of it."""
    return {r: max(a - own.get(r, ZERO), 0) for r, a in reserved.items()}


class Fit:
    """How a workload's requests land on one ClusterQueue. `own`: demand of the workload
    that the queue's reservation may already include (it is admitting there), counted as
    the workload's own rather than as competition."""

    def __init__(
        self,
        queue: QueueCapacity,
        requests: Resources,
        in_flight: dict[str, Resources],
        own: Resources = EMPTY,
    ) -> None:
        self.own = own
        self.flavors: dict[str, str] = {}
        self.fits = True
        self.possible = True
        self.headroom = 1.0  # smallest share of a flavor left free after placement
        # The smallest quota of a device the workload requests (extended resources:
        # nvidia.com/gpu, google.com/tpu) in the flavor it lands on; None when it requests
        # none.
        self.device_quota: int | None = None
        self.deficit = 0.0  # largest share of a flavor missing to fit now
        # Where it does not fit now: (flavor, resource) -> the amount beyond what is free, in
        # the flavor each resource would land on.
        self.missing: Missing = {}
        self.blocker: str | Callable[[], str] = ""
        for group in queue.groups:
            wanted = {r: a for r, a in requests.items() if r in group[0].nominal and a > 0}
            if wanted:
                self._place(group, wanted, in_flight)

    def _place(
        self, group: Sequence[FlavorCapacity], wanted: Resources, in_flight: dict[str, Resources]
    ) -> None:
        # One pass per flavor, in order (as Kueue tries them): the largest share of the
        # flavor's quota the workload is short of. <= 0 means it fits, and then its
        # negation is the smallest share left free after placement.
        best: tuple[float, FlavorCapacity, str] | None = None
        own = self.own
        for flavor in group:
            nominal = flavor.nominal
            reserved = _less(flavor.reserved, own) if own else flavor.reserved
            used = in_flight.get(flavor.name) or EMPTY
            short, tightest = -1.0, ""
            for r, amount in wanted.items():
                n = nominal.get(r, 0)
                if n < amount:
                    break  # this flavor can never hold it
                ratio = (amount - (n - reserved.get(r, 0) - used.get(r, 0))) / n
                if ratio > short or not tightest:
                    short, tightest = ratio, r
            else:
                if short <= 0:
                    self.headroom = min(self.headroom, 0.0 - short)  # never -0.0
                    for r in wanted:
                        if "/" in r:  # an extended resource: a device
                            n = nominal[r]
                            if self.device_quota is None or n < self.device_quota:
                                self.device_quota = n
                    for r in wanted:
                        self.flavors[r] = flavor.name
                    return
                if best is None or short < best[0]:
                    best = (short, flavor, tightest)
        self.fits = False
        if best is None:
            self.possible = False
            biggest = {r: max(f.nominal.get(r, 0) for f in group) for r in wanted}
            larger = [r for r, a in wanted.items() if biggest[r] < a]
            if larger:
                r = larger[0]
                self.blocker = (
                    f"never fits: needs {r} {show(r, wanted[r])}, the largest flavor "
                    f"offers {show(r, biggest[r])}"
                )
            else:
                # Each resource fits in some flavor, but none holds them all: Kueue assigns
                # one flavor per resource group, so this is as final.
                needs = " and ".join(f"{r} {show(r, a)}" for r, a in wanted.items())
                flavors = ", ".join(f.name for f in group)
                self.blocker = f"never fits: no flavor of {flavors} offers {needs} at once"
            return
        short, flavor, r = best
        self.deficit = max(self.deficit, short)
        reserved = _less(flavor.reserved, own) if own else flavor.reserved
        used = in_flight.get(flavor.name) or EMPTY
        for res, amount in wanted.items():
            beyond = amount - _free(flavor.nominal, reserved, used, res)
            if beyond > 0:
                self.missing[(flavor.name, res)] = beyond
        free = max(_free(flavor.nominal, reserved, used, r), 0)
        # The numbers now, the words only if someone reads them.
        self.blocker = partial(_full_now, r, wanted[r], free, flavor.name)
        for res in wanted:
            self.flavors[res] = flavor.name


def _full_now(resource: str, wanted: int, free: int, flavor: str) -> str:
    return (
        f"full now: needs {resource} {show(resource, wanted)}, {show(resource, free)} free "
        f"in {flavor}"
    )


def fits_reason(flavors: dict[str, str], headroom: float, crowded: int = 0) -> str:
    """Why it fits; `crowded`: the other nominations in flight there, where they are enough
    to rank it after clusters with fewer (controller/judging.py CLIENT_BURST), else 0."""
    where = ", ".join(sorted(set(flavors.values()))) or "no quota needed"
    why = f"fits in {where}; {headroom:.0%} of the tightest flavor left free after it"
    if crowded:
        why += (
            f"; {crowded} other nominations in flight here, so after workers with fewer "
            "(Kueue's client to a worker carries 10 at a time)"
        )
    return why


def queue_load(queue: QueueCapacity, in_flight: dict[str, Resources]) -> float:
    """Share of the queue's quota in use or in flight, over all flavors and resources."""
    shares = [
        (f.reserved.get(r, ZERO) + in_flight.get(f.name, {}).get(r, ZERO)) / nominal
        for group in queue.groups
        for f in group
        for r, nominal in f.nominal.items()
        if nominal > 0
    ]
    return max(shares, default=0.0)
