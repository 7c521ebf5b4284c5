"""Controller end to end: how fast the dispatcher nominates against an API server.

    .venv-dev/bin/python bench/controller_bench.py [--workers 20] [--pending 10000] [--burst 300]
        [--server emulator|real] [--kubeconfig FILE]

The manager is the API emulator (tests/helpers/kube_emulator.py, the default; it keeps its
watch, conflict and status-subresource rules but not the CRD schemas, whose CEL costs
~30 ms a write in Python), a real kube-apiserver with etcd started from
KUBEBUILDER_ASSETS (`--server real`, with Kueue's real CRDs from the pinned release or its
Go module), or a throwaway API server you already run (`--kubeconfig`, e.g. a fresh kind
cluster without Kueue: the benchmark installs the CRDs and leaves its objects behind).
Workers are always emulated, in a process of their own; the controller runs in a process
of its own too, so its memory and CPU are measured alone: the benchmark's own work (polling
for arrivals, the bursts, the raw patches) stays in this one. Phases:
1. backlog: M eligible Workloads exist before the controller starts; measured from the
   controller's start to the last nomination written (nominations/s, and the time to the
   first one, which includes listing everything), and from the first nomination to the
   last ("drain/s": the rate once everything is listed);
2. steady state: with the backlog done, --burst new Workloads become eligible at 100/s;
   measured from each one becoming eligible to its nomination arriving at the server
   (P50/P99);
3. the same server's rate of plain status merge patches from one client: one after the
   other ("patches/s 1"), and with as many in flight as the controller keeps
   (Settings.concurrent_writes, "patches/s N"): the ratio, nominations/s over the latter,
   says how much of the server's speed at the same concurrency the controller uses ("drain
   ratio": drain/s over it).
When a nomination arrived: the emulator logs each write with its arrival time; a real
server is watched from a separate process, which stamps each Workload the first time it
shows a nomination (a watch event is a few milliseconds after the write).
Prints a table row; peak memory is the controller process's maximum resident set; CPU time
per nomination in the backlog phase, of the controller and, with the emulator as the
manager, of the server: its CPU time per nomination (the patch, the Event, the watch
notification to the controller) and per raw patch: what bounds the ratio when the server
is the bottleneck. `--profile FILE` writes the controller's cProfile statistics over the
whole run (profiling slows it: that run's numbers are not comparable).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controller.kinds import SECRETS, WORKLOADS, Kind  # noqa: E402
from controller.kube import Kube  # noqa: E402
from controller.settings import Settings  # noqa: E402
from tests.helpers.apiserver import install, missing, running_apiserver, wait_ready  # noqa: E402
from tests.helpers.apiserver import stop as stop_process  # noqa: E402
from tests.helpers.fleet_harness import (  # noqa: E402
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


async def create_with_status(kube: Kube, kind: Kind, obj: dict[str, Any], ns: str = "") -> None:
    """An API server drops `status` on create (the emulator as a real one): it is written
    through /status."""
    status = obj.pop("status", None)
    await kube.create(kind, obj, ns or None)
    if status:
        name = obj["metadata"]["name"]
        await kube.merge_patch(kind, name, {"status": status}, ns or None, status=True)


async def create_workloads(manager: Kube, names: list[str], size: int = 64) -> None:
    """Created a chunk at a time: bodies are built only for the chunk under way."""
    for start in range(0, len(names), size):
        await asyncio.gather(
            *(
                create_with_status(manager, WORKLOADS, workload(n), NS)
                for n in names[start : start + size]
            )
        )


async def seed(manager: Kube, urls: dict[str, str], workers: list[str], pending: int) -> None:
    await install(manager)  # CRDs and namespaces; already there is fine (the emulator)
    await manager.create(ADMISSION_CHECKS, admission_check())
    await manager.create(CONFIGS, multikueue_config(workers))
    # Every worker could take every workload: the benchmark measures dispatch, not a full
    # fleet (1 cpu each, room for all of them on each worker).
    capacity = str(pending * 2 + 100)
    for name in workers:
        await create_with_status(manager, CLUSTERS, {**multikueue_cluster(name), "status": ACTIVE})
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


def seed_apart(
    manager_config: dict[str, Any], urls: dict[str, str], workers: list[str], pending: int
) -> None:
    """Seeding in a process of its own, so its garbage is not counted as the controller's
    memory."""

    async def main() -> None:
        manager = await Kube.from_kubeconfig(manager_config, "manager")
        try:
            await seed(manager, urls, workers, pending)
        finally:
            await manager.close()

    asyncio.run(main())


def name_of(status_path: str) -> str:
    return status_path.split("/")[-2]  # .../workloads/<name>/status


def watch_apart(manager_config: dict[str, Any], out: str, since: str) -> None:
    """In a process of its own: append `name<TAB>time` to `out` the first time each Workload
    shows a nomination, watching from resourceVersion `since`."""

    async def main() -> None:
        manager = await Kube.from_kubeconfig(manager_config, "watcher")
        seen: set[str] = set()
        version = since
        with open(out, "a") as handle:
            while True:
                async for event in manager.watch(WORKLOADS, version, NS):
                    obj = event.get("object") or {}
                    meta = obj.get("metadata") or {}
                    version = meta.get("resourceVersion", version)
                    nominated = (obj.get("status") or {}).get("nominatedClusterNames")
                    if nominated and meta.get("name") not in seen:
                        seen.add(meta["name"])
                        handle.write(f"{meta['name']}\t{time.time()}\n")
                        handle.flush()

    asyncio.run(main())


class Arrivals:
    """When each nomination reached the manager, read a little more at each call: from the
    emulator's own log of writes, or from the watcher's file for a real server."""

    def __init__(self, manager: Kube, watched: Path | None) -> None:
        self.manager = manager
        self.watched = watched
        self.found: dict[str, float] = {}
        self.read = 0  # writes (emulator) or bytes (file) taken in so far

    async def get(self) -> dict[str, float]:
        if self.watched is None:
            new = await self.manager.api.call_api(
                "/_emulator/writes",
                "GET",
                query_params=[("after", self.read)],
                response_types_map={200: "object"},
                _return_http_data_only=True,
            )
            self.read += len(new)
            arrived = [(name_of(w["path"]), w["at"]) for w in new if w["nominates"]]
        else:
            with self.watched.open() as handle:
                handle.seek(self.read)
                text = handle.read()
            text = text[: text.rfind("\n") + 1]  # whole lines only
            self.read += len(text.encode())
            arrived = [(n, float(at)) for n, at in (line.split("\t") for line in text.splitlines())]
        for name, at in arrived:
            self.found.setdefault(name, at)
        return self.found


@contextlib.contextmanager
def manager_server(mode: str, given: str | None, urls: dict[str, str]) -> Iterator[dict[str, Any]]:
    """The manager's kubeconfig: the emulator's, a real server's, or the one given."""
    if given:
        yield yaml.safe_load(Path(given).read_text())
    elif mode == "real":
        reason = missing()
        if reason:
            raise SystemExit(f"--server real: {reason}")
        with tempfile.TemporaryDirectory() as work, running_apiserver(Path(work)) as config:
            yield config
    else:
        yield kubeconfig("manager", urls["manager"])


