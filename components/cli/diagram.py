"""The fleet's diagram (docs/fleet.svg), drawn from what the code renders for a stack (the
dev stack, stacks/Pulumi.dev.yaml, unless told otherwise): the stack is loaded and checked
(load_stack), built (build_fleet) and every name, quota, version and count in the boxes and
on the arrows is read from those objects and bundles, so the picture cannot say what the
fleet does not get. Only the people, the wording around the names and the legend are
written here.

The layout is fixed columns (people, manager, workers), box heights from their number of
lines and widths from their longest line: plain SVG text, the same bytes for the same code
and stack, so the docs test can say when the committed picture is stale (`mkf reference`
redraws it)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import yaml

from components.model import quantity
from components.model.frameworks import FRAMEWORKS
from components.model.spec import FleetSpec
from components.objects.fleet import ClusterObjects, build_fleet, frameworks_in_install_order

ROOT = Path(__file__).resolve().parents[2]
STACK = ROOT / "stacks" / "Pulumi.dev.yaml"
SVG = ROOT / "docs" / "fleet.svg"
LINE = 15  # pixels between lines of text
CHAR = 6.5  # pixels per character at font-size 12, to size a box from its longest line
TOP = 50  # below the title
PEOPLE_X, PEOPLE_W = 20, 200
MANAGER_X = PEOPLE_X + PEOPLE_W + 60
GAP = 180  # between the manager and the workers: the elbows, and the labels beside them
INSET, SPACE = 20, 15  # a part's inset in its cluster; the space between parts
STYLES = {
    "cluster": ("#f4f7fb", "#5b7db1", "bold"),
    "part": ("#ffffff", "#8aa2c8", "normal"),
    "secret": ("#fff8e6", "#c99a2e", "normal"),
    "person": ("#eef7ee", "#5a9a5a", "normal"),
}
READ_VERBS = frozenset({"get", "list", "watch"})
ENGINEER = ("Platform engineer", "stack file -> pulumi up", "(or mkf up / scripts/up.sh)")
RESEARCHER = ("Researcher", "Job, JobSet, LeaderWorkerSet", "with a queue-name label")
LEGEND = (
    "Every name, quota and version above is what the code renders for this stack (mkf render "
    "shows the same objects).",
    "Pulumi applies every cluster's objects and puts each worker's kubeconfigs on the manager.",
    "Arrows: API calls, labelled with the ServiceAccount they act as. The manager's Kueue "
    "reaches each worker with",
    "its MultiKueue kubeconfig; the dispatcher reads workers with the read-only one and "
    "patches only Workload",
    "status.nominatedClusterNames on the manager. Every kubeconfig and token is a Pulumi secret.",
)


@dataclass(frozen=True)
class Box:
    x: int
    y: int
    w: int
    h: int
    style: str
    text: tuple[str, ...]

    def line_y(self, i: int) -> int:
        """The baseline of line `i`; an arrow aimed at a line meets it a little above."""
        return self.y + 20 + i * LINE


@dataclass(frozen=True)
class Arrow:
    points: tuple[tuple[float, float], ...]  # a straight line, or one with elbows
    text: str = ""
    # Where the label goes and how it is anchored; None: above the first segment's middle.
    at: tuple[float, float] | None = None
    anchor: str = "middle"


# --- what the rendered objects say -----------------------------------------------------


def _of_kind(objects: Iterable[Mapping[str, Any]], kind: str) -> list[Mapping[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def _ref(obj: Mapping[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


def _quota(cluster_queue: Mapping[str, Any]) -> dict[str, str]:
    """Nominal quota per resource, summed over the queue's flavors: one figure per resource
    is what a reader compares between the manager and its workers."""
    found: dict[str, list[str]] = {}
    for group in cluster_queue["spec"].get("resourceGroups", []):
        for flavor in group["flavors"]:
            for res in flavor["resources"]:
                found.setdefault(res["name"], []).append(str(res["nominalQuota"]))
    return {name: quantity.total(values) for name, values in found.items()}


def _quota_text(quota: Mapping[str, str]) -> str:
    return ", ".join(f"{name} {value}" for name, value in quota.items())


def _queue_lines(objects: tuple[dict[str, Any], ...]) -> list[str]:
    return [
        f"ClusterQueue {_ref(q)}: {_quota_text(_quota(q))}"
        for q in _of_kind(objects, "ClusterQueue")
    ]


def _frameworks(cluster: ClusterObjects) -> str:
    """The frameworks the cluster gets, each with the release of its install (batch, built
    into Kubernetes, has none)."""
    parts = []
    for key in frameworks_in_install_order(cluster.cluster):
        versions = dict.fromkeys(b.version for b in FRAMEWORKS[key].bundles)
        parts.append(" ".join([key, *versions]))
    return "frameworks: " + ", ".join(parts)


def _kueue(spec_version: str, cluster: ClusterObjects) -> str:
    installed = [b.version for b in cluster.bundles if b.name == "kueue"]
    return f"Kueue {installed[0]}" if installed else f"Kueue {spec_version} (already installed)"


def identities(objects: Iterable[Mapping[str, Any]]) -> tuple[str, str]:
    """A worker's two ServiceAccounts as namespace/name: MultiKueue's, and the dispatcher's
    reader, told apart by what their ClusterRoles grant (the reader only reads), so the
    names come from the objects and not from this file."""
    objects = list(objects)
    rules = {_ref(r): r.get("rules", []) for r in _of_kind(objects, "ClusterRole")}
    reads_only: dict[str, bool] = {}
    for binding in _of_kind(objects, "ClusterRoleBinding"):
        granted = {v for rule in rules.get(binding["roleRef"]["name"], []) for v in rule["verbs"]}
        for subject in binding["subjects"]:
            if subject["kind"] == "ServiceAccount":
                name = f"{subject['namespace']}/{subject['name']}"
                reads_only[name] = reads_only.get(name, True) and granted <= READ_VERBS
    accounts = [_ref(a) for a in _of_kind(objects, "ServiceAccount")]
    writer = [a for a in accounts if reads_only.get(a) is False]
    reader = [a for a in accounts if reads_only.get(a) is True]
    if len(writer) != 1 or len(reader) != 1:
        raise ValueError(f"expected one MultiKueue and one reader ServiceAccount, got {accounts}")
    return writer[0], reader[0]


def _dispatcher_lines(objects: tuple[dict[str, Any], ...]) -> list[str]:
    """The Deployment, the Lease its replicas elect a leader through (the leaseName of the
    settings the Deployment mounts, as the dispatcher reads them) and its policies."""
    from controller.api import parse_settings

    policies = [f"DispatchPolicy {_ref(p)}" for p in _of_kind(objects, "DispatchPolicy")]
    deployments = _of_kind(objects, "Deployment")
    if not deployments:
        return ["dispatcher: a local process", "(dispatcher.run: local)", *policies]
    (deployment,) = deployments
    meta, pod = deployment["metadata"], deployment["spec"]["template"]["spec"]
    maps = {v["configMap"]["name"] for v in pod.get("volumes", []) if "configMap" in v}
    config = next(
        m for m in _of_kind(objects, "ConfigMap")
        if m["metadata"]["name"] in maps and m["metadata"].get("namespace") == meta["namespace"]
    )  # fmt: skip
    settings = parse_settings(yaml.safe_load(config["data"]["config.yaml"]))
    replicas = deployment["spec"].get("replicas", 1)
    return [
        f"dispatcher: Deployment {meta['name']}",
        f"in {meta['namespace']}, {replicas} replica{'s' if replicas != 1 else ''}",
        f"Lease {settings.lease_name} (leader election)",
        *policies,
    ]


def _secret_lines(objects: tuple[dict[str, Any], ...]) -> list[str]:
    """The manager's Secrets holding worker kubeconfigs, by namespace: those the
    MultiKueueClusters name, and the dispatcher's read-only ones."""
    referenced = {
        c["spec"]["clusterSource"]["kubeConfig"]["location"]
        for c in _of_kind(objects, "MultiKueueCluster")
        if "kubeConfig" in c["spec"].get("clusterSource", {})
    }
    lines: list[str] = []
    by_namespace: dict[str, list[str]] = {}
    for secret in _of_kind(objects, "Secret"):
        meta = secret["metadata"]
        by_namespace.setdefault(meta["namespace"], []).append(meta["name"])
    for namespace, names in by_namespace.items():
        # The namespace's Secrets all named by a MultiKueueCluster, or none (the reader's).
        what = "MultiKueue" if set(names) <= referenced else "kubeconfigs"
        what = "read-only" if not set(names) & referenced else what
        lines += [f"Secrets in {namespace} ({what}):", *(f"  {n}" for n in names)]
    return lines


