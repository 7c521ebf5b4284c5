"""Inventory duty in ClusterProfile mode: keep `status` of the ClusterProfiles the stack
declared current: the access provider Kueue uses to reach the worker (server, CA, and the
token Secret the plugin reads), a ControlPlaneHealthy condition, the Kubernetes version.
Only profiles the stack declared are touched; status is written only when it changes."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from controller.fleet_state import FleetState
from controller.kinds import CLUSTER_PROFILES
from controller.kube import ApiError, Kube
from controller.settings import DeclaredProfile

log = logging.getLogger("controller.profiles")
EXEC_EXTENSION = "client.authentication.k8s.io/exec"


def desired_status(
    profile: DeclaredProfile, healthy: bool, reason: str, version: str
) -> dict[str, Any]:
    cluster: dict[str, Any] = {"server": profile.server}
    if profile.certificate_authority_data:
        cluster["certificate-authority-data"] = profile.certificate_authority_data
    # The secretreader plugin reads Secret <its namespace>/<clusterName>, key `token`.
    cluster["extensions"] = [
        {"name": EXEC_EXTENSION, "extension": {"clusterName": profile.token_secret}}
    ]
    status: dict[str, Any] = {
        "accessProviders": [{"name": profile.access_provider, "cluster": cluster}],
        "conditions": [
            {
                "type": "ControlPlaneHealthy",
                "status": "True" if healthy else "False",
                "reason": "Reachable" if healthy else "Unreachable",
                "message": "the dispatcher's watches on it are current"
                if healthy
                else reason or "not reachable",
            }
        ],
    }
    if version:
        status["version"] = {"kubernetes": version}
    return status


def _comparable(status: dict[str, Any]) -> dict[str, Any]:
    """Status without transition times, which change without meaning anything new."""
    conditions = [
        {k: v for k, v in c.items() if k != "lastTransitionTime"}
        for c in status.get("conditions") or []
    ]
    return {**status, "conditions": conditions}


async def sync_profiles(
    manager: Kube, state: FleetState, declared: tuple[DeclaredProfile, ...], namespace: str
) -> int:
    """Patch the profiles whose status differs from what it should be; returns how many."""
    if state.profiles is None:
        return 0
    health = state.worker_health()
    written = 0
    for profile in declared:
        obj = state.profiles.store.get(f"{namespace}/{profile.name}")
        if obj is None:
            continue  # the stack creates it; nothing to keep current yet
        healthy, reason, _ = health.get(profile.name, (False, "no connection to it", 0.0))
        worker = state.workers.get(profile.name)
        status = desired_status(profile, healthy, reason, worker.version if worker else "")
        current = obj.get("status") or {}
        if _comparable({k: current.get(k) for k in status}) == _comparable(status):
            continue
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for condition in status["conditions"]:
            old = next(
                (c for c in current.get("conditions") or [] if c.get("type") == condition["type"]),
                {},
            )
            changed = old.get("status") != condition["status"]
            condition["lastTransitionTime"] = now if changed else old.get("lastTransitionTime", now)
        try:
            await manager.merge_patch(
                CLUSTER_PROFILES, profile.name, {"status": status}, namespace, status=True
            )
            written += 1
        except ApiError as exc:
            log.warning("status of ClusterProfile %s: %s", profile.name, exc)
    return written
