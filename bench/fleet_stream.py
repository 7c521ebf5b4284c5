"""The workload stream of the real-fleet comparison (issue 30, part 1): one trace of the
simulation's kind (bench/dq_trace.py), scaled to a small fleet, both as the Kubernetes
objects to submit and as the Scenario the simulation replays, so the real run and its
prediction see the same stream.

What the scaling changes: run times and arrivals are divided by `time` (60: a trace minute
is a real second, so the median run time of 20 minutes becomes 20 s), and every request
is multiplied by the worker's real quota over the trace's 64 cores, so a 64-core trace
worker's load lands on a worker of a few cores. Kueue's and the dispatcher's own delays
(a cycle, a watch event, a pod's termination) do not scale: they weigh about 60 times more
against a run time than at full scale, which the simulation, replaying the scaled stream
with the same delays in seconds, models too. The kind nodes have no GPUs, so the stream
has none (the trace's GPU share is drawn as CPU jobs).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from dq_trace import Job, LocalJob, Scenario, WorkerSpec, jobs_poisson, local_work

from controller.model import MILLI
from loopback.kwok import RUN_ANNOTATION

TRACE_CORES = 64  # a trace worker's cores (dq_trace.fleet)
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # pkg/controller/constants/constants.go 23, v0.19.2
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"  # constants.go 48: a WorkloadPriorityClass


class StreamError(ValueError):
    """A stream that cannot be drawn as asked; the message says which option and why."""


@dataclass(frozen=True)
class Stream:
    """The scaled trace: `scenario` for the simulation, in real seconds and real quota."""

    scenario: Scenario
    time: float  # trace seconds per real second
    scale: float  # simulated cores per trace core, for the jobs (each worker's own for local work)
    # Real cores per simulated core: the objects request `unit` times what the simulation
    # counts, so a fleet too small for whole cores (kind nodes on a 2-core machine) holds the
    # stream at a fraction of its size with the same proportions.
    unit: float = 1.0


def draw(
    workers: dict[str, float],
    minutes: float = 3.0,
    time: float = 60.0,
    seed: int = 1,
    load: float = 0.5,
    local_load: float = 0.3,
    queues: dict[str, tuple[str, str]] | None = None,
    unit: float = 1.0,
) -> Stream:
    """Jobs arriving over `minutes` of real time on `workers` (name -> ClusterQueue cpu
    quota in real cores, at least 2 (the comparison's bench fleet has 3 of different sizes,
    as issue 30 asks; CI's check runs on the dev stack's 2); each a whole
    number of `unit`s, the simulated cores), loading the fleet
    to `load` of its cores, and local work loading each worker to `local_load`. `queues`:
    name -> (queueingStrategy, preemption.withinClusterQueue) of each worker's
    ClusterQueue, as the fleet has them (Kueue's defaults, BestEffortFIFO and Never, for a
    worker not given)."""
    if len(workers) < 2:
        raise StreamError(
            f"--worker: {len(workers)} given; the comparison needs a manager and at least "
            "2 workers (give --worker NAME=KUBECONFIG for each)"
        )
    bad = {name: cores for name, cores in workers.items() if not cores > 0}
    if bad:
        raise StreamError(
            f"worker quota: {bad} is not a positive number of cores; give each worker's "
            "ClusterQueue cpu nominalQuota"
        )
    if not (0 < minutes <= 20 and time >= 1 and 0 < load <= 1 and 0 <= local_load < 1):
        raise StreamError(
            "--minutes must be in (0, 20], --time-scale at least 1, --load in (0, 1] and "
            "--local-load in [0, 1)"
        )
    if not unit > 0:
        raise StreamError(f"--cpu-unit {unit!r}: give a positive number of cores")
    simulated = {name: cores / unit for name, cores in workers.items()}
    fractional = {
        n: c for n, c in workers.items() if abs(simulated[n] - round(simulated[n])) > 1e-6
    }
    if fractional:
        raise StreamError(
            f"worker quota: {fractional} is not a whole number of --cpu-unit {unit:g} cores "
            "(the simulation counts whole cores); give quotas that are multiples of it"
        )
    workers = {name: float(round(cores)) for name, cores in simulated.items()}
    rng = random.Random(f"fleet-stream/{seed}")
    hours = minutes * 60 * time / 3600  # real minutes, in hours of the trace
    # The trace is drawn on 64-core workers, then each piece is scaled to its worker.
    trace_workers = [
        WorkerSpec(name, TRACE_CORES, TRACE_CORES * 4, queueing="BestEffortFIFO")
        for name in workers
    ]
    fleet_scale = sum(workers.values()) / (TRACE_CORES * len(workers))
    jobs = tuple(
        _scaled_job(j, fleet_scale, time)
        for j in jobs_poisson(rng, TRACE_CORES * len(workers), hours, False, load)
    )
    local = tuple(
        _scaled_local(job, workers[w.name] / TRACE_CORES, time)
        for w in trace_workers
        for job in local_work(rng, w, local_load, hours)
    )
    # Real quotas: the simulation counts whole cores, so a fractional quota rounds down.
    queues = queues or {}
    real = tuple(
        WorkerSpec(
            name,
            max(int(cores), 1),
            max(int(cores), 1) * 4,
            0,
            *queues.get(name, ("BestEffortFIFO", "Never")),
        )
        for name, cores in workers.items()
    )
    cores = ", ".join(f"{n}: {c * unit:g} cores" for n, c in workers.items())
    about = (
        f"{len(workers)} workers ({cores}); {minutes:g} min of arrivals, time scaled "
        f"1/{time:g}" + (f", requests scaled {unit:g}" if unit != 1 else "") + f", seed {seed}"
    )
    scenario = Scenario("real-fleet", about, real, jobs, local, seed=seed)
    return Stream(scenario, time, fleet_scale, unit)


def _scale(requests: dict[str, int], factor: float) -> dict[str, int]:
    return {r: max(int(a * factor), 1) for r, a in requests.items()}


def _scaled_job(job: Job, factor: float, time: float) -> Job:
    return Job(
        job.name,
        job.arrival / time,
        _scale(job.requests, factor),
        job.duration / time,
        job.priority,
        job.kind,
        job.parts,
    )


def _scaled_local(job: LocalJob, factor: float, time: float) -> LocalJob:
    return LocalJob(
        job.worker,
        job.arrival / time,
        _scale(job.requests, factor),
        job.duration / time,
        job.priority,
    )


def _quantities(requests: dict[str, int], unit: float) -> dict[str, str]:
    """Kubernetes quantities of the simulation's milli-units, `unit` real per simulated."""
    out = {"cpu": f"{max(int(requests['cpu'] * unit), 1)}m"}
    if requests.get("memory"):
        out["memory"] = str(int(requests["memory"] * unit) // MILLI)
    return out


def _pod(
    name: str, requests: dict[str, int], seconds: float | None, image: str, unit: float
) -> dict[str, Any]:
    """A pod that sleeps `seconds` and ends, or (None) serves until deleted."""
    return {
        "restartPolicy": "Never" if seconds is not None else "Always",
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": name,
                "image": image,
                "command": [
                    "sleep",
                    f"{max(seconds, 1.0):.0f}" if seconds is not None else "infinity",
                ],
                "resources": {
                    "requests": _quantities(requests, unit),
                    "limits": _quantities(requests, unit),
                },
            }
        ],
    }


