"""Where a job went: the framework object on the manager, its Workloads, the worker each was
nominated to and admitted on, the worker's copy with its pods, and the events of both sides
in time order (`mkf job`; `mkf logs` finds its pods the same way).

What it rests on, in Kueue v0.19.2:
- the manager's Workload of a job is owned by it (ownerReferences, its uid:
  pkg/controller/jobframework/reconciler.go constructWorkload);
- MultiKueue writes the worker's Workload and job under the same namespace and name
  (pkg/controller/admissionchecks/multikueue/workload.go cloneForCreate, and each
  adapter's SyncJob), and `status.clusterName` on the manager's Workload names the
  MultiKueueCluster that admitted it (workload.go, reconcileGroup);
- the dispatcher nominates through `status.nominatedClusterNames` (controller/nominations.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from components.cli.job_args import JOB_KINDS, KINDS_BY_KEY, JobKind, name_of, uid_of
from controller.api.cluster_access import EVENTS, WORKLOADS, ApiError, Kind, Kube
from controller.api.terminal import Painter

PODS = Kind("", "v1", "pods", True)


class JobTrailError(Exception):
    """The job cannot be followed: the message says what was looked for and what to do."""


@dataclass
class Pod:
    name: str
    phase: str
    restarts: int
    node: str
    containers: list[str]
    default_container: str
    created: str


@dataclass
class WorkerSide:
    """The worker's copy: its Workload, the job, its pods; `problem` when it was not read."""

    cluster: str
    workload: str = ""  # its state: Admitted, Finished (Succeeded), ... or "" when absent
    job_found: bool = False
    pods: list[Pod] = field(default_factory=list)
    problem: str = ""


@dataclass
class WorkloadTrail:
    name: str
    queue: str
    state: str
    nominated: list[str]
    admitted_on: str
    # condition type -> lastTransitionTime, for the conditions that are True
    since: dict[str, str]
    workers: list[WorkerSide] = field(default_factory=list)


@dataclass
class EventLine:
    at: str
    cluster: str
    about: str  # Kind/name
    type: str
    reason: str
    message: str


@dataclass
class JobTrail:
    namespace: str
    name: str
    kind: str
    manager: str
    created: str
    workloads: list[WorkloadTrail]
    events: list[EventLine]

    @property
    def finished(self) -> bool:
        return bool(self.workloads) and all("Finished" in w.since for w in self.workloads)

    @property
    def running_on(self) -> list[str]:
        return sorted({w.admitted_on for w in self.workloads if w.admitted_on})

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "finished": self.finished}


def split_name(text: str, namespace: str | None) -> tuple[str, str]:
    """NAMESPACE/NAME or NAME (in --namespace, else default)."""
    ns, slash, name = text.rpartition("/")
    if slash and namespace and ns != namespace:
        raise JobTrailError(
            f"{text} names namespace {ns} and --namespace says {namespace}: give one of them"
        )
    name = name.strip()
    ns = ns or namespace or "default"
    if not name or not ns or "/" in ns:
        raise JobTrailError(f"{text!r} is not a job's NAME or NAMESPACE/NAME")
    return ns, name


def _conditions(obj: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        c.get("type", ""): c
        for c in ((obj.get("status") or {}).get("conditions") or [])
        if isinstance(c, dict)
    }


def workload_state(wl: Mapping[str, Any]) -> str:
    """What a person asks first: Finished (with its reason), Admitted, QuotaReserved, Evicted
    or Pending, from the Workload's True conditions."""
    conditions = {t: c for t, c in _conditions(wl).items() if c.get("status") == "True"}
    for kind in ("Finished", "Evicted", "Admitted", "QuotaReserved"):
        if kind in conditions:
            reason = conditions[kind].get("reason") or ""
            return f"{kind} ({reason})" if kind in ("Finished", "Evicted") and reason else kind
    return "Pending"


def _owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    return any(
        isinstance(o, dict) and o.get("uid") == uid
        for o in (obj.get("metadata") or {}).get("ownerReferences") or []
    )


# Each list's request waits this long at most: a person is waiting on `mkf job` and `logs`.
LIST_TIMEOUT = 30.0


