"""Leader election on a coordination.k8s.io Lease: one replica writes, the others keep
their caches warm and take over when the lease is not renewed in time.

Written here rather than taken from kubernetes_asyncio's `leaderelection` (`LeaseLock`,
in the pinned kubernetes_asyncio): its `LeaseLock.get` catches only `ApiException`, so a
connection error while renewing escapes `LeaderElection.run` without cancelling the
`onstarted_leading` task or calling `onstopped_leading`. The replica would go on writing
nominations as leader while its lease expires and another replica takes over: two
writers. tests/test_leader.py shows it against the library itself. Any failure to read or
renew the lease here stops this replica writing until it holds the lease again. It also
goes through the controller's own client (kube.py), not a second ApiClient and pool."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

from controller.kube import LEASES, ApiError, Kube

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
    def __init__(
        self,
        kube: Kube,
        namespace: str,
        name: str,
        identity: str,
        duration: float = 15.0,
        renew: float = 5.0,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.duration = duration
        self.renew = renew
        self.is_leader = False
        self.changed = asyncio.Event()

    def _set(self, leader: bool) -> None:
        if leader != self.is_leader:
            log.info("%s %s the lease %s", self.identity, "holds" if leader else "lost", self.name)
            self.is_leader = leader
            self.changed.set()

    async def run(self) -> None:
        while True:
            try:
                self._set(await self.try_acquire())
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 (cannot tell: stop writing until we can)
                log.warning("lease %s: %s", self.name, exc)
                self._set(False)
            await asyncio.sleep(self.renew)

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
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {**spec, "acquireTime": _stamp(now), "leaseTransitions": 0},
            }
            try:
                await self.kube.create(LEASES, body, self.namespace)
            except ApiError as conflict:
                if conflict.status == 409:
                    return False  # another replica created it first
                raise
            return True
        current = lease.get("spec") or {}
        holder = current.get("holderIdentity")
        renewed = _parse(current.get("renewTime")) or datetime.min.replace(tzinfo=UTC)
        expired = (
            renewed + timedelta(seconds=current.get("leaseDurationSeconds") or self.duration) < now
        )
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
    """Who holds the Lease now: its holder while the lease is not expired (the rule
    `LeaderElector` takes over by), None when nobody does, the Lease is absent, or it was
    released (client-go's ReleaseOnCancel empties the holder). For `explain` and `status`,
    which say whether a dispatcher is running."""
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
