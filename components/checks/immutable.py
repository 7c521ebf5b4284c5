"""Fields the API server refuses to change (CEL `self == oldSelf` in the CRDs), and what the
fleet does when a stack change touches one, so that `pulumi up` never stops half-way.

Sources (kueue v0.19.2 config/components/crd/bases, cluster-inventory-api CRD):
- LocalQueue `spec.clusterQueue`, AdmissionCheck `spec.controllerName`, Topology
  `spec.levels`: immutable;
- ResourceFlavor `spec.nodeLabels`, `spec.tolerations`, `spec.topologyName`: immutable once
  `topologyName` is set (`spec.nodeTaints` stays mutable);
- ClusterProfile `spec.clusterManager`: immutable.

Per field, one of:
- replace: the object is deleted and created again (Pulumi `replaceOnChanges`; the provider
  deletes first because the name is fixed). Safe only where nothing holds the object:
  LocalQueues and ClusterProfiles carry no Kueue finalizer.
- refuse: Kueue keeps a `kueue.x-k8s.io/resource-in-use` finalizer on Topologies,
  ResourceFlavors and AdmissionChecks while something uses them (pkg/controller/tas/
  topology_controller.go, core/resourceflavor_controller.go, core/admissioncheck_controller.go
  at v0.19.2), so a delete-then-create would wait on that finalizer forever. Such a change is
  refused before anything is applied, with the way around it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from components.model.problems import Problem
from components.model.spec import FleetSpec, key_path
from components.objects.fleet import build_fleet

Action = Literal["replace", "refuse"]


@dataclass(frozen=True)
class Immutable:
    kind: str
    field: str  # under spec
    action: Action
    # replace: what replacing does to queued work; refuse: why it cannot be replaced.
    effect: str
    fix: str = ""  # refuse: what to do instead
    only_once: str | None = None  # immutable only once this spec field is set


_FLAVOR_WHY = (
    "Kueue does not let a ResourceFlavor with a topology change it, and keeps the flavor "
    "while a ClusterQueue uses it, so it cannot be replaced either"
)
_FLAVOR_FIX = (
    "add a flavor under a new name with the new settings, move the ClusterQueues to it, "
    "and remove the old one in a later change"
)

IMMUTABLE: tuple[Immutable, ...] = (
    Immutable(
        "LocalQueue",
        "clusterQueue",
        "replace",
        "the LocalQueue is deleted and created again: its pending workloads wait (inadmissible) "
        "until it is back, admitted workloads keep running",
    ),
    Immutable(
        "ClusterProfile",
        "clusterManager",
        "replace",
        "the ClusterProfile is deleted and created again: MultiKueue cannot reach that worker "
        "until the dispatcher has written the new profile's status; running work is untouched",
    ),
    Immutable(
        "Topology",
        "levels",
        "refuse",
        "Kueue does not let a Topology change its levels, and keeps it while a ResourceFlavor "
        "uses it, so it cannot be replaced either",
        "add a Topology under a new name with the new levels, point a new flavor at it, and "
        "remove the old ones in a later change",
    ),
    Immutable("ResourceFlavor", "nodeLabels", "refuse", _FLAVOR_WHY, _FLAVOR_FIX, "topologyName"),
    Immutable("ResourceFlavor", "tolerations", "refuse", _FLAVOR_WHY, _FLAVOR_FIX, "topologyName"),
    Immutable("ResourceFlavor", "topologyName", "refuse", _FLAVOR_WHY, _FLAVOR_FIX, "topologyName"),
    Immutable(
        "AdmissionCheck",
        "controllerName",
        "refuse",
        "Kueue keeps an AdmissionCheck while a ClusterQueue uses it, so it cannot be replaced",
        "the fleet always writes MultiKueue's controller name: keep it",
    ),
)


def replace_on_changes(kind: str) -> list[str]:
    """Pulumi `replace_on_changes` paths for an object of this kind (the fleet's resource
    registration sets them, with delete-before-replace, on every object of the kind)."""
    return [f"spec.{i.field}" for i in IMMUTABLE if i.kind == kind and i.action == "replace"]


def replacement_options(resource_type: str) -> dict[str, Any] | None:
    """Pulumi resource options for a Kubernetes resource type token such as
    "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue" (what a `transforms` callback on the
    ConfigGroups sees as `args.type_`), or None when the kind needs none. Delete first: the
    name is fixed, so the new object cannot exist beside the old one."""
    paths = replace_on_changes(resource_type.rpartition(":")[2])
    if not paths:
        return None
    return {"replace_on_changes": paths, "delete_before_replace": True}


@dataclass(frozen=True)
class Change:
    key: str  # "<Kind> <namespace/>name" as render prints it
    rule: Immutable


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj["metadata"]
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj['kind']} {where}{meta['name']}"


def immutable_changes(
    old: Iterable[Mapping[str, Any]], new: Iterable[Mapping[str, Any]]
) -> list[Change]:
    """The immutable fields a change from `old` to `new` objects (one cluster) touches."""
    before = {_key(o): o for o in old}
    found = []
    for obj in new:
        prior = before.get(_key(obj))
        if prior is None:
            continue
        spec, old_spec = obj.get("spec") or {}, prior.get("spec") or {}
        for rule in IMMUTABLE:
            if rule.kind != obj["kind"]:
                continue
            if rule.only_once and rule.only_once not in old_spec:
                continue
            if spec.get(rule.field) != old_spec.get(rule.field):
                found.append(Change(_key(obj), rule))
    return found


def config_path(spec: FleetSpec, change: Change) -> str:
    kind, _, name = change.key.partition(" ")
    field = change.rule.field
    if kind == "ResourceFlavor":
        for i, f in enumerate(spec.queues.flavors):
            if f.name == name:
                return key_path(key_path("queues.flavors", i), field)
    if kind == "Topology":
        for i, t in enumerate(spec.queues.topologies):
            if t.name == name:
                return key_path(key_path("queues.topologies", i), field)
    return f"{change.key} spec.{field}"


def change_problems(old: FleetSpec, new: FleetSpec) -> list[Problem]:
    """Refused changes as errors, replacements as warnings saying what they do."""
    before = {c.directory: c.objects for c in build_fleet(old)}
    problems: list[Problem] = []
    seen: set[tuple[str, str]] = set()
    for cluster in build_fleet(new):
        for change in immutable_changes(before.get(cluster.directory, ()), cluster.objects):
            if (change.key, change.rule.field) in seen:
                continue  # the same object on every worker: said once
            seen.add((change.key, change.rule.field))
            where = config_path(new, change)
            if change.rule.action == "refuse":
                problems.append(
                    Problem(
                        where,
                        f"{change.key}: spec.{change.rule.field} cannot change: "
                        f"{change.rule.effect}",
                        change.rule.fix,
                    )
                )
            else:
                problems.append(
                    Problem(
                        where,
                        f"{change.key} will be replaced (spec.{change.rule.field} is immutable)",
                        change.rule.effect,
                        "warning",
                    )
                )
    return problems