# --- the boxes -------------------------------------------------------------------------


def _width(lines: Iterable[str]) -> int:
    return math.ceil(max(len(line) for line in lines) * CHAR) + 20


def _height(lines: int) -> int:
    return 20 + LINE * lines


def _stack_parts(x: int, y: int, w: int, parts: list[tuple[str, list[str]]]) -> list[Box]:
    """Parts one under the other from `y`, each as high as its lines need."""
    boxes = []
    for style, text in parts:
        boxes.append(Box(x, y, w, _height(len(text)), style, tuple(text)))
        y += _height(len(text)) + SPACE
    return boxes


def _cluster(x: int, y: int, title: str, parts: list[tuple[str, list[str]]]) -> list[Box]:
    """A cluster's box (its title in bold) around its parts, all as wide as the widest."""
    inner = max(_width(text) for _, text in parts)
    w = max(inner + 2 * INSET, math.ceil(len(title) * (CHAR + 0.5)) + 20)
    inside = _stack_parts(x + INSET, y + 35, w - 2 * INSET, parts)
    h = inside[-1].y + inside[-1].h + SPACE - y
    return [Box(x, y, w, h, "cluster", (title,)), *inside]


def _manager(spec: FleetSpec, manager: ClusterObjects, workers: list[ClusterObjects]) -> list[Box]:
    objects = manager.objects
    check = [
        f"AdmissionCheck {_ref(c)} -> MultiKueueConfig {c['spec']['parameters']['name']}"
        for c in _of_kind(objects, "AdmissionCheck")
    ]
    clusters = ", ".join(_ref(c) for c in _of_kind(objects, "MultiKueueCluster"))
    kueue = [
        f"{_kueue(spec.kueue.version, manager)} + MultiKueue",
        _frameworks(manager),
        *_queue_lines(objects),
        *_sum_note(objects, workers),
        *check,
        f"MultiKueueClusters: {clusters}",
    ]
    queues = [
        *(f"LocalQueue {_ref(q)} -> {q['spec']['clusterQueue']}"
          for q in _of_kind(objects, "LocalQueue")),
        "Workloads: QuotaReserved on the manager,",
        "nominatedClusterNames, clusterName",
    ]  # fmt: skip
    parts = [
        ("part", kueue),
        ("part", _dispatcher_lines(objects)),
        ("secret", _secret_lines(objects)),
        ("part", queues),
    ]
    title = f"manager cluster {manager.cluster.name} ({manager.cluster.provider})"
    return _cluster(MANAGER_X, TOP, title, parts)