async def find_job(
    manager: Kube, namespace: str, name: str, kinds: tuple[JobKind, ...]
) -> tuple[JobKind, dict[str, Any]]:
    """The one framework object of that name on the manager, among `kinds` (a kind the
    manager does not serve is a 404, as a missing object is)."""

    async def one(kind: JobKind) -> tuple[JobKind, dict[str, Any]] | None:
        try:
            return kind, await manager.get(kind.api, name, namespace)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    found = [f for f in await asyncio.gather(*(one(k) for k in kinds)) if f]
    if not found:
        looked = ", ".join(k.kind for k in kinds)
        raise JobTrailError(
            f"no {looked} named {namespace}/{name} on the manager ({manager.cluster}): check "
            f"the name and namespace (`kubectl get {kinds[0].key if len(kinds) == 1 else 'jobs'} "
            f"-n {namespace}` on the manager)"
            + ("" if len(kinds) == 1 else ", or name its kind with --kind")
        )
    if len(found) > 1:
        raise JobTrailError(
            f"{namespace}/{name} is a "
            + " and a ".join(k.kind for k, _ in found)
            + f" on the manager: say which with --kind {'|'.join(k.key for k, _ in found)}"
        )
    return found[0]


def _event_line(event: Mapping[str, Any], cluster: str) -> EventLine:
    involved = event.get("involvedObject") or {}
    at = (
        event.get("eventTime")
        or event.get("lastTimestamp")
        or event.get("firstTimestamp")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )
    return EventLine(
        str(at),
        cluster,
        f"{involved.get('kind', '?')}/{involved.get('name', '?')}",
        str(event.get("type") or ""),
        str(event.get("reason") or ""),
        " ".join(str(event.get("message") or "").split()),
    )


async def _events(kube: Kube, namespace: str, names: set[str]) -> list[EventLine]:
    """The events about any of `names` in the namespace, one field-selected list each."""
    lists = await asyncio.gather(
        *(
            kube.list(
                EVENTS,
                namespace,
                field_selector=f"involvedObject.name={n}",
                timeout=LIST_TIMEOUT,
            )
            for n in names
        )
    )
    return [_event_line(e, kube.cluster) for events, _ in lists for e in events]


def _pod(obj: Mapping[str, Any]) -> Pod:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    containers = [c.get("name", "") for c in spec.get("containers") or []]
    default = (meta.get("annotations") or {}).get("kubectl.kubernetes.io/default-container", "")
    return Pod(
        name=str(meta.get("name", "")),
        phase=str(status.get("phase") or "Pending"),
        restarts=sum(
            int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or []
        ),
        node=str(spec.get("nodeName") or ""),
        containers=containers,
        default_container=default if default in containers else (containers[:1] or [""])[0],
        created=str(meta.get("creationTimestamp") or ""),
    )


async def _worker_side(
    worker: Kube, kind: JobKind, namespace: str, job: str, workload: str
) -> tuple[WorkerSide, list[EventLine]]:
    side = WorkerSide(worker.cluster)
    try:
        try:
            side.workload = workload_state(await worker.get(WORKLOADS, workload, namespace))
        except ApiError as exc:
            if exc.status != 404:
                raise
        try:
            copy = await worker.get(kind.api, job, namespace)
            side.job_found = True
        except ApiError as exc:
            if exc.status != 404:
                raise
            return side, await _events(worker, namespace, {job, workload})
        pods, _ = await worker.list(
            PODS, namespace, label_selector=kind.pods(copy), timeout=LIST_TIMEOUT
        )
        side.pods = sorted((_pod(p) for p in pods), key=lambda p: (p.created, p.name))
        names = {job, workload, *(p.name for p in side.pods)}
        return side, await _events(worker, namespace, names)
    except ApiError as exc:
        side.problem = f"not read: {exc}"
        return side, []


async def follow(
    kubes: Mapping[str, Kube],
    manager_name: str,
    namespace: str,
    name: str,
    kinds: tuple[JobKind, ...] = JOB_KINDS,
    with_events: bool = True,
) -> JobTrail:
    """Everything about one job, asked of the manager and of each worker it was sent to."""
    manager = kubes[manager_name]
    kind, job = await find_job(manager, namespace, name, kinds)
    uid = uid_of(job)
    listed, _ = await manager.list(WORKLOADS, namespace, timeout=LIST_TIMEOUT)
    workloads = [w for w in listed if _owned_by(w, uid)]
    workloads.sort(key=lambda w: (w["metadata"].get("creationTimestamp", ""), name_of(w)))
    trails: list[WorkloadTrail] = []
    asked: list[Any] = []
    for wl in workloads:
        status = wl.get("status") or {}
        admitted_on = str(status.get("clusterName") or "")
        nominated = [str(c) for c in status.get("nominatedClusterNames") or []]
        trail = WorkloadTrail(
            name=name_of(wl),
            queue=str((wl.get("spec") or {}).get("queueName") or ""),
            state=workload_state(wl),
            nominated=nominated,
            admitted_on=admitted_on,
            since={
                t: str(c.get("lastTransitionTime") or "")
                for t, c in _conditions(wl).items()
                if c.get("status") == "True"
            },
        )
        trails.append(trail)
        # Where it runs; before a worker admits it, where MultiKueue copied it to wait.
        for cluster in [admitted_on] if admitted_on else nominated:
            if cluster in kubes:
                asked.append(
                    (trail, _worker_side(kubes[cluster], kind, namespace, name, trail.name))
                )
            else:
                trail.workers.append(
                    WorkerSide(
                        cluster,
                        problem="not read: the fleet's files hold no kubeconfig for it (a "
                        "worker the stack does not manage: ask it with its own kubeconfig)",
                    )
                )
    events: list[EventLine] = []
    results = await asyncio.gather(*(a for _, a in asked))
    for (trail, _), (side, said) in zip(asked, results, strict=True):
        trail.workers.append(side)
        events.extend(said)
    if with_events:
        events.extend(await _events(manager, namespace, {name, *(t.name for t in trails)}))
    events.sort(key=lambda e: (e.at, e.cluster))
    return JobTrail(
        namespace,
        name,
        kind.kind,
        manager_name,
        str((job.get("metadata") or {}).get("creationTimestamp") or ""),
        trails,
        events if with_events else [],
    )