def _template(
    name: str, requests: dict[str, int], seconds: float, image: str, unit: float
) -> dict[str, Any]:
    """A pod template that runs `seconds`: its container sleeps that long on a kubelet, and
    KWOK's pod-complete stage reads the same time from RUN_ANNOTATION on simulated nodes
    (loopback/kwok.py)."""
    return {
        "metadata": {"annotations": {RUN_ANNOTATION: f"{max(seconds, 1.0):.0f}s"}},
        "spec": _pod(name, requests, seconds, image, unit),
    }


def _meta(name: str, namespace: str, queue: str, priority_class: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": namespace,
        "labels": {QUEUE_LABEL: queue, PRIORITY_LABEL: priority_class},
    }


def job_object(
    job: Job,
    stream: Stream,
    namespace: str,
    queue: str,
    priority_classes: dict[int, str],
    image: str,
) -> dict[str, Any]:
    """What to submit on the manager for one job of `stream`: a batch Job (cpu), a JobSet of
    a driver and its workers (multi: one Workload of two pod sets), or a LeaderWorkerSet of
    `parts` groups of one pod (lws: one Workload per group). Suspended: Kueue starts them
    once admitted."""
    if job.priority not in priority_classes:
        raise StreamError(
            f"--priority-class: none given for priority {job.priority}; give "
            f"--priority-class {job.priority}=NAME (a WorkloadPriorityClass on the fleet)"
        )
    meta = _meta(job.name, namespace, queue, priority_classes[job.priority])
    if job.kind == "multi":
        # dq_trace.shape: a driver of 1 core and 4 GiB, and `workers` of 4 cores and 16 GiB.
        workers = max(round((job.requests["cpu"] / stream.scale / MILLI - 1) / 4), 1)
        driver = _scale({"cpu": MILLI, "memory": 4 * 1024**3 * MILLI}, stream.scale)
        worker = _scale({"cpu": 4 * MILLI, "memory": 16 * 1024**3 * MILLI}, stream.scale)

        def replicated(name: str, pods: int, requests: dict[str, int]) -> dict[str, Any]:
            return {
                "name": name,
                "replicas": 1,
                "template": {
                    "spec": {
                        "parallelism": pods,
                        "completions": pods,
                        "backoffLimit": 0,
                        "template": _template(name, requests, job.duration, image, stream.unit),
                    }
                },
            }

        return {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": meta,
            "spec": {
                "suspend": True,
                "replicatedJobs": [
                    replicated("driver", 1, driver),
                    replicated("workers", workers, worker),
                ],
            },
        }
    if job.kind == "lws":
        # A LeaderWorkerSet serves (its pods are a StatefulSet's, restartPolicy Always):
        # it never finishes by itself, so the replay deletes it `job.duration` after the last
        # of its groups is admitted.
        template = {"spec": _pod("worker", job.requests, None, image, stream.unit)}
        return {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": meta,
            "spec": {
                "replicas": job.parts,
                "leaderWorkerTemplate": {"size": 1, "workerTemplate": template},
            },
        }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            "suspend": True,  # Kueue unsuspends it once admitted
            "backoffLimit": 0,
            "template": _template("job", job.requests, job.duration, image, stream.unit),
        },
    }


def local_object(
    job: LocalJob,
    index: int,
    namespace: str,
    queue: str,
    priority_classes: dict[int, str],
    image: str,
    unit: float = 1.0,
) -> dict[str, Any]:
    """Local work: a batch Job submitted straight to its worker's LocalQueue."""
    if job.priority not in priority_classes:
        raise StreamError(
            f"--priority-class: none given for priority {job.priority}; give "
            f"--priority-class {job.priority}=NAME (a WorkloadPriorityClass on the fleet)"
        )
    name = f"local-{job.worker}-{index:04}"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta(name, namespace, queue, priority_classes[job.priority]),
        "spec": {
            "suspend": True,
            "backoffLimit": 0,
            "template": _template("local", job.requests, job.duration, image, unit),
        },
    }
