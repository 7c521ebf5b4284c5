"""Policy core: decisions per second and per-decision latency (P50/P99).

    .venv-dev/bin/python bench/policy_bench.py [--workers 3 20 100] [--pending 1000 10000]

A fleet of N workers (a CPU ClusterQueue on all, a GPU flavor on a third of them, a third
of them busy) and M pending workloads of mixed shapes (CPU-only, GPU, multi-pod-set,
LeaderWorkerSet groups) are decided one after the other, each nomination added to the
in-flight demand the next decisions see, as the controller does, with a FitMemo as the
controller keeps one. Prints a table: wall-clock rate and latency, and the same measured in
the thread's CPU time (on a shared machine, wall-clock also counts the time other processes
held the CPU).
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from controller.fit_memo import FitMemo
from controller.in_flight_index import InFlightIndex
from controller.model import (
    MILLI,
    FlavorCapacity,
    InFlight,
    Policy,
    QueueCapacity,
    WorkerView,
    WorkloadView,
)
from controller.policy import decide

GI = 1024**3 * MILLI


def units(amount: float) -> int:
    """Whole units (cores, GPUs) in the policy's milli-units."""
    return int(amount * MILLI)


NOW = datetime(2026, 11, 22, tzinfo=UTC)


def fleet(n: int, rng: random.Random) -> dict[str, WorkerView]:
    workers = {}
    for i in range(n):
        groups = [
            (
                FlavorCapacity(
                    "default",
                    {"cpu": units(256), "memory": 1024 * GI},
                    {"cpu": units(rng.randint(0, 200)), "memory": rng.randint(0, 800) * GI},
                ),
            )
        ]
        if i % 3 == 0:
            groups.append(
                (
                    FlavorCapacity(
                        "t4",
                        {"nvidia.com/gpu": units(16)},
                        {"nvidia.com/gpu": units(rng.randint(0, 12))},
                    ),
                )
            )
        name = f"worker-{i:03}"
        workers[name] = WorkerView(
            name,
            True,
            True,
            "",
            {"region": f"r{i % 4}", "tier": "gpu" if i % 3 == 0 else "cpu"},
            {"team/user-queue": "cq"},
            {"cq": QueueCapacity("cq", tuple(groups))},
        )
    return workers


def workloads(m: int, rng: random.Random, distinct: bool = False) -> list[WorkloadView]:
    """`m` pending workloads of four shapes, or with `distinct` every one a shape of its own
    (the same four, each request nudged by a different number of millicores / bytes), so
    that no decision finds a memo of its shape."""
    shapes = [
        {"cpu": units(2), "memory": 4 * GI},  # CPU-only
        {"cpu": units(8), "memory": 32 * GI, "nvidia.com/gpu": units(1)},  # GPU
        {"cpu": units(17), "memory": 68 * GI},  # multi-pod-set (1 launcher + 4 workers)
        {"cpu": units(4), "memory": 16 * GI, "nvidia.com/gpu": units(4)},  # LWS group
    ]
    out = []
    for i in range(m):
        requests = dict(rng.choice(shapes))
        if distinct:
            requests = {r: a + i + 1 for r, a in requests.items()}
        out.append(WorkloadView(f"team/wl-{i}", "user-queue", requests))
    return out


def run(n_workers: int, n_pending: int, seed: int = 7, distinct: bool = False) -> dict[str, float]:
    rng = random.Random(seed)
    workers = fleet(n_workers, rng)
    clusters = list(workers)
    pending = workloads(n_pending, rng, distinct)
    policy = Policy(strategy="MostFreeQuota")
    index = InFlightIndex()
    memo = FitMemo()  # as the controller keeps one
    latencies, cpu_times = [], []
    nominated = 0
    gc.disable()
    started, cpu_started = time.perf_counter(), time.thread_time()
    for wl in pending:
        t0, c0 = time.perf_counter(), time.thread_time()
        decision = decide(wl, clusters, workers, policy, index, NOW, memo)
        for v in decision.chosen:
            index.add(InFlight(wl.key, v.cluster, "cq", v.flavors, wl.requests))
        latencies.append(time.perf_counter() - t0)
        cpu_times.append(time.thread_time() - c0)
        nominated += bool(decision.nominate)
    total, cpu_total = time.perf_counter() - started, time.thread_time() - cpu_started
    gc.enable()
    latencies.sort()
    cpu_times.sort()
    p99 = int(len(latencies) * 0.99) - 1
    return {
        "workers": n_workers,
        "pending": n_pending,
        "rate": n_pending / total,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[p99] * 1000,
        # CPU time: the same work without the time a busy machine kept the process waiting
        "cpu_rate": n_pending / cpu_total,
        "cpu_p99_ms": cpu_times[p99] * 1000,
        "nominated": nominated,
        "shapes": "distinct" if distinct else "4",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[3, 20, 100])
    parser.add_argument("--pending", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument(
        "--repeat",
        type=int,
        default=5,
        help="runs per row; the row shows the run with the median rate "
        "(a shared VM's timings vary from run to run)",
    )
    parser.add_argument(
        "--shapes",
        choices=("4", "distinct", "both"),
        default="both",
        help="4 shapes the FitMemo caches, every workload a distinct shape, or both rows",
    )
    args = parser.parse_args()
    print(
        f"{'workers':>7} {'pending':>8} {'shapes':>8} {'decisions/s':>12} {'P50 ms':>8} "
        f"{'P99 ms':>8} {'per CPU s':>10} {'CPU P99 ms':>11} {'nominated':>10}"
    )
    kinds = {"4": [False], "distinct": [True], "both": [False, True]}[args.shapes]
    for n in args.workers:
        for m in args.pending:
            for distinct in kinds:
                runs = sorted(
                    (run(n, m, distinct=distinct) for _ in range(args.repeat)),
                    key=lambda r: r["rate"],
                )
                r = runs[len(runs) // 2]
                print(
                    f"{r['workers']:>7} {r['pending']:>8} {r['shapes']:>8} {r['rate']:>12,.0f} "
                    f"{r['p50_ms']:>8.3f} {r['p99_ms']:>8.3f} {r['cpu_rate']:>10,.0f} "
                    f"{r['cpu_p99_ms']:>11.3f} {r['nominated']:>10}"
                )


if __name__ == "__main__":
    main()