async def until_count(arrivals: Arrivals, wanted: int, prefix: str, controller: Any) -> None:
    while sum(1 for n in await arrivals.get() if n.startswith(prefix)) < wanted:
        await asyncio.sleep(0.5)
        if controller.poll() is not None:
            raise SystemExit(f"the controller stopped (exit code {controller.returncode})")


def cpu_seconds(*pids: int) -> float:
    """The processes' CPU time so far (user + system), from /proc."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _argv(pid: str) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv[:-1] else None


def real_server_pids(config: dict[str, Any]) -> list[int]:
    """The kube-apiserver serving `config` and its etcd (found by their flags), whose CPU
    counts as the server's; none when they are not processes of this machine."""
    port = str(urlparse(config["clusters"][0]["cluster"]["server"]).port)
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        argv = _argv(entry.name) if entry.name.isdigit() else []
        if argv and argv[0].endswith("kube-apiserver") and _flag(argv, "--secure-port") == port:
            etcd = _flag(argv, "--etcd-servers")
            found.append(int(entry.name))
            for other in Path("/proc").iterdir():
                theirs = _argv(other.name) if other.name.isdigit() else []
                listens = _flag(theirs, "--listen-client-urls") if theirs else None
                if theirs and theirs[0].endswith("etcd") and listens == etcd:
                    found.append(int(other.name))
    return found


