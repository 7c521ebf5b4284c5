"""The real-fleet comparison (issue 30, part 1): one workload stream (bench/fleet_stream.py)
replayed on a running MultiKueue fleet, measured from Kueue's own objects
(bench/fleet_metrics.py), beside the simulation's prediction of the same stream.

    .venv-dev/bin/python bench/fleet_replay.py --manager manager.kubeconfig \\
        --worker worker1=w1.kubeconfig:4 --worker worker2=w2.kubeconfig:6 \\
        --worker worker3=w3.kubeconfig:8 --dispatcher AllAtOnce [--minutes 3] [--seed 1]
        [--namespace team-a] [--queue user-queue] [--local-queue user-queue]
        [--priority-class 0=low --priority-class 100=normal --priority-class 200=high]
        [--image busybox:1.36] [--timeout 1200] [--out run.json]

One run replays the stream through whichever dispatcher the fleet runs now (Kueue's
AllAtOnce, Incremental, or ours: `--dispatcher` names it for the table and picks the
simulation's row to set beside it); run it once per dispatcher, with the fleet reset
between runs (every Job, JobSet and LeaderWorkerSet of the namespace deleted: `--reset`
does that and waits for their Workloads to go). Each worker is NAME=KUBECONFIG:CORES, its
ClusterQueue's cpu quota. Prints one table: the real run's measures beside the
simulation's; `--out` keeps the run's measures as JSON. The exit code is 1 when a job did
not finish, an admission was lost, or a workload was left pending: what the CI's small run
asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import yaml
from dispatch_quality import measure as simulated
from dq_dispatchers import AllAtOnce, Incremental, OurPolicy
from dq_sim import Dispatcher, Settings, Sim
from fleet_metrics import RecordError, measure
from fleet_stream import Stream, StreamError, draw, job_object, local_object

from controller.kinds import WORKLOADS, Kind
from controller.kube import ApiError, Gone, Kube

JOBS = Kind("batch", "v1", "jobs", True)
JOBSETS = Kind("jobset.x-k8s.io", "v1alpha2", "jobsets", True)
LEADER_WORKER_SETS = Kind("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", True)
KINDS = {"Job": JOBS, "JobSet": JOBSETS, "LeaderWorkerSet": LEADER_WORKER_SETS}
SIMULATED: dict[str, Callable[[], Dispatcher]] = {
    "AllAtOnce": AllAtOnce,
    "Incremental": Incremental,
    "policy": OurPolicy,
}
# The measures in the table: (key, heading); times in seconds of the scaled run.
COLUMNS = (
    ("p50", "admit P50 s"),
    ("p95", "admit P95 s"),
    ("p99", "admit P99 s"),
    ("jct_p95", "JCT P95 s"),
    ("copies", "copies/wl"),
    ("preemptions", "preemptions"),  # victims of a MultiKueue copy, as the simulation's
    ("local_preemptions", "local preemptions"),  # local work preempting local work
    ("evictions", "evictions"),
    ("lost", "lost"),
)


class Recorder:
    """Every version of one cluster's Workloads seen: a list, then a watch from it,
    listing again when the watch's history is gone (410). `gone`: the Workloads deleted,
    from their DELETED event or, across a new list, by no longer being there. A Workload
    deleted with no finalizer left (a LeaderWorkerSet's, collected with it) ends with no
    deletionTimestamp in any version seen: only its deletion says it is over."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace
        self.seen: list[dict[str, Any]] = []
        self.latest: dict[str, dict[str, Any]] = {}
        self.gone: dict[str, float] = {}  # namespace/name -> when its deletion was seen

    def _record(self, obj: dict[str, Any]) -> str:
        self.seen.append(obj)
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        self.latest[key] = obj
        return key

    def over(self, key: str) -> bool:
        """Finished, or being deleted, or deleted."""
        obj = self.latest[key]
        return (
            key in self.gone
            or _true(obj, "Finished")
            or bool((obj.get("metadata") or {}).get("deletionTimestamp"))
        )

    async def run(self) -> None:
        while True:
            items, version = await self.kube.list(WORKLOADS, self.namespace)
            listed = {self._record(obj) for obj in items}
            for key in set(self.latest) - listed - set(self.gone):
                self.gone[key] = time.time()
            try:
                while True:
                    async for event in self.kube.watch(WORKLOADS, version, self.namespace):
                        obj = event.get("object") or {}
                        if event.get("type") == "ERROR":
                            raise Gone()
                        version = (obj.get("metadata") or {}).get("resourceVersion", version)
                        if event.get("type") == "BOOKMARK":
                            continue
                        key = self._record(obj)
                        if event.get("type") == "DELETED":
                            self.gone.setdefault(key, time.time())
            except Gone:
                continue


def _true(obj: dict[str, Any], kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def _owned_by(obj: dict[str, Any], kind: str, name: str) -> bool:
    return any(
        o.get("kind") == kind and o.get("name") == name
        for o in (obj.get("metadata") or {}).get("ownerReferences") or []
    )


async def _at(start: float, seconds: float) -> None:
    await asyncio.sleep(max(0.0, start + seconds - time.monotonic()))


async def replay(
    stream: Stream,
    manager: Kube,
    workers: dict[str, Kube],
    namespace: str,
    queue: str,
    local_queue: str,
    priority_classes: dict[int, str],
    image: str,
    timeout: float,
    served_kinds: frozenset[str] = frozenset({"LeaderWorkerSet"}),
    keep: Path | None = None,
) -> tuple[dict[str, float], set[str]]:
    """Submits the stream at its times, serves each object of `served_kinds` (by default the
    LeaderWorkerSets, which never end by themselves) its run time from its admission, and
    waits until every manager Workload has finished (or `timeout`). Returns the measures
    and the objects served; `keep`: a JSON file for every version of every Workload seen,
    by cluster ("" the manager), to read a run again (bench/fleet_metrics.py)."""
    recorders = {
        "": Recorder(manager, namespace),
        **{n: Recorder(k, namespace) for n, k in workers.items()},
    }
    watching = [asyncio.create_task(r.run()) for r in recorders.values()]
    served: set[str] = set()
    pending: list[asyncio.Task] = []

    async def serve(kind: str, name: str, seconds: float, groups: int) -> None:
        """Delete `kind` `name` `seconds` after the last of its `groups` Workloads is
        admitted: every group has run at least its time (the earlier ones longer), and none
        is deleted before it ran."""
        admitted: set[str] = set()
        while len(admitted) < groups:
            admitted |= {
                key
                for key, o in recorders[""].latest.items()
                if _owned_by(o, kind, name) and _true(o, "Admitted")
            }
            await asyncio.sleep(0.5)
        await asyncio.sleep(seconds)
        await manager.request("DELETE", KINDS[kind].path(namespace, name))
        served.add(f"{namespace}/{name}")

    try:
        start = time.monotonic()
        submissions: list[tuple[float, Kube, dict[str, Any]]] = [
            (j.arrival, manager, job_object(j, stream, namespace, queue, priority_classes, image))
            for j in stream.scenario.jobs
        ]
        submissions += [
            (
                job.arrival,
                workers[job.worker],
                local_object(job, i, namespace, local_queue, priority_classes, image, stream.unit),
            )
            for i, job in enumerate(stream.scenario.local)
        ]
        jobs = {j.name: j for j in stream.scenario.jobs}
        for arrival, kube, obj in sorted(submissions, key=lambda s: s[0]):
            await _at(start, arrival)
            await kube.create(KINDS[obj["kind"]], obj, namespace, answer="none")
            if obj["kind"] in served_kinds and kube is manager:
                name = obj["metadata"]["name"]
                job = jobs[name]
                pending.append(
                    asyncio.create_task(serve(obj["kind"], name, job.duration, job.parts))
                )
        # Every workload the stream makes on the manager (a LeaderWorkerSet one per group)
        # finished, or deleted after serving its time.
        expected = sum(j.parts for j in stream.scenario.jobs)
        deadline = start + timeout
        while time.monotonic() < deadline:
            ours = list(recorders[""].latest)
            done = sum(1 for key in ours if recorders[""].over(key))
            if len(ours) >= expected and done >= len(ours):
                break
            for cluster, task in zip(recorders, watching, strict=True):
                if task.done() and task.exception() is not None:
                    raise RecordError(
                        f"{cluster or 'manager'}: watching Workloads in {namespace} failed "
                        f"({task.exception()}); the run is not measured"
                    )
            await asyncio.sleep(1.0)
    finally:
        for task in [*watching, *pending]:
            task.cancel()
        await asyncio.gather(*watching, *pending, return_exceptions=True)
    if keep is not None:
        keep.parent.mkdir(parents=True, exist_ok=True)
        keep.write_text(json.dumps({n: r.seen for n, r in recorders.items()}))
    found = measure(
        recorders[""].seen,
        {n: recorders[n].seen for n in workers},
        served=served,
        deleted=recorders[""].gone,
    )
    return found, served


async def delete(kube: Kube, kind: Kind, namespace: str, name: str) -> None:
    """Deletes an object (its dependents in the background); one already gone is deleted
    as far as anyone can tell: on a loaded host a listed object, or one deleted a moment
    ago, may have left before the request arrives (a 404, not a failure)."""
    try:
        await kube.request(
            "DELETE", kind.path(namespace, name), body={"propagationPolicy": "Background"}
        )
    except ApiError as exc:
        if exc.status != 404:
            raise


async def gone(kube: Kube, kind: Kind, namespace: str, name: str, timeout: float = 300) -> None:
    """Waits until the object no longer exists (a Job deleted in the background stays while
    its finalizers run), so that one of the same name can be created again."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            await kube.get(kind, name, namespace)
        except ApiError as exc:
            if exc.status == 404:
                return
            raise
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{kube.cluster}: {kind.plural} {namespace}/{name} still exists {timeout:.0f} s "
                "after its deletion; see its finalizers (`kubectl get -o yaml`)"
            )
        await asyncio.sleep(1.0)


async def reset(kubes: list[Kube], namespace: str, timeout: float = 300) -> None:
    """Deletes every Job, JobSet and LeaderWorkerSet of `namespace` on each cluster (their
    pods with them) and waits until no Workload is left there."""
    for kube in kubes:
        for kind in KINDS.values():
            try:
                items, _ = await kube.list(kind, namespace)
            except ApiError as exc:
                if exc.status == 404:
                    continue  # that framework is not installed on this cluster
                raise
            for obj in items:
                await delete(kube, kind, namespace, obj["metadata"]["name"])
    deadline = time.monotonic() + timeout
    for kube in kubes:
        while (await kube.list(WORKLOADS, namespace))[0]:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{kube.cluster}: Workloads left in {namespace} after {timeout:.0f} s; "
                    "see `kubectl get workloads -n NAMESPACE` there"
                )
            await asyncio.sleep(1.0)


def table(dispatcher: str, real: dict[str, float], predicted: dict[str, float]) -> str:
    """The real run beside the simulation's prediction of the same stream."""

    def cell(value: float) -> str:
        return "n/a" if math.isnan(value) else f"{value:.1f}" if value % 1 else f"{value:.0f}"

    head = "| run | " + " | ".join(h for _, h in COLUMNS) + " | unfinished | pending |"
    rule = "|---|" + "---:|" * (len(COLUMNS) + 2)
    rows = []
    for label, found in ((f"{dispatcher} (real)", real), (f"{dispatcher} (simulated)", predicted)):
        cells = [cell(found.get(key, math.nan)) for key, _ in COLUMNS]
        cells += [cell(found.get("unfinished", math.nan)), cell(found.get("pending", math.nan))]
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join([head, rule, *rows])


def _predicted(
    stream: Stream, dispatcher: str, settings: Settings | None = None
) -> dict[str, float]:
    """The simulation's measures of the same stream, in the same units (seconds); `settings`:
    the delays of the fleet it stands for (a kind fleet's by default)."""
    sim = Sim(stream.scenario, SIMULATED[dispatcher](), settings or Settings()).run()
    found = simulated(sim)
    reads = sim.clients.reads / max(len(sim.wls), 1)
    return {
        **{k: float(v) for k, v in found.items() if isinstance(v, int | float)},
        # MultiKueue's reads of the copies (readGroup), where its clients are modelled
        # (dq_clients.py).
        "workload_reads": reads if sim.clients.limited else math.nan,
        "unfinished": float(found["never"]),
        "pending": float(found["never"]),
    }


def _workers(values: list[str]) -> dict[str, tuple[Path, float]]:
    out = {}
    for value in values:
        name, sep, rest = value.partition("=")
        path, sep2, cores = rest.rpartition(":")
        try:
            quota = float(cores)
        except ValueError:
            quota = math.nan
        if not (sep and sep2 and name and path) or not quota > 0:
            raise StreamError(
                f"--worker {value!r}: write NAME=KUBECONFIG:CORES (CORES: the worker "
                "ClusterQueue's cpu quota, a positive number)"
            )
        out[name] = (Path(path), quota)
    return out


def _classes(values: list[str]) -> dict[int, str]:
    out = {}
    for value in values:
        level, sep, name = value.partition("=")
        if not sep or not name or not level.lstrip("-").isdigit():
            raise StreamError(
                f"--priority-class {value!r}: write PRIORITY=NAME (an integer and a "
                "WorkloadPriorityClass on the fleet)"
            )
        out[int(level)] = name
    return out


def _kubeconfig(path: Path, what: str) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise StreamError(f"{what} {path}: cannot read it as a kubeconfig ({exc})") from None
    if not isinstance(loaded, dict) or not loaded.get("clusters"):
        raise StreamError(f"{what} {path}: not a kubeconfig (no clusters); give its path")
    return loaded


async def _run(args: argparse.Namespace, run: Callable[..., Awaitable[Any]] = replay) -> int:
    workers = _workers(args.worker)
    classes = _classes(args.priority_class)
    stream = draw(
        {name: cores for name, (_, cores) in workers.items()},
        args.minutes,
        args.time_scale,
        args.seed,
    )
    configs = {name: _kubeconfig(path, f"--worker {name}") for name, (path, _) in workers.items()}
    manager = await Kube.from_kubeconfig(_kubeconfig(args.manager, "--manager"), "manager")
    kubes = {name: await Kube.from_kubeconfig(c, name) for name, c in configs.items()}
    try:
        if args.reset:
            await reset([manager, *kubes.values()], args.namespace)
        real, _ = await run(
            stream,
            manager,
            kubes,
            args.namespace,
            args.queue,
            args.local_queue,
            classes,
            args.image,
            args.timeout,
        )
    finally:
        for kube in (manager, *kubes.values()):
            await kube.close()
    predicted = _predicted(stream, args.dispatcher)
    print(f"{stream.scenario.about}; {len(stream.scenario.jobs)} jobs\n")
    print(table(args.dispatcher, real, predicted))
    if args.out:
        args.out.write_text(
            json.dumps(
                {"dispatcher": args.dispatcher, "real": real, "simulated": predicted}, indent=1
            )
        )
    return 1 if real["unfinished"] or real["lost"] or real["pending"] else 0


# What a run on a fleet can end in that is the fleet's or the input's fault, not a bug.
RUN_ERRORS = (StreamError, RecordError, TimeoutError, ApiError)


def report_error(exc: Exception, refused_hint: str) -> int:
    """One line on stderr for one of RUN_ERRORS; the exit code."""
    if isinstance(exc, ApiError):
        print(f"error: the API server refused: {exc}; {refused_hint}", file=sys.stderr)
    else:
        print(f"error: {exc}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manager", type=Path, required=True, help="the manager's kubeconfig")
    parser.add_argument("--worker", action="append", default=[], help="NAME=KUBECONFIG:CORES")
    parser.add_argument("--dispatcher", choices=sorted(SIMULATED), required=True)
    parser.add_argument("--minutes", type=float, default=3.0, help="of arrivals, real time")
    parser.add_argument("--time-scale", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--namespace", default="team-a")
    parser.add_argument("--queue", default="user-queue", help="the manager's LocalQueue")
    parser.add_argument("--local-queue", default="user-queue", help="the workers' LocalQueue")
    parser.add_argument(
        "--priority-class",
        action="append",
        default=[],
        help="PRIORITY=NAME, a WorkloadPriorityClass for each of 0, 100 and 200",
    )
    parser.add_argument("--image", default="busybox:1.36", help="an image with `sleep`")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds, at most")
    parser.add_argument("--reset", action="store_true", help="empty the namespace first")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    try:
        return asyncio.run(_run(args))
    except RUN_ERRORS as exc:
        return report_error(exc, "check the kubeconfigs and that the fleet's CRDs and queues exist")


if __name__ == "__main__":
    sys.exit(main())
