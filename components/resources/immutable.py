"""The fields Kueue refuses to change (components/checks/immutable.py, action "refuse"),
checked by `pulumi preview`, `pulumi up` and the CI driver against what the stack deployed,
before anything on the cluster changes: `render --diff` says it too, but only where someone
runs it and reads its exit code.

One resource per cluster holds, as its inputs, the refused fields of every object the fleet
writes there (Topology levels, a topology flavor's node labels, tolerations and topology,
AdmissionCheck controller). The engine hands its `check` the inputs of the last deployment
beside the new ones (pulumi v3.272.0 sdk/python/lib/pulumi/dynamic/__main__.py Check:
`olds` are the resource's inputs from the state), so a change to one of them fails the
check with the config path, why and the way around it; every object on that cluster waits
for this resource, so nothing is applied first. A check failure without a property is
printed as one line, `<type> resource '<name>' has a problem: <reason>` (pulumi
pkg/resource/deploy/step_generator.go issueCheckFailures, diag.GetResourceInvalidError)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pulumi
from pulumi.dynamic import CheckFailure, CheckResult, CreateResult, DiffResult, ResourceProvider

from components.checks.immutable import IMMUTABLE, Change, config_path, immutable_changes
from components.model.spec import FleetSpec

_KINDS = {i.kind for i in IMMUTABLE if i.action == "refuse"}


def guarded_fields(spec: FleetSpec, objects: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The inputs: per object of a refused kind, the object cut down to its refused fields
    (what immutable_changes compares), and per field the config path that writes it."""
    kept: dict[str, Any] = {}
    paths: dict[str, str] = {}
    for obj in objects:
        if obj.get("kind") not in _KINDS:
            continue
        fields = {i.field for i in IMMUTABLE if i.kind == obj["kind"] and i.action == "refuse"}
        fields |= {i.only_once for i in IMMUTABLE if i.kind == obj["kind"] and i.only_once}
        meta = {k: v for k, v in obj["metadata"].items() if k in ("name", "namespace")}
        spec_part = {k: v for k, v in (obj.get("spec") or {}).items() if k in fields}
        cut = {"kind": obj["kind"], "metadata": meta, "spec": spec_part}
        where = f"{meta['namespace']}/" if meta.get("namespace") else ""
        key = f"{obj['kind']} {where}{meta['name']}"
        kept[key] = cut
        for rule in IMMUTABLE:
            if rule.kind == obj["kind"] and rule.action == "refuse":
                paths[f"{key} {rule.field}"] = config_path(spec, Change(key, rule))
    return {"objects": kept, "paths": paths}


def refusals(olds: Mapping[str, Any], news: Mapping[str, Any]) -> list[str]:
    """One line per refused change from the deployed inputs `olds` to `news`."""
    old_objects = list((olds.get("objects") or {}).values())
    new_objects = list((news.get("objects") or {}).values())
    paths = news.get("paths") or {}
    lines = []
    for change in immutable_changes(old_objects, new_objects):
        if change.rule.action != "refuse":
            continue
        where = paths.get(f"{change.key} {change.rule.field}", change.key)
        lines.append(
            f"{where}: {change.key}: spec.{change.rule.field} cannot change from what is "
            f"deployed: {change.rule.effect}; fix: {change.rule.fix}"
        )
    return lines


class ImmutableFieldsProvider(ResourceProvider):
    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        failures = [CheckFailure("", line) for line in refusals(olds or {}, news)]
        return CheckResult(news, failures)

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=str(props.get("cluster") or "fleet"), outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # Recorded anew whenever the fields change (what is allowed to change, and a first
        # deployment of an object): an update in place, never a replacement.
        keys = ("objects", "paths", "cluster")
        return DiffResult(changes=any(olds.get(k) != news.get(k) for k in keys))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> Any:
        from pulumi.dynamic import UpdateResult

        return UpdateResult(outs=news)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Nothing exists outside the state."""


class ImmutableFields(pulumi.dynamic.Resource, module="multikueue-fleet", name="ImmutableFields"):
    def __init__(
        self, name: str, cluster: str, fields: dict[str, Any], opts: pulumi.ResourceOptions
    ) -> None:
        super().__init__(ImmutableFieldsProvider(), name, {"cluster": cluster, **fields}, opts)