def _sum_note(objects: tuple[dict[str, Any], ...], workers: list[ClusterObjects]) -> list[str]:
    """Says the manager's quota is its workers' sum only when the rendered queues show it."""
    mine = {_ref(q): _quota(q) for q in _of_kind(objects, "ClusterQueue")}
    theirs: dict[str, dict[str, list[str]]] = {}
    for worker in workers:
        for q in _of_kind(worker.objects, "ClusterQueue"):
            for res, value in _quota(q).items():
                theirs.setdefault(_ref(q), {}).setdefault(res, []).append(value)
    summed = all(
        set(quota) == set(theirs.get(name, {}))
        and all(quantity.equal(v, quantity.total(theirs[name][r])) for r, v in quota.items())
        for name, quota in mine.items()
    )
    return ["  (= the sum of the workers' quotas)"] if mine and summed else []


def _worker(spec: FleetSpec, worker: ClusterObjects, y: int, x: int) -> list[Box]:
    writer, reader = identities(worker.objects)
    kueue = [
        _kueue(spec.kueue.version, worker),
        _frameworks(worker),
        *_queue_lines(worker.objects),
        *(f"LocalQueue {_ref(q)}" for q in _of_kind(worker.objects, "LocalQueue")),
        "copies of the manager's Workloads and jobs:",
        "pods run here, status mirrored back",
    ]
    access = [
        f"ServiceAccount {writer}",
        "  MultiKueue: the frameworks' jobs, Workloads",
        f"ServiceAccount {reader}",
        "  the dispatcher: get, list, watch only",
    ]
    title = f"worker cluster {worker.cluster.name} ({worker.cluster.provider})"
    return _cluster(x, y, title, [("part", kueue), ("secret", access)])


def _line_of(box: Box, start: str) -> int:
    return next(i for i, line in enumerate(box.text) if line.startswith(start))


