"""Offline views of a fleet: every cluster's objects as YAML, and the difference between
two stack files, cluster by cluster. No Pulumi CLI, no cluster, no network."""

from __future__ import annotations

import contextlib
import difflib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from components.checks.immutable import Immutable, immutable_changes
from components.model.problems import Problem
from components.model.spec import FleetSpec
from components.objects.fleet import ClusterObjects, build_fleet, object_key
from components.objects.kind_config import kind_config, mirror_props
from components.objects.manifests import PlainDumper
from controller.api.terminal import Painter

OBJECTS_FILE = "objects.yaml"
UPSTREAM_FILE = "upstream.yaml"
# With `kueue.install: existing`: the Configuration the stack expects Kueue to run with.
# Nothing applies it; it is there to compare with the one the cluster's Kueue runs.
EXPECTED_KUEUE_FILE = "kueue-configuration.yaml"
EXPECTED_KUEUE_KEY = "expected Kueue Configuration (not applied)"


class _Dumper(PlainDumper):
    """Multi-line strings (the embedded Kueue configuration) as readable `|` blocks, and no
    anchors (PlainDumper)."""


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


def expected_kueue_text(spec: FleetSpec, cluster: ClusterObjects) -> str:
    """The expected Configuration as a file an operator reads: what it is, then the YAML
    that belongs under `controller_manager_config.yaml` in Kueue's ConfigMap."""
    head = (
        f"# Kueue {spec.kueue.version} on cluster '{cluster.cluster.name}' must run with these "
        "settings for the fleet to\n"
        "# work (kueue.install: existing). The fleet does not apply them: compare them with "
        "the\n"
        "# Configuration your Kueue runs (a release install reads it from ConfigMap\n"
        "# kueue-system/kueue-manager-config, key controller_manager_config.yaml) and restart "
        "Kueue\n"
        "# after a change: it reads it only at start. Keys not listed here (probes, metrics, "
        "webhook\n"
        "# port, leader election, certificates) are yours; this file alone is a valid "
        "Configuration.\n"
    )
    return head + dump_one(cluster.expected_kueue_configuration)


# Written into every directory `render --out` fills, listing the files it wrote: a later
# render replaces those files and nothing else, and refuses a directory without it.
RENDER_MARKER = ".multikueue-fleet-render"
_MARKER_HEAD = (
    "# Written by `python -m components render`: the files below are its output. A later\n"
    "# render into this directory replaces them and refuses to touch anything else.\n"
)


class RenderDirError(Exception):
    """--out names a directory render must not write into; nothing was written or removed."""


def _previous_render(out: Path) -> list[Path]:
    """The files a previous render wrote into `out`; RenderDirError when `out` holds
    anything else (or is not a render at all)."""
    marker = out / RENDER_MARKER
    if not marker.exists() and not marker.is_symlink():
        legacy = _unmarked_render(out)
        if legacy is not None:
            return legacy
    if marker.is_symlink() or not marker.is_file():
        raise RenderDirError(
            f"{out} is not empty and is not a previous render (it has no {RENDER_MARKER}); "
            "nothing was written or removed: give --out a new or empty directory"
        )
    listed = {
        Path(line) for line in marker.read_text().splitlines() if line and not line.startswith("#")
    }
    foreign: list[str] = []
    for root, dirs, files in os.walk(out):
        here = Path(root).relative_to(out)
        for name in files + [d for d in dirs if (Path(root) / d).is_symlink()]:
            rel = here / name
            if rel != Path(RENDER_MARKER) and (rel not in listed or (out / rel).is_symlink()):
                foreign.append(str(rel))
        for name in dirs:
            rel = here / name
            if not any(rel in p.parents for p in listed):
                foreign.append(f"{rel}/")
    unsafe = [p for p in listed if p.is_absolute() or ".." in p.parts]
    if foreign or unsafe:
        shown = ", ".join(sorted(foreign + [str(p) for p in unsafe])[:5])
        raise RenderDirError(
            f"{out} holds files that render did not write ({shown}); nothing was written or "
            "removed: move them away, or give --out another directory"
        )
    return sorted(listed)


