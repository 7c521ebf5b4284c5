"""Names and labels shared by every object this project writes."""

from __future__ import annotations

from typing import Any

from components.model.spec import FleetSpec

KUEUE_API = "kueue.x-k8s.io/v1beta2"
KUEUE_NAMESPACE = "kueue-system"
KUEUE_SERVICE_ACCOUNT = "kueue-controller-manager"
FLEET_NAMESPACE = "multikueue-fleet-system"
MANAGED_BY = "app.kubernetes.io/managed-by"
FLEET_LABEL = "multikueue-fleet/fleet"
OWNER = "multikueue-fleet"


def fleet_labels(spec: FleetSpec) -> dict[str, str]:
    # The owner label lets the controller tell stack-managed objects from its own.
    return {MANAGED_BY: OWNER, FLEET_LABEL: spec.fleet_name}


def metadata(
    spec: FleetSpec,
    name: str,
    namespace: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = {**(labels or {}), **fleet_labels(spec)}
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta
