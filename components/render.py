"""Offline views of a fleet: every cluster's objects as YAML, and the difference between
two stack files, cluster by cluster. No Pulumi CLI, no cluster, no network."""

from __future__ import annotations

import difflib
import shutil
from pathlib import Path
from typing import Any

import yaml

from components.fleet_objects import ClusterObjects, build_fleet, object_key
from components.problems import Problem
from components.spec import FleetSpec

OBJECTS_FILE = "objects.yaml"
UPSTREAM_FILE = "upstream.yaml"


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the embedded Kueue configuration) as readable `|` blocks."""


def _str(dumper: yaml.SafeDumper, text: str) -> yaml.Node:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _str)


def dump(objects: Any) -> str:
    return yaml.dump_all(list(objects), Dumper=_Dumper, sort_keys=False)


def dump_one(obj: Any) -> str:
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False)


def upstream_doc(cluster: ClusterObjects) -> dict[str, Any]:
    return {"cluster": cluster.cluster.name, "installs": [b.as_dict() for b in cluster.bundles]}


def write_render(spec: FleetSpec, out: Path, warnings: list[Problem]) -> list[Path]:
    """One directory per cluster (`manager`, `worker-<name>`), each with objects.yaml in
    apply order and upstream.yaml naming the pinned installs. Replaces what was there."""
    if out.exists():
        shutil.rmtree(out)
    written = []
    for cluster in build_fleet(spec):
        folder = out / cluster.directory
        folder.mkdir(parents=True)
        (folder / OBJECTS_FILE).write_text(dump(cluster.objects))
        (folder / UPSTREAM_FILE).write_text(dump_one(upstream_doc(cluster)))
        written += [folder / OBJECTS_FILE, folder / UPSTREAM_FILE]
    summary = {
        "stack": spec.stack,
        "fleet": spec.fleet_name,
        "clusters": [
            {
                "name": c.name,
                "role": c.role,
                "provider": c.provider,
                "kubernetesVersion": c.kubernetes_version,
            }
            for c in spec.clusters
        ],
        "warnings": [str(w) for w in warnings],
    }
    (out / "fleet.yaml").write_text(yaml.safe_dump(summary, sort_keys=False))
    written.append(out / "fleet.yaml")
    return written


def _by_key(cluster: ClusterObjects | None) -> dict[str, str]:
    if cluster is None:
        return {}
    entries = {object_key(o): dump_one(o) for o in cluster.objects}
    entries.update({f"upstream {b.name}": dump_one(b.as_dict()) for b in cluster.bundles})
    return entries


def diff_fleets(old: FleetSpec, new: FleetSpec, old_label: str, new_label: str) -> list[str]:
    """Lines describing what `pulumi up` would change, per cluster directory; [] if none."""
    before = {c.directory: c for c in build_fleet(old)}
    after = {c.directory: c for c in build_fleet(new)}
    lines: list[str] = []
    for directory in list(dict.fromkeys([*before, *after])):
        a, b = _by_key(before.get(directory)), _by_key(after.get(directory))
        section: list[str] = []
        for key in list(dict.fromkeys([*a, *b])):
            if key not in a:
                section.append(f"+ {key} (added)")
                section += [f"    +{line}" for line in b[key].splitlines()]
            elif key not in b:
                section.append(f"- {key} (removed)")
            elif a[key] != b[key]:
                section.append(f"~ {key} (changed)")
                body = difflib.unified_diff(
                    a[key].splitlines(), b[key].splitlines(), old_label, new_label, lineterm="", n=2
                )
                section += [f"    {line}" for line in list(body)[2:]]
        if section:
            status = (
                "cluster added"
                if directory not in before
                else "cluster removed"
                if directory not in after
                else "changed"
            )
            lines += [f"== {directory}: {status}", *section]
    return lines