def layout(stack: Path = STACK) -> tuple[str, list[Box], list[Arrow], int]:
    """The title, boxes and arrows of the stack's picture, and the height they take."""
    from components.checks.load import load_stack

    spec, _ = load_stack(str(stack))
    manager, *workers = build_fleet(spec)
    m_boxes = _manager(spec, manager, workers)
    _, kueue, dispatcher, _, queues = m_boxes
    people = [
        Box(PEOPLE_X, TOP, PEOPLE_W, _height(3), "person", ENGINEER),
        Box(PEOPLE_X, queues.y, PEOPLE_W, _height(3), "person", RESEARCHER),
    ]
    arrows = [
        Arrow(((PEOPLE_X + PEOPLE_W, TOP + 45), (MANAGER_X, TOP + 45)), "applies"),
        Arrow(((PEOPLE_X + PEOPLE_W, queues.y + 30), (queues.x, queues.y + 30)), "submits"),
        Arrow(
            ((dispatcher.x + 60, dispatcher.y), (dispatcher.x + 60, kueue.y + kueue.h)),
            "nominates (Workload status)", (dispatcher.x + 68, dispatcher.y - 4), "start",
        ),
    ]  # fmt: skip
    w_boxes: list[Box] = []
    right = m_boxes[0].x + m_boxes[0].w
    x, y = right + GAP, TOP
    for worker in workers:
        boxes = _worker(spec, worker, y, x)
        access = boxes[-1]
        writer, reader = identities(worker.objects)
        arrows += [
            _to_line(kueue, right + 20, access, 0, writer),
            _to_line(dispatcher, right + 40, access, 2, reader),
        ]
        w_boxes += boxes
        y = boxes[0].y + boxes[0].h + 20
    title = f"The {spec.stack} fleet as its stack renders: who talks to whom, as which identity"
    bottom = max(b.y + b.h for b in [*m_boxes, *w_boxes, *people])
    return title, [*people, *m_boxes, *w_boxes], arrows, bottom


def _to_line(source: Box, bus: int, target: Box, line: int, account: str) -> Arrow:
    """From the right of `source` along the vertical at `bus` to the line of `target` naming
    the ServiceAccount, labelled with its name above the last stretch: elbows rather than
    diagonals, so that labels stay clear of the other arrows however many workers there are."""
    name = account.rsplit("/", 1)[1]
    start_y, end_y = source.y + source.h / 2, target.line_y(line) - 4
    points = ((source.x + source.w, start_y), (bus, start_y), (bus, end_y), (target.x, end_y))
    return Arrow(points, f"as {name}", (target.x - 8, end_y - 5), "end")


# --- SVG -------------------------------------------------------------------------------


def _box(box: Box) -> list[str]:
    fill, stroke, weight = STYLES[box.style]
    out = [
        f'<rect x="{box.x}" y="{box.y}" width="{box.w}" height="{box.h}" rx="6" '
        f'fill="{fill}" stroke="{stroke}" stroke-width="1.5"/>'
    ]
    for i, line in enumerate(box.text):
        bold = weight if i == 0 else "normal"
        out.append(
            f'<text x="{box.x + 10}" y="{box.line_y(i)}" font-weight="{bold}" '
            f'xml:space="preserve">{escape(line)}</text>'
        )
    return out


def _arrow(arrow: Arrow) -> list[str]:
    points = " ".join(f"{x:g},{y:g}" for x, y in arrow.points)
    out = [
        f'<polyline points="{points}" fill="none" stroke="#333" stroke-width="1.4" '
        'marker-end="url(#head)"/>'
    ]
    if arrow.text:
        (x1, y1), (x2, y2) = arrow.points[:2]
        x, y = arrow.at or ((x1 + x2) / 2, (y1 + y2) / 2 - 5)
        out.append(
            f'<text x="{x:g}" y="{y:g}" text-anchor="{arrow.anchor}" '
            f'font-size="11" fill="#333">{escape(arrow.text)}</text>'
        )
    return out


def svg(title: str, boxes: list[Box], arrows: list[Arrow], bottom: int) -> str:
    width = max(b.x + b.w for b in boxes) + 20
    total = bottom + 30 + LINE * len(LEGEND)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{total}" '
        f'viewBox="0 0 {width} {total}" font-family="Helvetica, Arial, sans-serif" '
        'font-size="12">',
        "<defs>",
        '<marker id="head" markerWidth="10" markerHeight="8" refX="9" refY="4" '
        'orient="auto"><path d="M0,0 L10,4 L0,8 z" fill="#333"/></marker>',
        "</defs>",
        f'<rect width="{width}" height="{total}" fill="#ffffff"/>',
        f'<text x="20" y="26" font-size="15" font-weight="bold">{escape(title)}</text>',
    ]
    for box in boxes:
        parts += _box(box)
    for arrow in arrows:
        parts += _arrow(arrow)
    for i, line in enumerate(LEGEND):
        parts.append(f'<text x="20" y="{bottom + 30 + i * LINE}">{escape(line)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def diagram_text(stack: Path = STACK) -> str:
    """The SVG of `stack`'s fleet (the dev stack's is docs/fleet.svg)."""
    return svg(*layout(stack))
