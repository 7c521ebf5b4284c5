"""Traces for the dispatch-quality simulation: the fleets, the named scenarios and the CSV
reader. Everything is drawn from a seeded `random.Random`, so a scenario is the same trace
on every run and for every dispatcher.

Distributions (stated in BENCHMARKS.md as well):
- MultiKueue jobs arrive as a Poisson process (exponential gaps) at a rate that loads the
  fleet to about 80% with the local work; "bursts" sends them in bursts instead.
- Shapes: 55% CPU-only (1, 2, 4, 8 or 16 cores, 4 GiB per core); 15% GPU (1, 2, 4 or 8
  GPUs, 8 cores and 32 GiB per GPU) where the fleet has GPUs, else CPU-only; 20%
  multi-pod-set (a 1-core driver and 2 to 8 workers of 4 cores); 10% LeaderWorkerSet
  groups (2 to 4 component workloads of 8 cores each, which must land on one cluster).
- Run times: log-normal, median 20 min, sigma 0.8, clipped to [1 min, 4 h].
- Priorities: MultiKueue jobs 100; each worker's local work 0 (70%) or 200 (30%), so a
  MultiKueue copy may preempt local work and high-priority local work may evict it.
"""

from __future__ import annotations

import csv
import math
import random
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from controller.model import MILLI, milli

GPU = "nvidia.com/gpu"
GI = 1024**3 * MILLI
Resources = dict[str, int]


def res(cpu: float, memory_gi: float = 0.0, gpu: int = 0) -> Resources:
    """Requests in the policy's milli-units."""
    out = {"cpu": int(cpu * MILLI), "memory": int(memory_gi * GI)}
    if gpu:
        out[GPU] = gpu * MILLI
    return out


@dataclass(frozen=True)
class WorkerSpec:
    name: str
    cpu: int
    memory_gi: int
    gpu: int = 0
    queueing: str = "BestEffortFIFO"  # or "StrictFIFO"
    preemption: str = "LowerPriority"  # withinClusterQueue: or "Never"


@dataclass(frozen=True)
class Job:
    """One MultiKueue submission: `parts` workloads (more than one only for a
    LeaderWorkerSet group), each requesting `requests`."""

    name: str
    arrival: float
    requests: Resources
    duration: float
    priority: int = 100
    kind: str = "cpu"
    parts: int = 1


@dataclass(frozen=True)
class LocalJob:
    """Work submitted straight to a worker's Kueue, outside MultiKueue."""

    worker: str
    arrival: float
    requests: Resources
    duration: float
    priority: int


@dataclass(frozen=True)
class Scenario:
    name: str
    about: str
    workers: tuple[WorkerSpec, ...]
    jobs: tuple[Job, ...]
    local: tuple[LocalJob, ...] = ()
    uneven: bool = False  # workers unevenly loaded: the "2x better than Incremental" target
    seed: int = 0  # what the trace was drawn from; the simulation's ties are drawn from it too


def run_time(rng: random.Random, median: float = 1200.0) -> float:
    return min(max(rng.lognormvariate(math.log(median), 0.8), 60.0), 4 * 3600.0)


def shape(rng: random.Random, gpus: bool) -> tuple[str, Resources, int]:
    """(kind, requests of one workload, workloads in the group)."""
    draw = rng.random()
    if draw < 0.15 and gpus:
        n = rng.choice((1, 2, 4, 8))
        return "gpu", res(8 * n, 32 * n, n), 1
    if 0.15 <= draw < 0.35:
        workers = rng.randint(2, 8)
        return "multi", res(1 + 4 * workers, 4 + 16 * workers), 1
    if 0.35 <= draw < 0.45:
        return "lws", res(8, 32), rng.randint(2, 4)
    cores = rng.choice((1, 2, 4, 8, 16))
    return "cpu", res(cores, 4 * cores), 1


def _core_seconds(job: Job) -> float:
    return job.requests["cpu"] / MILLI * job.parts * job.duration


def fleet(
    n: int, gpu_workers: tuple[int, ...] = (), cpu: int = 64, kueue_defaults: bool = False
) -> tuple[WorkerSpec, ...]:
    """`n` workers named worker-00.., in that order in the MultiKueueConfig (Incremental
    nominates in config order); even ones BestEffortFIFO, odd ones StrictFIFO, every fourth
    never preempting; or, with `kueue_defaults`, every one as Kueue's defaults make it
    (BestEffortFIFO, `withinClusterQueue: Never`: apis/kueue/v1beta2/clusterqueue_types.go)."""
    return tuple(
        WorkerSpec(
            f"worker-{i:02}",
            cpu,
            cpu * 4,
            16 if i in gpu_workers else 0,
            "BestEffortFIFO" if i % 2 == 0 or kueue_defaults else "StrictFIFO",
            "Never" if i % 4 == 3 or kueue_defaults else "LowerPriority",
        )
        for i in range(n)
    )