def _clock(stamp: str) -> str:
    """The time of day of an RFC 3339 stamp (the date is in the job's header)."""
    _, sep, rest = stamp.partition("T")
    return rest.rstrip("Z")[:8] if sep else stamp or "-"


def table(trail: JobTrail, paint: Painter, last_events: int = 20) -> str:
    lines = [
        f"{trail.kind} {trail.namespace}/{trail.name} on {trail.manager}, created "
        f"{trail.created or '?'}"
    ]
    if not trail.workloads:
        lines.append(
            "  no Workload yet: Kueue makes one for a job with a kueue.x-k8s.io/queue-name "
            "label whose framework the manager's Kueue integrates"
        )
    for wl in trail.workloads:
        colour = "green" if wl.state.startswith("Finished (Succeeded") else "yellow"
        lines.append(f"Workload {wl.name} (queue {wl.queue or '-'}): {paint(wl.state, colour)}")
        lines.append(
            f"  nominated: {', '.join(wl.nominated) or '-'}    admitted on: "
            f"{wl.admitted_on or '- (no worker has admitted it yet)'}"
        )
        if wl.since:
            lines.append(
                "  "
                + "  ".join(
                    f"{k} {_clock(v)}" for k, v in sorted(wl.since.items(), key=lambda i: i[1])
                )
            )
        for side in wl.workers:
            if side.problem:
                lines.append(f"  on {side.cluster}: {paint(side.problem, 'red')}")
                continue
            if "Finished" in wl.since and not side.workload and not side.job_found:
                # Kueue v0.19.2 workload.go reconcileGroup: a finished Workload's remote
                # objects are deleted, the job's pods with them.
                lines.append(
                    f"  on {side.cluster}: removed by MultiKueue once finished (its pods and "
                    "their logs with it)"
                )
                continue
            lines.append(
                f"  on {side.cluster}: Workload {side.workload or 'not there (yet, or removed)'}; "
                f"{trail.kind} {'there' if side.job_found else 'not there'}"
            )
            if side.pods:
                width = max(len(p.name) for p in side.pods)
                lines.append(f"    {'POD':<{width}}  {'PHASE':<10} RESTARTS  NODE")
                for p in side.pods:
                    lines.append(
                        f"    {p.name:<{width}}  {p.phase:<10} {p.restarts:<8}  {p.node or '-'}"
                    )
            elif side.job_found:
                lines.append("    no pods (not started yet, or already removed)")
    if trail.events:
        shown = trail.events[-last_events:]
        more = len(trail.events) - len(shown)
        lines.append(
            "Events, oldest first"
            + (f" (the last {len(shown)} of {len(trail.events)})" if more else "")
            + ":"
        )
        width = max(len(e.about) for e in shown)
        for e in shown:
            what = paint(e.type, "yellow") if e.type == "Warning" else e.type
            lines.append(
                f"  {_clock(e.at)}  {e.cluster:<10} {e.about:<{width}}  {what} {e.reason}: "
                + e.message
            )
    return "\n".join(lines)


async def trail_of(
    kubes: Mapping[str, Kube],
    roles: Mapping[str, str],
    text: str,
    namespace: str | None,
    kind: str | None,
    with_events: bool = True,
) -> JobTrail:
    """`follow` for a name as the user wrote it; the manager not answering is a
    JobTrailError naming it."""
    ns, name = split_name(text, namespace)
    manager = next(n for n, role in roles.items() if role == "manager")
    kinds = (KINDS_BY_KEY[kind],) if kind else JOB_KINDS
    try:
        return await follow(kubes, manager, ns, name, kinds, with_events)
    except ApiError as exc:
        raise JobTrailError(
            f"the manager ({manager}) did not answer as it should ({exc}): `mkf status` "
            "says whether the fleet is up"
        ) from None
