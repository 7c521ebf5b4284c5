"""Inventory duty in ClusterProfile mode: keep `status` of the ClusterProfiles the stack
declared current: the access provider Kueue uses to reach the worker (server, CA, and the
token Secret the plugin reads), a ControlPlaneHealthy condition, the Kubernetes version.
Only profiles the stack declared are touched, and in them only what this module owns.

Why every write counts (Kueue v0.19.2, pkg/controller/admissionchecks/multikueue/
multikueuecluster.go): the MultiKueueCluster controller watches ClusterProfiles in its
namespace (setupWithManager, l. 1273-1274) behind its global event filter
(WithEventFilter(c), l. 1264), whose Update passes every object that is not a
MultiKueueCluster (clustersReconciler.Update, l. 1299-1304): so every
update event, a status-only one included, enqueues each MultiKueueCluster that uses the
profile (clusterProfileHandler.Update/handleEvent, l. 1421-1451). Its reconcile builds the
rest.Config anew from the profile (loadClientConfig l. 931, getRestConfigFromClusterProfile
l. 1054-1060, via cluster-inventory-api v0.1.3 pkg/access/config.go BuildConfigFromCP,
l. 125-197, which sets a fresh `Proxy` func closure at l. 169) and compares it with the one
in use by equality.Semantic.DeepEqual (updateConfigAndRefreshWatchers l. 302); a non-nil
func never compares equal (k8s.io/apimachinery v0.36, Kueue's pin, third_party/forked/
golang/reflect/deep_equal.go, deepValueEqual's reflect.Func case), so it stops the
worker's watches and builds a new client (l. 308-329) whatever changed, even only a
condition's message. Kueue reads nothing of the status but the access provider; the rest
is for other inventory readers.

So a write happens only when a stable fact changed: a fixed reason and message per state
(the probe's own error text, which varies, goes to the log), lastTransitionTime kept while
the state holds, and a health flip written only once it has held for HOLD_SECONDS. A write
that changes nothing would be dropped by the API server with no event, but is not sent."""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from controller.fleet_state import FleetState
from controller.kinds import CLUSTER_PROFILES
from controller.kube import ApiError, Kube
from controller.settings import DeclaredProfile

log = logging.getLogger("controller.profiles")
EXEC_EXTENSION = "client.authentication.k8s.io/exec"
# cluster-inventory-api v0.1.3 apis/v1alpha1/clusterprofile_types.go
# (ClusterConditionControlPlaneHealthy).
CONTROL_PLANE_HEALTHY = "ControlPlaneHealthy"
# The condition types this module writes; any other in the list belongs to someone else.
OWNED_CONDITIONS = frozenset({CONTROL_PLANE_HEALTHY})
# One fixed reason and message per state: the text must not move while the state holds.
HEALTHY = ("Reachable", "the dispatcher's probes and watches of its API server are current")
UNHEALTHY = (
    "Unreachable",
    "the dispatcher's probe or watches of its API server are failing; its log says why",
)
# How often app.py samples the health for this duty: the workers' probe interval
# (WorkerConnection's probe_interval, controller/fleet_state.py), so that a verdict that
# flips back between two samples is seen and restarts the hold.
SAMPLE_SECONDS = 3.0
# How long a new verdict must hold before it is written: ten probes at 3 s. The prober
# already forgives one failed probe (down after two in a row, up on the first answer), so a
# server that answers now and then flips its verdict every few seconds; a verdict that
# holds for 30 s is news. Kueue does not read the condition, so the delay costs it nothing.
HOLD_SECONDS = 30.0


@dataclass
class _Pending:
    healthy: bool
    since: float  # clock() of the first sample that saw this verdict
    seen: float  # clock() of the latest sample that saw it