def mixed_gpu_fleet() -> tuple[WorkerSpec, ...]:
    """4 workers of 8 GPUs (64 cores, 256 GiB) and 16 of 1 GPU (8 cores, 32 GiB), on
    Kueue's defaults, listed by name (the big ones first: Incremental's first round is
    three of them)."""
    big = [WorkerSpec(f"big-{i:02}", 64, 256, 8, preemption="Never") for i in range(4)]
    small = [WorkerSpec(f"small-{i:02}", 8, 32, 1, preemption="Never") for i in range(16)]
    return tuple(big + small)


def jobs_gpu_bursts(rng: random.Random, bursts: int, size: int) -> list[Job]:
    """`size` GPU jobs within a minute, every 40 minutes: 1 GPU (60%), 4 (25%) or 8 (15%),
    8 cores and 32 GiB per GPU; an 8-GPU job takes a whole big worker."""
    out: list[Job] = []
    for b in range(bursts):
        for _ in range(size):
            draw = rng.random()
            n = 1 if draw < 0.6 else 4 if draw < 0.85 else 8
            t = b * 2400.0 + rng.uniform(0, 60)
            out.append(
                Job(f"job-{len(out):04}", t, res(8 * n, 32 * n, n), run_time(rng), 100, "gpu")
            )
    return sorted(out, key=lambda j: j.arrival)


def local_work(rng: random.Random, worker: WorkerSpec, load: float, hours: float) -> list[LocalJob]:
    """Local jobs loading `worker` to about `load` of its cores over `hours`."""
    out: list[LocalJob] = []
    mean_core_s = 4.0 * 1.38 * 1200.0  # 4 cores x log-normal mean
    rate = load * worker.cpu / mean_core_s
    t = rng.expovariate(rate) if rate > 0 else math.inf
    while t < hours * 3600:
        cores = rng.choice((2, 4, 6))
        priority = 200 if rng.random() < 0.3 else 0
        out.append(LocalJob(worker.name, t, res(cores, 4 * cores), run_time(rng), priority))
        t += rng.expovariate(rate)
    return out


def jobs_poisson(
    rng: random.Random, cores: float, hours: float, gpus: bool, load: float
) -> list[Job]:
    """Jobs at a rate whose mean demand is `load` of `cores`."""
    mean_core_s = 12.3 * 1.38 * 1200.0  # the shape mix's mean cores x mean run time
    rate = load * cores / mean_core_s
    out: list[Job] = []
    t = rng.expovariate(rate)
    while t < hours * 3600:
        kind, requests, parts = shape(rng, gpus)
        out.append(Job(f"job-{len(out):04}", t, requests, run_time(rng), 100, kind, parts))
        t += rng.expovariate(rate)
    return out


def jobs_bursts(rng: random.Random, gpus: bool, bursts: int, size: int) -> list[Job]:
    """`size` jobs within a minute, every 40 minutes."""
    out: list[Job] = []
    for b in range(bursts):
        for _ in range(size):
            kind, requests, parts = shape(rng, gpus)
            t = b * 2400.0 + rng.uniform(0, 60)
            out.append(Job(f"job-{len(out):04}", t, requests, run_time(rng), 100, kind, parts))
    return sorted(out, key=lambda j: j.arrival)


HOURS = 3.0


def scenario(name: str, seed: int = 1) -> Scenario:
    """One of SCENARIOS, drawn from `seed`."""
    sc = _draw(name, seed, random.Random(f"{name}/{seed}"))
    return Scenario(sc.name, sc.about, sc.workers, sc.jobs, sc.local, sc.uneven, seed)


