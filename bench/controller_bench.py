"""Controller end to end: how fast the dispatcher nominates against an API server.

    .venv/bin/python bench/controller_bench.py [--workers 20] [--pending 10000] [--burst 300]

The API servers (a manager and N workers, tests/kube_emulator.py) run in a process of
their own; the controller runs in this one, so its memory is measured alone. Phases:
1. backlog: M eligible Workloads exist before the controller starts; measured from the
   controller's start to the last nomination written (nominations/s, and the time to the
   first one, which includes listing everything);
2. steady state: with the backlog done, --burst new Workloads arrive at 100/s; measured
   from each one's creation to its nomination arriving at the server (P50/P99);
3. the same server's raw rate of plain status merge patches from one client, sent one
   after the other as the controller sends them: the ratio says how much of the server's
   speed the controller uses.
Prints a table row; peak memory is this process's maximum resident set.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controller.app import run  # noqa: E402
from controller.kube import SECRETS, WORKLOADS, Kind, Kube  # noqa: E402
from controller.metrics import Metrics  # noqa: E402
from controller.settings import Settings  # noqa: E402
from tests.fleet_harness import (  # noqa: E402
    ACTIVE,
    NS,
    K,
    admission_check,
    cluster_queue,
    multikueue_cluster,
    multikueue_config,
    reader_secret,
    workload,
)

ADMISSION_CHECKS = Kind(K, "v1beta2", "admissionchecks", False)
CONFIGS = Kind(K, "v1beta2", "multikueueconfigs", False)
CLUSTERS = Kind(K, "v1beta2", "multikueueclusters", False)
CLUSTER_QUEUES = Kind(K, "v1beta2", "clusterqueues", False)
LOCAL_QUEUES = Kind(K, "v1beta2", "localqueues", True)


def kubeconfig(name: str, url: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": name,
        "clusters": [{"name": name, "cluster": {"server": url}}],
        "users": [{"name": name, "user": {"token": "bench"}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
    }


async def create_workloads(manager: Kube, names: list[str], size: int = 64) -> None:
    """Created a chunk at a time: bodies are built only for the chunk under way."""
    for start in range(0, len(names), size):
        await asyncio.gather(
            *(manager.create(WORKLOADS, workload(n), NS) for n in names[start : start + size])
        )


async def seed(manager: Kube, urls: dict[str, str], workers: list[str], pending: int) -> None:
    await manager.create(ADMISSION_CHECKS, admission_check())
    await manager.create(CONFIGS, multikueue_config(workers))
    # Every worker could take every workload: the benchmark measures dispatch, not a full
    # fleet (1 cpu each, room for all of them on each worker).
    capacity = str(pending * 2 + 100)
    for name in workers:
        await manager.create(CLUSTERS, {**multikueue_cluster(name), "status": ACTIVE})
        await manager.create(
            SECRETS, reader_secret(name, kubeconfig(name, urls[name])), "multikueue-fleet-system"
        )
        worker = await Kube.from_kubeconfig(kubeconfig(name, urls[name]), name)
        await worker.create(CLUSTER_QUEUES, cluster_queue(capacity, f"{pending * 4}Gi"))
        await worker.create(
            LOCAL_QUEUES,
            {
                "metadata": {"name": "user-queue", "namespace": NS},
                "spec": {"clusterQueue": "cluster-queue"},
            },
            NS,
        )
        await worker.close()
    await create_workloads(manager, [f"backlog-{i}" for i in range(pending)])


def seed_apart(urls: dict[str, str], workers: list[str], pending: int) -> None:
    """Seeding in a process of its own, so its garbage is not counted as the controller's
    memory."""

    async def main() -> None:
        manager = await Kube.from_kubeconfig(kubeconfig("manager", urls["manager"]), "manager")
        try:
            await seed(manager, urls, workers, pending)
        finally:
            await manager.close()

    asyncio.run(main())


async def writes(manager: Kube) -> list[dict[str, Any]]:
    return [
        w
        for w in (
            await manager.api.call_api(
                "/_emulator/writes",
                "GET",
                response_types_map={200: "object"},
                _return_http_data_only=True,
            )
        )
        if w["path"].endswith("/status")
    ]


async def measure(n_workers: int, pending: int, burst: int) -> dict[str, float]:
    workers = [f"worker-{i:03}" for i in range(n_workers)]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "urls.json"
        server = subprocess.Popen(
            [sys.executable, "-m", "tests.kube_emulator", str(out), "manager", *workers], cwd=ROOT
        )
        try:
            while not out.exists() or not out.read_text():
                await asyncio.sleep(0.1)
            urls = json.loads(out.read_text())
            manager = await Kube.from_kubeconfig(kubeconfig("manager", urls["manager"]), "manager")
            seeder = multiprocessing.get_context("spawn").Process(
                target=seed_apart, args=(urls, workers, pending)
            )
            seeder.start()
            await asyncio.get_running_loop().run_in_executor(None, seeder.join)
            assert seeder.exitcode == 0, "seeding failed"
            settings = Settings(identity="bench", metrics_port=0)
            stop = asyncio.Event()
            started = time.time()
            controller = asyncio.create_task(run(manager, settings, stop, Metrics(), port=0))
            while len(await writes(manager)) < pending:
                await asyncio.sleep(0.5)
                if controller.done():
                    controller.result()
            backlog = sorted(w["at"] for w in await writes(manager))
            created: dict[str, float] = {}
            for i in range(burst):
                name = f"burst-{i}"
                created[name] = time.time()
                await manager.create(WORKLOADS, workload(name), NS)
                await asyncio.sleep(0.01)
            while sum(1 for w in await writes(manager) if "/burst-" in w["path"]) < burst:
                await asyncio.sleep(0.2)
            arrived = {
                w["path"].split("/")[-2]: w["at"]
                for w in await writes(manager)
                if "/burst-" in w["path"]
            }
            latencies = sorted(arrived[n] - created[n] for n in created)
            stop.set()
            await controller
            raw_count = min(pending, 2000)
            t0 = time.perf_counter()
            for i in range(raw_count):
                await manager.merge_patch(
                    WORKLOADS,
                    f"backlog-{i}",
                    {"status": {"nominatedClusterNames": ["worker-000"]}},
                    NS,
                    status=True,
                )
            raw = raw_count / (time.perf_counter() - t0)
            await manager.close()
        finally:
            server.terminate()
            server.wait(10)
    rate = pending / (backlog[-1] - started)
    return {
        "workers": n_workers,
        "pending": pending,
        "rate": rate,
        "raw": raw,
        "first_s": backlog[0] - started,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[max(0, int(len(latencies) * 0.99) - 1)] * 1000,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=20)
    parser.add_argument("--pending", type=int, default=10000)
    parser.add_argument("--burst", type=int, default=300)
    args = parser.parse_args()
    r = asyncio.run(measure(args.workers, args.pending, args.burst))
    print(
        f"{'workers':>7} {'pending':>8} {'nominations/s':>14} {'raw patches/s':>14} "
        f"{'ratio':>6} {'1st (s)':>8} {'P50 ms':>7} {'P99 ms':>7} {'peak MB':>8}"
    )
    print(
        f"{r['workers']:>7} {r['pending']:>8} {r['rate']:>14,.0f} {r['raw']:>14,.0f} "
        f"{r['rate'] / r['raw']:>6.2f} {r['first_s']:>8.1f} {r['p50_ms']:>7.1f} "
        f"{r['p99_ms']:>7.1f} {r['rss_mb']:>8.0f}"
    )


if __name__ == "__main__":
    main()
