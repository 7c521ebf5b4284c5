"""`mkf logs`: a job's container logs from the worker that runs it, through the kubeconfig
the fleet keeps for that worker, as `kubectl logs` there prints them (each line prefixed
`[pod/container]` when several pods are shown)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from components.cli.job_trail import PODS, JobTrail, JobTrailError, Pod, trail_of
from controller.api.cluster_access import ApiError, Kube


class NotYet(JobTrailError):
    """No logs yet, and there will be: not admitted, no pods yet, or pods still Pending."""


@dataclass(frozen=True)
class Source:
    cluster: str
    pod: str
    container: str


def choose(
    trail: JobTrail,
    pod: str | None,
    all_pods: bool,
    container: str | None,
    note: Callable[[str], None],
) -> list[Source]:
    """The containers to read: one pod (the one named, or the job's first as `kubectl logs
    job/NAME` takes), or every pod with --all-pods; the container named, else the pod's
    default (its kubectl.kubernetes.io/default-container, else its first)."""
    where = [
        (side.cluster, p)
        for wl in trail.workloads
        for side in wl.workers
        if wl.admitted_on and side.cluster == wl.admitted_on
        for p in side.pods
    ]
    what = f"{trail.kind} {trail.namespace}/{trail.name}"
    see = f"`mkf job {trail.namespace}/{trail.name}`"
    if trail.finished and not where:
        # Kueue v0.19.2 deletes a finished Workload's remote objects, the job with its pods
        # (pkg/controller/admissionchecks/multikueue/workload.go, reconcileGroup step 2).
        raise JobTrailError(
            f"{what} has finished on {', '.join(trail.running_on) or 'its worker'}, and "
            "MultiKueue removed its copy there with its pods, whose logs went with them: read "
            "them while it runs (`mkf logs -f`), or keep them with a log collector; "
            f"{see} still shows its events"
        )
    if not trail.running_on:
        nominated = sorted({c for wl in trail.workloads for c in wl.nominated})
        raise NotYet(
            f"{what} has not been admitted on any worker yet"
            + (f" (nominated: {', '.join(nominated)})" if nominated else "")
            + f", so it has no logs: {see} shows where it waits (--watch follows it)"
        )
    if not where:
        raise NotYet(
            f"{what} is admitted on {', '.join(trail.running_on)} but has no pods there yet: "
            f"{see} shows its pods and events"
        )
    if pod:
        where = [(c, p) for c, p in where if p.name == pod]
        if not where:
            raise JobTrailError(
                f"{what} has no pod {pod}: its pods are "
                + ", ".join(p.name for _, p in _all(trail))
            )
    elif not all_pods and len(where) > 1:
        note(
            f"note: showing pod {where[0][1].name}, the first of {len(where)}: --all-pods "
            "shows every pod, --pod NAME one"
        )
        where = where[:1]
    waiting = [p.name for _, p in where if p.phase == "Pending"]
    if waiting:
        raise NotYet(f"pod {', '.join(waiting)} of {what} is Pending: its containers have not run")
    sources = []
    for cluster, p in where:
        name = container or _default(p, note)
        if name not in p.containers:
            raise JobTrailError(
                f"pod {p.name} has no container {name}: its containers are "
                + ", ".join(p.containers)
            )
        sources.append(Source(cluster, p.name, name))
    return sources


async def choose_when_running(
    kubes: Mapping[str, Kube],
    roles: Mapping[str, str],
    job: str,
    namespace: str | None,
    kind: str | None,
    *,
    pod: str | None,
    all_pods: bool,
    container: str | None,
    pod_running_timeout: float,
    note: Callable[[str], None],
    interval: float = 1.0,
) -> tuple[JobTrail, list[Source]]:
    """The job's trail and the containers to read (`choose`), asked again every `interval`
    seconds while there are no logs yet but will be (NotYet: not admitted, no pods, pods
    Pending), for up to `pod_running_timeout` seconds, as kubectl logs
    --pod-running-timeout waits: `mkf logs` just after the job was submitted prints its
    logs instead of failing. `note` says once what is waited for; when the time is up, the
    last NotYet is raised."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + pod_running_timeout
    said = False  # the wait is announced once, not every second
    while True:
        trail = await trail_of(kubes, roles, job, namespace, kind, with_events=False)
        try:
            return trail, choose(trail, pod, all_pods, container, note)
        except NotYet as exc:
            if loop.time() >= deadline:
                raise
            if not said:
                note(f"waiting up to {pod_running_timeout:g}s (--pod-running-timeout): {exc}")
                said = True
            await asyncio.sleep(interval)


def _all(trail: JobTrail) -> list[tuple[str, Pod]]:
    return [(s.cluster, p) for wl in trail.workloads for s in wl.workers for p in s.pods]


def _default(pod: Pod, note: Callable[[str], None]) -> str:
    if len(pod.containers) > 1:
        note(
            f'note: defaulted container "{pod.default_container}" out of: '
            f"{', '.join(pod.containers)} (-c NAME picks one)"
        )
    return pod.default_container


async def print_logs(
    kubes: Mapping[str, Kube],
    namespace: str,
    sources: list[Source],
    follow: bool,
    since: int | None,
    out: Callable[[str], None],
) -> list[str]:
    """Each source's log, prefixed when there are several; with `follow`, read as it comes
    from all of them at once, until each container ends. Returns one line per source whose
    log could not be read (the others are still printed)."""
    prefixed = len(sources) > 1
    problems: list[str] = []

    async def one(source: Source) -> None:
        kube = kubes[source.cluster]
        path = PODS.path(namespace, source.pod, "log")
        query: list[tuple[str, object]] = [("container", source.container)]
        if since:
            query.append(("sinceSeconds", since))
        prefix = f"[{source.pod}/{source.container}] " if prefixed else ""
        try:
            if follow:
                query.append(("follow", "true"))
                async for line in kube.lines(path, query):
                    out(prefix + line.decode("utf-8", "replace").rstrip("\n"))
            else:
                text = (await kube.read(path, 60, query)).decode("utf-8", "replace")
                for line in text.splitlines():
                    out(prefix + line)
        except ApiError as exc:
            problems.append(
                f"the log of pod {source.pod} (container {source.container}) on "
                f"{source.cluster} was not read: {exc}"
            )

    if follow:
        await asyncio.gather(*(one(s) for s in sources))
    else:
        for source in sources:  # one after another: each pod's lines together
            await one(source)
    return problems
