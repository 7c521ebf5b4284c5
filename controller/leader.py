"""Leader election on a coordination.k8s.io Lease: one replica writes, the others keep
their caches warm and take over when the lease is not renewed in time.

Written here rather than taken from kubernetes_asyncio's `leaderelection` (`LeaseLock`,
in the pinned kubernetes_asyncio): its `LeaseLock.get` catches only `ApiException`, so a
connection error while renewing escapes `LeaderElection.run` without cancelling the
`onstarted_leading` task or calling `onstopped_leading`. The replica would go on writing
nominations as leader while its lease expires and another replica takes over: two
writers. tests/emulated/test_leader.py shows it against the library itself. Any failure to read or
renew the lease is retried until the renew deadline, and then this replica stops writing
until it holds the lease again (the rules are client-go's: see LeaderElector). It also
goes through the controller's own client (kube.py), not a second ApiClient and pool."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from controller.kinds import LEASES
from controller.kube import ApiError, Kube
from controller.settings import default_renew_deadline

log = logging.getLogger("controller.leader")


def _now() -> datetime:
    return datetime.now(UTC)


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class LeaderElector:
    """client-go's rules (k8s.io/client-go v0.36.3, tools/leaderelection/leaderelection.go):
    - a leader that has not renewed within `deadline` (shorter than the lease's duration)
      stops writing, and no single try may run past that deadline, whatever the client's
      own retries would do (`renew`: `context.WithTimeout(ctx, RenewDeadline)`);
    - another holder's lease has run out when it has not *changed* for its duration as
      measured by this replica's own clock since it last saw it change (`observedTime`,
      `isLeaseValid`), never by the holder's `renewTime`: a holder whose clock runs
      behind would otherwise look expired while it still writes (two writers)."""

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        name: str,
        identity: str,
        duration: float = 15.0,
        renew: float = 5.0,
        deadline: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.duration = duration
        self.renew = renew
        self.deadline = default_renew_deadline(duration) if deadline is None else deadline
        self.clock = clock
        self.is_leader = False
        self.changed = asyncio.Event()
        # The lease's spec as last read or written, and when (by `clock`) it last changed.
        self._observed: str | None = None
        self._observed_at = 0.0
        self._renewed_at: float | None = None  # last successful acquire or renew

    def _set(self, leader: bool) -> None:
        if leader != self.is_leader:
            log.info("%s %s the lease %s", self.identity, "holds" if leader else "lost", self.name)
            self.is_leader = leader
            self.changed.set()

    def _observe(self, spec: dict[str, Any]) -> None:
        raw = json.dumps(spec, sort_keys=True)
        if raw != self._observed:
            self._observed = raw
            self._observed_at = self.clock()

    def _held_by_another(self) -> bool:
        spec = json.loads(self._observed) if self._observed else {}
        return spec.get("holderIdentity") not in (self.identity, None, "")

    def leading(self) -> bool:
        """May this replica write now: it holds the lease and its last renewal is within
        the renew deadline. Judged at each call, not only at each try, so a leader whose
        loop is late (a busy event loop, a try that failed fast just before the deadline)
        stops at the deadline itself, not at its next try."""
        if not self.is_leader or self._renewed_at is None:
            return False
        return self.clock() - self._renewed_at < self.deadline

    async def run(self) -> None:
        while True:
            await self.step()
            # client-go retries every retry period but never past the renew deadline
            # (renew's PollImmediateUntil under context.WithTimeout(RenewDeadline)): a
            # leader's next try comes at the deadline at the latest, where it steps down.
            wait = self.renew
            if self.is_leader and self._renewed_at is not None:
                wait = min(wait, max(self._renewed_at + self.deadline - self.clock(), 0.0))
            await asyncio.sleep(wait)

    async def step(self) -> None:
        """One try to acquire or renew. A leader's try is cut off at its renew deadline,
        and a leader past it, or seeing another holder, stops writing."""
        if self.is_leader and self._renewed_at is not None:
            budget = self._renewed_at + self.deadline - self.clock()
        else:
            budget = self.deadline
        held = False
        try:
            async with asyncio.timeout(max(budget, 0.0)):
                held = await self.try_acquire()
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            log.warning("lease %s: no answer within the renew deadline", self.name)
        except Exception as exc:  # noqa: BLE001 (cannot tell: retry until the deadline)
            log.warning("lease %s: %s", self.name, exc)
        if held:
            self._renewed_at = self.clock()
            self._set(True)
            return
        if not self.is_leader:
            return
        late = self._renewed_at is None or self.clock() - self._renewed_at >= self.deadline
        if late or self._held_by_another():
            self._set(False)

    async def try_acquire(self) -> bool:
        now = _now()
        spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.duration),
            "renewTime": _stamp(now),
        }
        try:
            lease = await self.kube.get(LEASES, self.name, self.namespace)
        except ApiError as exc:
            if exc.status != 404:
                raise
            spec = {**spec, "acquireTime": _stamp(now), "leaseTransitions": 0}
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": spec,
            }
            try:
                await self.kube.create(LEASES, body, self.namespace)
            except ApiError as conflict:
                if conflict.status == 409:
                    return False  # another replica created it first
                raise
            self._observe(spec)
            return True
        current = lease.get("spec") or {}
        self._observe(current)
        holder = current.get("holderIdentity")
        duration = current.get("leaseDurationSeconds") or self.duration
        expired = self._observed_at + duration <= self.clock()
        if holder not in (self.identity, None, "") and not expired:
            return False
        if holder != self.identity:
            spec["acquireTime"] = _stamp(now)
            spec["leaseTransitions"] = int(current.get("leaseTransitions") or 0) + 1
        lease["spec"] = {**current, **spec}
        try:
            await self.kube.replace(LEASES, lease)  # resourceVersion guards the race
        except ApiError as exc:
            if exc.status == 409:
                return False
            raise
        self._observe(lease["spec"])
        return True

    async def release(self) -> None:
        """Gives the lease up on a clean stop, as client-go's ReleaseOnCancel does
        (k8s.io/client-go v0.37.2, tools/leaderelection/leaderelection.go `tryRelease`:
        holderIdentity emptied, leaseDurationSeconds 1): the next replica of a rolling
        update takes over at its next try instead of waiting out the lease. Only while this
        replica holds it, and only after it has stopped writing (the caller's part); a
        failure leaves the lease to expire as after a crash."""
        if not self.is_leader:
            return
        self._set(False)
        try:
            lease = await self.kube.get(LEASES, self.name, self.namespace)
            current = lease.get("spec") or {}
            if current.get("holderIdentity") != self.identity:
                return
            now = _stamp(_now())
            lease["spec"] = {
                **current,
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "renewTime": now,
                "acquireTime": now,
            }
            await self.kube.replace(LEASES, lease)
            log.info("%s released the lease %s", self.identity, self.name)
        except Exception as exc:  # noqa: BLE001 (it expires by itself then)
            log.warning("lease %s not released: %s", self.name, exc)


async def current_leader(kube: Kube, namespace: str, name: str) -> str | None:
    """Who holds the Lease now: its holder while its renewTime is within its duration, None
    when nobody does, the Lease is absent, or it was released (client-go's ReleaseOnCancel
    empties the holder). For `explain` and `status`, which say whether a dispatcher is
    running: one read has no earlier sight of the Lease to time it by, as `LeaderElector`
    does before taking over, so the holder's renewTime is trusted here; a holder whose clock
    runs behind can look stopped in this report, never in who writes."""
    try:
        lease = await kube.get(LEASES, name, namespace)
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise
    spec = lease.get("spec") or {}
    holder = spec.get("holderIdentity")
    try:
        renewed = _parse(spec.get("renewTime"))
    except ValueError:
        return None
    if not holder or renewed is None:
        return None
    duration = float(spec.get("leaseDurationSeconds") or 15)
    return str(holder) if renewed + timedelta(seconds=duration) >= _now() else None