def _draw(name: str, seed: int, rng: random.Random) -> Scenario:
    if name in ("balanced-3", "balanced-10", "balanced-40"):
        n = int(name.rsplit("-", 1)[1])
        workers = fleet(n, gpu_workers=tuple(range(n)))
        local = [j for w in workers for j in local_work(rng, w, 0.3, HOURS)]
        jobs = jobs_poisson(rng, n * 64, HOURS, True, 0.5)
        about = f"{n} equal workers (64 cores, 16 GPUs each), 30% local load on each"
        return Scenario(name, about, workers, tuple(jobs), tuple(local))
    if name == "one-gpu-worker":
        workers = fleet(10, gpu_workers=(7,))
        local = [j for w in workers for j in local_work(rng, w, 0.3, HOURS)]
        jobs = jobs_poisson(rng, 10 * 64, HOURS, True, 0.5)
        about = "10 workers, only worker-07 has GPUs (16), 30% local load on each"
        return Scenario(name, about, workers, tuple(jobs), tuple(local), uneven=True)
    if name == "saturated-worker":
        workers = fleet(10)
        local = [
            j
            for w in workers
            for j in local_work(rng, w, 1.3 if w.name < "worker-03" else 0.2, HOURS)
        ]
        jobs = jobs_poisson(rng, 7 * 64, HOURS, False, 0.6)
        about = (
            "10 CPU workers; worker-00..02 (Incremental's first round) saturated by local "
            "work (130% of their cores), 20% elsewhere"
        )
        return Scenario(name, about, workers, tuple(jobs), tuple(local), uneven=True)
    if name == "bursts":
        workers = fleet(10, gpu_workers=(0, 5))
        local = [j for w in workers for j in local_work(rng, w, 0.3, HOURS)]
        jobs = jobs_bursts(rng, True, 5, 60)
        about = "10 workers (GPUs on worker-00 and -05); 5 bursts of 60 jobs, 40 min apart"
        return Scenario(name, about, workers, tuple(jobs), tuple(local), uneven=True)
    if name == "kueue-defaults":
        workers = fleet(10, gpu_workers=tuple(range(10)), kueue_defaults=True)
        local = [j for w in workers for j in local_work(rng, w, 0.3, HOURS)]
        jobs = jobs_poisson(rng, 10 * 64, HOURS, True, 0.5)
        about = (
            "balanced-10 on Kueue's defaults: every worker BestEffortFIFO, no preemption; "
            "30% local load on each"
        )
        return Scenario(name, about, workers, tuple(jobs), tuple(local))
    if name == "mixed-gpu":
        workers = mixed_gpu_fleet()
        local = [j for w in workers if w.cpu >= 64 for j in local_work(rng, w, 0.2, HOURS)]
        jobs = jobs_gpu_bursts(rng, 6, 24)
        about = (
            "4 workers of 8 GPUs, 16 of 1 GPU (Kueue's defaults); 6 bursts of 24 GPU "
            "jobs (1, 4 or 8 GPUs), 40 min apart; 20% local CPU load on the big ones"
        )
        return Scenario(name, about, workers, tuple(jobs), tuple(local), uneven=True)
    raise KeyError(name)


SCENARIOS = (
    "balanced-3",
    "balanced-10",
    "balanced-40",
    "one-gpu-worker",
    "saturated-worker",
    "bursts",
    "kueue-defaults",
    "mixed-gpu",
)

CSV_COLUMNS = ("arrival", "cpu", "memory", "gpu", "pods", "duration", "priority")


class TraceError(ValueError):
    """A bad CSV trace: the message is one line, with file, line, column and fix."""


def _cell(path: Path, line: int, column: str, text: str) -> float:
    try:
        value = milli(text) / MILLI if column in ("cpu", "memory") else float(text)
    except (ValueError, ArithmeticError):
        value = math.nan
    examples = {"cpu": "2 or 500m", "memory": "8Gi", "gpu": "0", "pods": "1"}
    fix = examples.get(column, "a number")
    if math.isnan(value) or value < 0 or math.isinf(value):
        raise TraceError(f"{path}:{line}: column {column}: {text!r} is not valid; write {fix}")
    if column in ("gpu", "pods", "priority") and value != int(value):
        raise TraceError(f"{path}:{line}: column {column}: {text!r} is not a whole number")
    return value


def read_csv(path: Path, workers: tuple[WorkerSpec, ...], name: str = "") -> Scenario:
    """A user's trace (header `arrival,cpu,memory,gpu,pods,duration,priority`: seconds,
    per-pod cpu and memory as Kubernetes quantities, per-pod GPUs, pods, seconds, integer
    priority) replayed on `workers`."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise TraceError(
            f"{path}: cannot read it ({exc.strerror}); give an existing CSV file"
        ) from None
    rows = list(csv.reader(text.splitlines()))
    header = [c.strip() for c in rows[0]] if rows else []
    if tuple(header) != CSV_COLUMNS:
        raise TraceError(
            f"{path}:1: the header is {','.join(header) or 'missing'}; "
            f"write {','.join(CSV_COLUMNS)}"
        )
    jobs = []
    for line, row in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in row):
            continue
        if len(row) != len(CSV_COLUMNS):
            raise TraceError(
                f"{path}:{line}: {len(row)} columns, expected {len(CSV_COLUMNS)} "
                f"({','.join(CSV_COLUMNS)})"
            )
        v = {c: _cell(path, line, c, t.strip()) for c, t in zip(CSV_COLUMNS, row, strict=True)}
        if v["pods"] < 1:
            raise TraceError(f"{path}:{line}: column pods: must be at least 1")
        if v["duration"] <= 0:
            raise TraceError(f"{path}:{line}: column duration: must be more than 0 seconds")
        pods = int(v["pods"])
        requests = res(v["cpu"] * pods, v["memory"] * pods / (1024**3), int(v["gpu"]) * pods)
        kind = "gpu" if v["gpu"] else "multi" if pods > 1 else "cpu"
        jobs.append(
            Job(
                f"job-{len(jobs):04}",
                v["arrival"],
                requests,
                v["duration"],
                int(v["priority"]),
                kind,
            )
        )
    jobs.sort(key=lambda j: j.arrival)
    return Scenario(name or path.stem, f"replay of {path.name}", workers, tuple(jobs))
