"""Limits that keep every rendered object one the API server accepts.

Names, label keys and label values are checked where they are typed (fieldtypes.py). What
only shows once objects are built is their size: etcd refuses a request over 1.5 MiB by
default (`--max-request-bytes`, etcd "System limits": https://etcd.io/docs/latest/dev-guide/
limit/), and the API server stores each object as one etcd request, together with its
managedFields (server-side apply records every field a manager owns, which about doubles a
flat object such as a label map). So an object is refused here above MAX_OBJECT_BYTES of
JSON, 1 MiB, which leaves that room; and metadata.annotations above 256 KiB, the API
server's own total limit (apimachinery ValidateAnnotations, TotalAnnotationSizeLimitB).
"""

from __future__ import annotations

import json
from typing import Any

from components.model.problems import Problem
from components.model.spec import FleetSpec
from components.objects.fleet import build_fleet

MAX_OBJECT_BYTES = 1024 * 1024
MAX_ANNOTATION_BYTES = 256 * 1024


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def _bulk(obj: Any, path: str = "") -> tuple[str, Any]:
    """The field that makes up most of `obj` (descending while one child holds most)."""
    while isinstance(obj, (dict, list)) and obj:
        children = obj.items() if isinstance(obj, dict) else enumerate(obj)
        key, child = max(children, key=lambda kv: _size(kv[1]))
        if _size(child) * 2 < _size(obj):
            break
        path = f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else key)
        if not isinstance(child, (dict, list)) or len(child) > 20:
            return path, child
        obj = child
    return path, obj


def _config_path(spec: FleetSpec, obj: dict[str, Any], field: str) -> str:
    """Where in the stack file the bulk of an object comes from, when it can be told."""
    name = obj.get("metadata", {}).get("name", "")
    for c in spec.clusters:
        if field == "metadata.labels" and name in (c.name, c.physical_name(spec.fleet_name)):
            return f"{c.path}.labels"
    for f in spec.queues.flavors:
        if name == f.name and field == "spec.nodeLabels":
            return f"{f.path}.nodeLabels"
    return ""


def object_problems(spec: FleetSpec) -> list[Problem]:
    """Every rendered object too large for the API server, naming what makes it large."""
    problems = []
    for cluster in build_fleet(spec):
        for obj in cluster.objects:
            kind = obj.get("kind", "object")
            name = obj.get("metadata", {}).get("name", "?")
            annotations = obj.get("metadata", {}).get("annotations") or {}
            if _size(annotations) > MAX_ANNOTATION_BYTES:
                problems.append(
                    Problem(
                        "",
                        f"{kind} '{name}' on {cluster.directory} has {_size(annotations):,} "
                        "bytes of annotations; the API server allows 256 KiB in all",
                        "shorten what ends up in its annotations",
                    )
                )
            size = _size(obj)
            if size <= MAX_OBJECT_BYTES:
                continue
            field, bulk = _bulk(obj)
            what = f"{len(bulk):,} entries in {field}" if isinstance(bulk, (dict, list)) else field
            problems.append(
                Problem(
                    _config_path(spec, obj, field),
                    f"{kind} '{name}' on {cluster.directory} would be {size / 2**20:.1f} MiB, "
                    f"mostly {what}: the API server refuses objects over about 1.5 MiB "
                    "(etcd's request limit, managedFields included)",
                    f"keep each object under {MAX_OBJECT_BYTES // 2**20} MiB: use fewer or "
                    "shorter values there",
                )
            )
    return problems