async def patch_rate(manager: Kube, count: int, in_flight: int, tag: str) -> float:
    """Status merge patches of `count` Workloads from one client, `in_flight` at once, each
    a real change (a server stores no write that changes nothing)."""
    pending = iter(range(count))

    async def writer() -> None:
        for i in pending:
            await manager.merge_patch(
                WORKLOADS,
                f"backlog-{i}",
                {"status": {"nominatedClusterNames": [f"{tag}-{i % 20}"]}},
                NS,
                status=True,
            )

    t0 = time.perf_counter()
    await asyncio.gather(*(writer() for _ in range(in_flight)))
    return count / (time.perf_counter() - t0)


async def measure(
    n_workers: int,
    pending: int,
    burst: int,
    mode: str,
    given: str | None,
    profile: str | None = None,
) -> dict[str, Any]:
    workers = [f"worker-{i:03}" for i in range(n_workers)]
    spawn = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "urls.json"
        emulated = workers if mode == "real" or given else ["manager", *workers]
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.helpers.kube_emulator",
                "--no-schemas",
                str(out),
                *emulated,
            ],
            cwd=ROOT,
        )
        watcher = controller = None
        try:
            while not out.exists() or not out.read_text():
                await asyncio.sleep(0.1)
            urls = json.loads(out.read_text())
            with manager_server(mode, given, urls) as manager_config:
                manager = await Kube.from_kubeconfig(manager_config, "manager")
                await wait_ready(manager)
                seeder = spawn.Process(
                    target=seed_apart, args=(manager_config, urls, workers, pending)
                )
                seeder.start()
                await asyncio.get_running_loop().run_in_executor(None, seeder.join)
                assert seeder.exitcode == 0, "seeding failed"
                watched = None
                if "manager" not in urls:
                    watched = Path(tmp) / "nominations.tsv"
                    watched.touch()
                    _, since = await manager.list(WORKLOADS, NS, transform=lambda o: {})
                    watcher = spawn.Process(
                        target=watch_apart, args=(manager_config, str(watched), since)
                    )
                    watcher.start()
                arrivals = Arrivals(manager, watched)
                settings = Settings(identity="bench", metrics_port=0)
                config_file = Path(tmp) / "manager.yaml"
                config_file.write_text(yaml.safe_dump(manager_config))
                controller = subprocess.Popen(
                    [
                        sys.executable,
                        str(ROOT / "bench" / "controller_alone.py"),
                        str(config_file),
                        *(["--profile", profile] if profile else []),
                    ],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                    cwd=ROOT,
                )
                assert controller.stdin is not None and controller.stdout is not None
                loop = asyncio.get_running_loop()
                ready = await loop.run_in_executor(None, controller.stdout.readline)
                assert ready == "ready\n", f"the controller did not start: {ready!r}"
                started = time.time()
                # The manager's CPU: the emulator's process, or kube-apiserver and etcd.
                pids = [server.pid] if "manager" in urls else real_server_pids(manager_config)
                server_cpu = cpu_seconds(*pids)
                controller_cpu = cpu_seconds(controller.pid)
                controller.stdin.write("go\n")
                controller.stdin.flush()
                await until_count(arrivals, pending, "backlog-", controller)
                # The emulator's CPU per nomination (with its Event and watch notification).
                server_cpu = cpu_seconds(*pids) - server_cpu
                controller_cpu = cpu_seconds(controller.pid) - controller_cpu
                backlog = sorted((await arrivals.get()).values())
                eligible: dict[str, float] = {}
                for i in range(burst):
                    body = workload(f"burst-{i}")
                    status = body.pop("status")
                    name = body["metadata"]["name"]
                    await manager.create(WORKLOADS, body, NS)
                    # Eligible once the status says quota is reserved.
                    eligible[name] = time.time()
                    await manager.merge_patch(WORKLOADS, name, {"status": status}, NS, status=True)
                    await asyncio.sleep(0.01)
                await until_count(arrivals, burst, "burst-", controller)
                seen = await arrivals.get()
                latencies = sorted(seen[n] - at for n, at in eligible.items())
                controller.stdin.write("stop\n")
                controller.stdin.flush()
                peak_mb = float(await loop.run_in_executor(None, controller.stdout.readline))
                await loop.run_in_executor(None, controller.wait)
                raw_cpu = cpu_seconds(*pids)
                raw_count = min(pending, 2000)
                raw = await patch_rate(manager, raw_count, 1, "one")
                raw_cpu = cpu_seconds(*pids) - raw_cpu
                # The ceiling for the controller: the same writes at its concurrency.
                same = await patch_rate(manager, raw_count, settings.concurrent_writes, "many")
                await manager.close()
                # Before the server it watches goes (a real one stops with this block).
                if watcher is not None:
                    watcher.terminate()
                    watcher.join()
        finally:
            if watcher is not None:
                watcher.terminate()
            if controller is not None and controller.poll() is None:
                stop_process(controller)
            stop_process(server)
    return {
        "server": "given" if given else mode,
        "workers": n_workers,
        "pending": pending,
        "rate": pending / (backlog[pending - 1] - started),
        "raw": raw,
        "in_flight": settings.concurrent_writes,
        "same": same,
        "first_s": backlog[0] - started,
        "drain": (pending - 1) / (backlog[pending - 1] - backlog[0]),
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[max(0, int(len(latencies) * 0.99) - 1)] * 1000,
        "rss_mb": peak_mb,
        "ctl_ms": controller_cpu / pending * 1000,
        # The manager's CPU per nomination and per raw patch: the emulator's, or kube-apiserver
        # and etcd's (not known for a server given by --kubeconfig).
        "srv_ms": server_cpu / pending * 1000 if pids else float("nan"),
        "raw_ms": raw_cpu / raw_count * 1000 if pids else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=20)
    parser.add_argument("--pending", type=int, default=10000)
    parser.add_argument("--burst", type=int, default=300)
    parser.add_argument(
        "--server",
        choices=("emulator", "real"),
        default="emulator",
        help="the manager: the API emulator, or kube-apiserver from KUBEBUILDER_ASSETS",
    )
    parser.add_argument("--kubeconfig", help="a throwaway API server to use as the manager")
    parser.add_argument(
        "--runs", type=int, default=1, help="repeat, and add the median of each column"
    )
    parser.add_argument(
        "--profile", help="write the controller's cProfile statistics here (one run)"
    )
    args = parser.parse_args()
    print(
        f"{'server':>8} {'workers':>7} {'pending':>8} {'nominations/s':>14} "
        f"{'patches/s 1':>12} {'patches/s N':>12} {'N':>3} {'ratio':>6} {'1st (s)':>8} "
        f"{'drain/s':>8} {'drain ratio':>11} {'P50 ms':>7} {'P99 ms':>7} {'peak MB':>8} "
        f"{'ctl ms/nom':>10} {'srv ms/nom':>10} {'srv ms/raw':>10}"
    )
    rows = []
    for _ in range(args.runs):
        # Each run in a fresh process: peak memory is per process, and runs must not share it.
        spawn = multiprocessing.get_context("spawn")
        results = spawn.SimpleQueue()
        one = spawn.Process(
            target=run_once,
            args=(
                results,
                args.workers,
                args.pending,
                args.burst,
                args.server,
                args.kubeconfig,
                args.profile,
            ),
        )
        one.start()
        one.join()
        if one.exitcode != 0 or results.empty():
            raise SystemExit(f"run {len(rows) + 1} failed (exit code {one.exitcode})")
        row = results.get()
        rows.append(row)
        print_row(row)
    if len(rows) > 1:
        median = {
            k: statistics.median(r[k] for r in rows) if k != "server" else "median" for k in rows[0]
        }
        print_row(median)


def run_once(
    results: Any,
    workers: int,
    pending: int,
    burst: int,
    server: str,
    given: str | None,
    profile: str | None,
) -> None:
    row = asyncio.run(measure(workers, pending, burst, server, given, profile))
    row["ratio"] = row["rate"] / row["same"]
    row["drain_ratio"] = row["drain"] / row["same"]
    results.put(row)


def print_row(r: dict[str, Any]) -> None:
    print(
        f"{r['server']:>8} {r['workers']:>7.0f} {r['pending']:>8.0f} {r['rate']:>14,.0f} "
        f"{r['raw']:>12,.0f} {r['same']:>12,.0f} {r['in_flight']:>3.0f} {r['ratio']:>6.2f} "
        f"{r['first_s']:>8.1f} {r['drain']:>8,.0f} {r['drain_ratio']:>11.2f} "
        f"{r['p50_ms']:>7.1f} {r['p99_ms']:>7.1f} {r['rss_mb']:>8.0f} "
        f"{r['ctl_ms']:>10.2f} {r['srv_ms']:>10.2f} {r['raw_ms']:>10.2f}",
        flush=True,
    )


if __name__ == "__main__":
    main()
