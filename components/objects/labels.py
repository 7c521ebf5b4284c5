"""Names and labels shared by every object this project writes."""

from __future__ import annotations

from collections.abc import Iterable
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
    name: str,
    namespace: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An object's metadata as a builder writes it: the fleet's labels are not its concern
    (with_fleet_labels adds them where a cluster's objects are gathered)."""
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = dict(labels or {})
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def with_fleet_labels(spec: FleetSpec, objects: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies of `objects` with the fleet's labels added to their own (the fleet's win on a
    shared key). Called once per set of objects a cluster gets: in objects/fleet.py for
    what is rendered and checked, in resources/fleet.py as each ObjectSet is handed its
    objects for what is deployed."""
    ours = fleet_labels(spec)
    stamped = []
    for obj in objects:
        meta = obj["metadata"]
        stamped.append({**obj, "metadata": {**meta, "labels": {**meta.get("labels", {}), **ours}}})
    return stamped