def _unmarked_render(out: Path) -> list[Path] | None:
    """A render written before renders were marked: fleet.yaml, and cluster folders holding
    only objects.yaml and upstream.yaml. Its files, or None when `out` is anything else."""
    files = [Path("fleet.yaml")]
    for entry in out.iterdir():
        if entry.name == "fleet.yaml" and entry.is_file() and not entry.is_symlink():
            continue
        if not entry.is_dir() or entry.is_symlink():
            return None
        if entry.name != "manager" and not entry.name.startswith("worker-"):
            return None
        inner = list(entry.iterdir())
        if not {p.name for p in inner} <= {OBJECTS_FILE, UPSTREAM_FILE} or any(
            p.is_symlink() or not p.is_file() for p in inner
        ):
            return None
        files += [Path(entry.name) / p.name for p in inner]
    return files if (out / "fleet.yaml").is_file() else None


def prepare_out(out: Path) -> None:
    """Make `out` ready for a render: create it, or clear what a previous render wrote
    there. Anything else is refused (RenderDirError) and left exactly as it was."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise RenderDirError(
            f"{out} exists and is not a directory; nothing was written or removed: give "
            "--out a new or empty directory"
        )
    if not out.exists():
        out.mkdir(parents=True)
        return
    if not any(out.iterdir()):
        return
    previous = _previous_render(out)
    for rel in previous:
        (out / rel).unlink(missing_ok=True)
    folders = {parent for rel in previous for parent in rel.parents if parent != Path(".")}
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):  # not empty: something render keeps writing
            (out / folder).rmdir()


def write_render(spec: FleetSpec, out: Path, warnings: list[Problem]) -> list[Path]:
    """One directory per cluster (`manager`, `worker-<name>`), each with objects.yaml in
    apply order and upstream.yaml naming the pinned installs. Writes only into a directory
    it creates, an empty one, or one holding only a previous render (RenderDirError)."""
    prepare_out(out)
    written = []
    for cluster in build_fleet(spec):
        folder = out / cluster.directory
        folder.mkdir(parents=True, exist_ok=True)
        (folder / OBJECTS_FILE).write_text(dump(cluster.objects))
        (folder / UPSTREAM_FILE).write_text(dump_one(upstream_doc(cluster)))
        written += [folder / OBJECTS_FILE, folder / UPSTREAM_FILE]
        if cluster.expected_kueue_configuration is not None:
            (folder / EXPECTED_KUEUE_FILE).write_text(expected_kueue_text(spec, cluster))
            written.append(folder / EXPECTED_KUEUE_FILE)
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
    (out / "fleet.yaml").write_text(dump_one(summary))
    written.append(out / "fleet.yaml")
    listing = "".join(f"{p.relative_to(out)}\n" for p in written)
    (out / RENDER_MARKER).write_text(_MARKER_HEAD + listing)
    return written


def render_stream(spec: FleetSpec) -> str:
    """Every cluster's objects as one multi-document YAML stream, as `helm template` prints
    one: each document opens with a comment naming its cluster. The pinned upstream installs
    of a cluster are comments before its objects (their manifests are fetched at deploy
    time, not rendered)."""
    parts: list[str] = []
    for cluster in build_fleet(spec):
        name = cluster.directory
        head = [f"# cluster: {name}"]
        head += [
            f"# upstream install (not in this stream): {b.name} {b.version} {b.url}"
            for b in cluster.bundles
        ]
        for i, obj in enumerate(cluster.objects):
            lead = "\n".join(head) if i == 0 else f"# cluster: {name}"
            parts.append(f"---\n{lead}\n{dump_one(obj)}")
    return "".join(parts)


def _by_key(cluster: ClusterObjects | None) -> dict[str, str]:
    if cluster is None:
        return {}
    entries = {object_key(o): dump_one(o) for o in cluster.objects}
    entries.update({f"upstream {b.name}": dump_one(b.as_dict()) for b in cluster.bundles})
    if cluster.expected_kueue_configuration is not None:
        entries[EXPECTED_KUEUE_KEY] = dump_one(cluster.expected_kueue_configuration)
    return entries


Change = Literal["added", "changed", "replaced", "removed"]
CHANGES: tuple[Change, ...] = ("added", "changed", "replaced", "removed")
_MARK = {"added": "+", "changed": "~", "replaced": "!", "removed": "-"}


@dataclass(frozen=True)
class ObjectDiff:
    key: str  # "<Kind> <namespace/>name", or "upstream <install>"
    change: Change
    lines: tuple[str, ...]  # the added object's YAML, or the unified diff of a change
    why: str = ""  # replaced: the immutable fields that force it
    effect: str = ""  # replaced: what deleting and creating it again does


@dataclass(frozen=True)
class ClusterDiff:
    directory: str
    status: Literal["cluster added", "cluster removed", "changed"]
    objects: tuple[ObjectDiff, ...]

    def counts(self) -> dict[str, int]:
        return {c: sum(1 for o in self.objects if o.change == c) for c in CHANGES}


def _replaced(
    before: ClusterObjects | None, after: ClusterObjects | None
) -> dict[str, list[Immutable]]:
    """The objects a change replaces (an immutable field changed), with the rules why."""
    if before is None or after is None:
        return {}
    found: dict[str, list[Immutable]] = {}
    for change in immutable_changes(before.objects, after.objects):
        if change.rule.action == "replace":
            found.setdefault(change.key, []).append(change.rule)
    return found


# What `up` does to a kind cluster whose kind configuration changes: kind fixes it at
# creation, so the cluster's dynamic provider replaces it (KindClusterProvider.diff in
# components/resources/clusters.py: `config` is a replacing input, deleted first).
KIND_REPLACED = (
    "kind deletes the cluster and creates it again: every object and every job on it goes, "
    "and the stack creates its objects there again; drain it first"
)


def _kind_cluster_replaced(
    old: FleetSpec | None,
    new: FleetSpec | None,
    before: ClusterObjects | None,
    after: ClusterObjects | None,
    old_label: str,
    new_label: str,
) -> ObjectDiff | None:
    """The kind cluster itself, where its kind configuration (nodes, node image, containerd
    patches) differs: the most destructive change a stack file can make, and no object of
    the cluster shows it. The configuration as the program writes it, without the host's
    cgroup patch and the owner label, which are the same on both sides of one machine."""
    if old is None or new is None or before is None or after is None:
        return None
    if before.cluster.kind is None or after.cluster.kind is None:
        return None
    texts = [
        yaml.safe_dump(kind_config(spec, objects.cluster), sort_keys=False).splitlines()
        for spec, objects in ((old, before), (new, after))
    ]
    if texts[0] == texts[1]:
        mirrors = [
            yaml.safe_dump(
                {"registryMirrors": mirror_props(c.cluster.kind.registry_mirrors)},  # type: ignore[union-attr]
                sort_keys=True,
            ).splitlines()
            for c in (before, after)
        ]
        if mirrors[0] == mirrors[1]:
            return None
        # containerd reads hosts.toml at each pull (kind_config.CERTS_DIR): rewritten on the
        # running nodes by the cluster's KindMirrors (KindMirrorsProvider.update), not made again.
        body = difflib.unified_diff(*mirrors, old_label, new_label, lineterm="", n=2)
        return ObjectDiff(
            f"kind cluster {after.cluster.physical_name(new.fleet_name)}",
            "changed",
            tuple(body)[2:],
        )
    body = difflib.unified_diff(*texts, old_label, new_label, lineterm="", n=2)
    return ObjectDiff(
        f"kind cluster {after.cluster.physical_name(new.fleet_name)}",
        "replaced",
        tuple(body)[2:],
        "its kind configuration is fixed at creation",
        KIND_REPLACED,
    )


def fleet_diff(
    old: FleetSpec | None, new: FleetSpec | None, old_label: str, new_label: str
) -> list[ClusterDiff]:
    """What `pulumi up` would change, per cluster directory, clusters with no change left
    out. `old` None: a new stack, everything in it is added; `new` None: a stack removed,
    everything in it is removed (what `pulumi destroy` deletes)."""
    before = {c.directory: c for c in build_fleet(old)} if old is not None else {}
    after = {c.directory: c for c in build_fleet(new)} if new is not None else {}
    clusters: list[ClusterDiff] = []
    for directory in list(dict.fromkeys([*before, *after])):
        a, b = _by_key(before.get(directory)), _by_key(after.get(directory))
        replaced = _replaced(before.get(directory), after.get(directory))
        found: list[ObjectDiff] = []
        cluster = _kind_cluster_replaced(
            old, new, before.get(directory), after.get(directory), old_label, new_label
        )
        if cluster is not None:
            found.append(cluster)
        for key in list(dict.fromkeys([*a, *b])):
            if key not in a:
                found.append(ObjectDiff(key, "added", tuple(b[key].splitlines())))
            elif key not in b:
                found.append(ObjectDiff(key, "removed", ()))
            elif a[key] != b[key]:
                body = difflib.unified_diff(
                    a[key].splitlines(), b[key].splitlines(), old_label, new_label, lineterm="", n=2
                )
                rules = replaced.get(key, [])
                why = ", ".join(f"spec.{r.field}" for r in rules)
                found.append(
                    ObjectDiff(
                        key,
                        "replaced" if rules else "changed",
                        tuple(body)[2:],
                        f"{why} is immutable" if rules else "",
                        " ".join(dict.fromkeys(r.effect for r in rules)),
                    )
                )
        if found:
            status: Literal["cluster added", "cluster removed", "changed"] = (
                "cluster added"
                if directory not in before
                else "cluster removed"
                if directory not in after
                else "changed"
            )
            clusters.append(ClusterDiff(directory, status, tuple(found)))
    return clusters


def summary_lines(clusters: list[ClusterDiff]) -> list[str]:
    """One line per cluster: how many objects are added, changed, replaced, removed."""
    width = max((len(c.directory) for c in clusters), default=0)
    lines = []
    for c in clusters:
        counts = c.counts()
        text = ", ".join(f"{counts[k]} {k}" for k in CHANGES)
        note = f"  ({c.status})" if c.status != "changed" else ""
        lines.append(f"  {c.directory.ljust(width)}  {text}{note}")
    return lines


def diff_lines(
    clusters: list[ClusterDiff], paint: Painter | None = None, bodies: bool = True
) -> list[str]:
    """The diff as a person reads it: the summary first, then each cluster's objects, a
    replacement marked `!` with the field that forces it. `bodies` False: each object's line
    alone (a new stack, where every body is an added object `render` prints anyway)."""
    paint = paint or Painter(False)
    colour = {"added": "green", "changed": "yellow", "replaced": "red", "removed": "red"}
    if not clusters:
        return []
    lines = ["Summary:", *summary_lines(clusters)]
    for c in clusters:
        lines.append(paint(f"== {c.directory}: {c.status}", "bold"))
        for o in c.objects:
            head = f"{_MARK[o.change]} {o.key} ({o.change}{': ' + o.why if o.why else ''})"
            lines.append(paint(head, colour[o.change]))
            if o.effect:
                lines.append(f"    # {o.effect}")
            if not bodies:
                continue
            if o.change == "added":
                lines += [paint(f"    +{line}", "green") for line in o.lines]
            else:
                lines += [f"    {_painted_diff_line(line, paint)}" for line in o.lines]
    return lines


def _painted_diff_line(line: str, paint: Painter) -> str:
    if line.startswith("+"):
        return paint(line, "green")
    if line.startswith("-"):
        return paint(line, "red")
    if line.startswith("@@"):
        return paint(line, "cyan")
    return line


def diff_json(clusters: list[ClusterDiff]) -> list[dict[str, Any]]:
    return [
        {
            "cluster": c.directory,
            "status": c.status,
            "summary": c.counts(),
            "objects": [
                {
                    "key": o.key,
                    "change": o.change,
                    **({"why": o.why, "effect": o.effect} if o.why else {}),
                    ("yaml" if o.change == "added" else "diff"): "\n".join(o.lines),
                }
                for o in c.objects
            ],
        }
        for c in clusters
    ]


def diff_fleets(old: FleetSpec | None, new: FleetSpec, old_label: str, new_label: str) -> list[str]:
    """Lines describing what `pulumi up` would change, per cluster directory; [] if none.
    `old` None: a new stack, everything in it is added."""
    return diff_lines(fleet_diff(old, new, old_label, new_label))