class HealthHold:
    """Hysteresis on each profile's health verdict. The written state is the baseline (read
    back from the profile, so a new leader starts from what is there); a different verdict
    is released for writing once every sample for `hold_seconds` agreed with it. A sample
    back at the baseline, or a gap in sampling longer than the hold (this replica did not
    lead), starts the hold over. `clock` is injectable so tests let minutes pass at once."""

    def __init__(
        self, hold_seconds: float = HOLD_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.hold_seconds = hold_seconds
        self.clock = clock
        self._pending: dict[str, _Pending] = {}

    def verdict(self, name: str, written: bool | None, observed: bool) -> bool:
        """The health to write for profile `name`: `written` is what its condition says now
        (None: it has none of ours yet, which is written at once), `observed` this sample."""
        now = self.clock()
        if written is None or observed == written:
            self._pending.pop(name, None)
            return observed
        pending = self._pending.get(name)
        if pending is None or pending.healthy != observed or now - pending.seen > self.hold_seconds:
            self._pending[name] = _Pending(observed, now, now)
            return written
        pending.seen = now
        # Kept until the profile shows it: a write that failed is tried again next sample.
        return observed if now - pending.since >= self.hold_seconds else written

    def held_for(self, name: str) -> float:
        pending = self._pending.get(name)
        return self.clock() - pending.since if pending else 0.0


def _by_key(items: list[dict[str, Any]] | None, key: str) -> dict[str, dict[str, Any]]:
    return {i.get(key): i for i in items or [] if isinstance(i, dict)}


def _merged(
    current: list[dict[str, Any]] | None, ours: list[dict[str, Any]], key: str
) -> list[dict[str, Any]]:
    """`current` with `ours` in place of the entries of the same key, others kept as they
    are and where they are. The list is a map list (+listType=map in
    clusterprofile_types.go) but a JSON merge patch replaces a list whole (RFC 7386), so the
    list written must carry everyone's entries."""
    mine = _by_key(ours, key)
    out = [mine.pop(i[key], i) if isinstance(i, dict) else i for i in current or []]
    return out + list(mine.values())


def written_health(current: dict[str, Any]) -> bool | None:
    """What the profile's status says of the worker's health (None: nothing of ours)."""
    condition = _by_key(current.get("conditions"), "type").get(CONTROL_PLANE_HEALTHY)
    return None if condition is None else condition.get("status") == "True"


def desired_status(
    profile: DeclaredProfile, healthy: bool, version: str, current: dict[str, Any], now: str
) -> dict[str, Any]:
    """The status to write, from stable facts only: the declared access, the health verdict
    with its fixed reason and message, the version. Others' conditions and access providers
    in `current` are kept; lastTransitionTime is kept while the condition's status holds
    (metav1.Condition: "the last time the condition transitioned from one status to
    another"), `now` (RFC 3339) otherwise."""
    cluster: dict[str, Any] = {"server": profile.server}
    if profile.certificate_authority_data:
        cluster["certificate-authority-data"] = profile.certificate_authority_data
    # The secretreader plugin reads Secret <its namespace>/<clusterName>, key `token`.
    cluster["extensions"] = [
        {"name": EXEC_EXTENSION, "extension": {"clusterName": profile.token_secret}}
    ]
    provider = {"name": profile.access_provider, "cluster": cluster}
    reason, message = HEALTHY if healthy else UNHEALTHY
    state = "True" if healthy else "False"
    old = _by_key(current.get("conditions"), "type").get(CONTROL_PLANE_HEALTHY) or {}
    kept = old.get("status") == state and old.get("lastTransitionTime")
    condition = {
        "type": CONTROL_PLANE_HEALTHY,
        "status": state,
        "reason": reason,
        "message": message,
        "lastTransitionTime": kept or now,
    }
    status: dict[str, Any] = {
        "accessProviders": _merged(current.get("accessProviders"), [provider], "name"),
        "conditions": _merged(current.get("conditions"), [condition], "type"),
    }
    if version:
        status["version"] = {"kubernetes": version}
    return status


def owned(status: dict[str, Any], profile: DeclaredProfile, keys: Any) -> dict[str, Any]:
    """The part of `status` this module writes for `profile`, of the top-level `keys`:
    only its own access provider and condition types, so what others write there never
    makes a write of ours."""
    view: dict[str, Any] = {k: status.get(k) for k in keys}
    if "accessProviders" in view:
        view["accessProviders"] = _by_key(status.get("accessProviders"), "name").get(
            profile.access_provider
        )
    if "conditions" in view:
        view["conditions"] = {
            t: c
            for t, c in _by_key(status.get("conditions"), "type").items()
            if t in OWNED_CONDITIONS
        }
    return view


async def sync_profiles(
    manager: Kube,
    state: FleetState,
    declared: tuple[DeclaredProfile, ...],
    namespace: str,
    hold: HealthHold,
) -> int:
    """Patch the profiles whose owned status differs from what it should be; returns how
    many. `hold` keeps each profile's health from one call to the next."""
    if state.profiles is None:
        return 0
    health = state.worker_health()
    written = 0
    for profile in declared:
        obj = state.profiles.store.get(f"{namespace}/{profile.name}")
        if obj is None:
            continue  # the stack creates it; nothing to keep current yet
        current = obj.get("status") or {}
        observed, why, _ = health.get(profile.name, (False, "no connection to it", 0.0))
        before = written_health(current)
        healthy = hold.verdict(profile.name, before, observed)
        worker = state.workers.get(profile.name)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        status = desired_status(profile, healthy, worker.version if worker else "", current, now)
        if owned(current, profile, status) == owned(status, profile, status):
            continue
        if before is not None and healthy != before:
            # The varying detail is said here, once, not written into the profile.
            log.info(
                "ClusterProfile %s: %s held for %.0fs%s",
                profile.name,
                "reachable" if healthy else "unreachable",
                hold.held_for(profile.name),
                "" if healthy else f": {why}",
            )
        # The resourceVersion read makes the patch conditional (a stale one is a 409,
        # apiserver pkg/registry/generic/registry/store.go): the lists are written whole,
        # so a condition someone added since is not dropped; the next sample sees it.
        patch = {
            "metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
            "status": copy.deepcopy(status),
        }
        try:
            await manager.merge_patch(CLUSTER_PROFILES, profile.name, patch, namespace, status=True)
            written += 1
        except ApiError as exc:
            if exc.status == 409:
                log.debug("ClusterProfile %s changed meanwhile: next sample", profile.name)
            else:
                log.warning("status of ClusterProfile %s: %s", profile.name, exc)
    return written
