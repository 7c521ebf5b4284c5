"""The Ready condition the dispatcher keeps on every DispatchPolicy: True when the policy is
in force, False with what is wrong with it."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from controller.fleet_state import DISPATCH_POLICIES, FleetState
from controller.kube import ApiError, Kube
from controller.metrics import Metrics

log = logging.getLogger("controller.policy_status")


async def sync_policy_status(manager: Kube, state: FleetState, metrics: Metrics) -> None:
    """Writes each DispatchPolicy's Ready condition where it is not what it should be."""
    problems = state.policy_set().problems
    for name, obj in state.policies.store.items():
        status, message = ("False", problems[name]) if name in problems else ("True", "in force")
        # Read from the watched object every time, not from what this process wrote:
        # the inventory writes the same list, and a write of either that raced the
        # other's is seen here and made again.
        conditions = (obj.get("status") or {}).get("conditions") or []
        current = next((c for c in conditions if c.get("type") == "Ready"), {})
        if (current.get("status"), current.get("message")) == (status, message):
            continue
        condition = {
            "type": "Ready",
            "status": status,
            "message": message,
            "reason": "Valid" if status == "True" else "Invalid",
            # The time the status last changed, as Kubernetes conditions keep it.
            "lastTransitionTime": current.get("lastTransitionTime")
            if current.get("status") == status
            else datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        # A merge patch replaces the whole list: keep the other writers' conditions
        # (the inventory's InventoryReady).
        others = [c for c in conditions if c.get("type") != "Ready"]
        patch = {
            "status": {
                "conditions": [*others, condition],
                "observedGeneration": obj["metadata"].get("generation", 1),
            }
        }
        try:
            await manager.merge_patch(DISPATCH_POLICIES, name, patch, status=True)
        except ApiError as exc:
            metrics.write_errors.labels("policy").inc()
            log.warning("status of DispatchPolicy %s: %s", name, exc)
