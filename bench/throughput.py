"""MultiKueue throughput in Kueue's own shape (issue 39, item 4): one manager and three
workers on the loopback engines (kube-apiserver v1.36, etcd and Kueue v0.19.2 built from
tools/go.mod), N batch Jobs created at once on the manager, and for each the time from its
creation to its admission on a worker: the manager's Workload turns Admitted once a worker's
Kueue admitted the copy and MultiKueue's admission check went Ready. Kueue's AllAtOnce and
our dispatcher, each on a fleet of its own, one after the other in the same run.

    .venv-dev/bin/python -m loopback build          # once: the binaries, from tools/go.mod
    .venv-dev/bin/python bench/throughput.py [--workloads 1000] \\
        [--dispatchers AllAtOnce,policy] [--csv runs.csv]
    .venv-dev/bin/python bench/throughput.py --simulate [--workloads 1000]  # the model's

Kueue measures the same shape with its own harness (kubernetes-sigs/kueue commit c85dcf7e34,
after v0.19.2: test/performance/multikueue/README.md): a manager and three envtest
workers, Kueue's controllers in one process, on 32 cores. Its table: 1.31 workloads/s at
the client limits a deployed Kueue runs with, 38.0 with the worker clients raised to 300
requests/s, 95.3 with the manager's raised to 3,000 as well (the 97-102 workloads/s issue
39 quotes from PR 13936 is that last regime, which no setting of v0.19.2 reaches).
What binds at the defaults: MultiKueue's worker clients carry no QPS, so each kind's REST
client falls back to client-go's 5 requests/s with a burst of 10 (in v0.19.2's
pkg/controller/admissionchecks/multikueue/multikueuecluster.go a worker's client is
client.NewWithWatch over clientcmd.RESTConfigFromKubeConfig, and nothing sets QPS or Burst;
kueue issue 14973). That budget is per worker: a dispatcher that copies every workload to
every worker spends it on each, one that copies each to one of W workers spends a W-th.

The stack is stacks/Pulumi.loopback.yaml with a third worker; every Job asks for 1m of CPU
and 1Mi of memory, so quota never makes one wait: what is measured is dispatch and
admission. No kubelet runs, so the Jobs' pods stay Pending, which admission does not need.
"""

from __future__ import annotations

import argparse
import csv
import math
import signal
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

NAMESPACE = "team-a"
QUEUE = "user-queue"
DISPATCHERS = ("AllAtOnce", "policy")
# What Kueue's own harness reports for the same shape (its README, above).
KUEUE_PUBLISHED = (
    "1.31 workloads/s at Kueue's default client limits, 38.0 with the worker clients at "
    "300 QPS, 95.3 with the manager's at 3000 too (32 cores; kueue c85dcf7e34, "
    "test/performance/multikueue/README.md)"
)


@dataclass
class Run:
    """One dispatcher's run: when each Job was created and admitted (monotonic seconds), and
    how many copies MultiKueue made on the workers."""

    dispatcher: str
    created: dict[str, float] = field(default_factory=dict)
    admitted: dict[str, float] = field(default_factory=dict)
    copies: set[str] = field(default_factory=set)  # the workers' Workload UIDs
    started: float = 0.0
    # Our dispatcher's own counters at the end (its /metrics): CPU seconds, nominations
    # written, writes the API server refused.
    dispatcher_metrics: dict[str, float] = field(default_factory=dict)

    def latencies(self) -> list[float]:
        return sorted(t - self.created[n] for n, t in self.admitted.items() if n in self.created)

    def row(self) -> dict[str, Any]:
        waits = self.latencies()
        done = len(waits)
        span = max(self.admitted.values()) - self.started if self.admitted else math.nan
        return {
            "dispatcher": self.dispatcher,
            "workloads": len(self.created),
            "admitted": done,
            "seconds": round(span, 1),
            "workloads/s": round(done / span, 1) if done and span > 0 else 0.0,
            "P50 s": percentile(waits, 50),
            "P90 s": percentile(waits, 90),
            "P99 s": percentile(waits, 99),
            "copies/wl": round(len(self.copies) / len(self.created), 2) if self.created else 0.0,
            "dispatcher CPU s": self.dispatcher_metrics.get("cpu", "n/a"),
            "write errors": self.dispatcher_metrics.get("write_errors", "n/a"),
        }


def percentile(values: list[float], p: float) -> float:
    """The nearest-rank percentile of sorted `values`, to 0.1 s; nan for none."""
    if not values:
        return math.nan
    rank = max(1, math.ceil(p / 100 * len(values)))
    return round(values[rank - 1], 1)


def table(rows: list[dict[str, Any]]) -> str:
    """The runs as a Markdown table, with ours against AllAtOnce as a ratio below it."""
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
    by = {r["dispatcher"]: r for r in rows}
    if "AllAtOnce" in by and "policy" in by and by["AllAtOnce"]["workloads/s"]:
        ratio = by["policy"]["workloads/s"] / by["AllAtOnce"]["workloads/s"]
        lines.append(f"\nours / AllAtOnce, workloads per second: {ratio:.2f}")
    lines.append(f"Kueue's own harness, same shape: {KUEUE_PUBLISHED}")
    return "\n".join(lines)


def simulated(dispatcher: str, workloads: int) -> tuple[Run, float]:
    """The same shape in the simulation (bench/dq_sim.py) with the KWOK comparison's
    settings, Kueue v0.19.2's worker clients among them (bench/dq_clients.py: 5 QPS, burst
    10, a read of every worker per reconcile): what those clients alone allow. A workload
    counts as admitted when its worker admits it (the real run's clock stops at the
    manager's Admitted, a way back later). With it, the requests sent to each worker, on
    average."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from dq_sim import Sim
    from dq_trace import Job, Scenario, WorkerSpec
    from fleet_replay import SIMULATED
    from kwok_compare import KWOK_SETTINGS

    workers = tuple(WorkerSpec(f"worker{i + 1}", 1000, 4000) for i in range(3))
    # 1m of CPU each, as the real Jobs ask; running longer than the simulation looks.
    never = KWOK_SETTINGS.horizon * 2
    jobs = [Job(f"job-{i:04}", 0.0, {"cpu": 1, "memory": 1}, never) for i in range(workloads)]
    scenario = Scenario("throughput", "", workers, tuple(jobs), ())
    sim = Sim(scenario, SIMULATED[dispatcher](), KWOK_SETTINGS).run()
    run = Run(
        dispatcher,
        created={wl.key: 0.0 for wl in sim.wls},
        admitted={wl.key: wl.admitted_at for wl in sim.wls if wl.admitted_at is not None},
        copies={str(n) for n in range(sim.stats.copies)},
    )
    return run, sum(sim.clients.requests.values()) / len(sim.clients.requests)


def job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"kueue.x-k8s.io/queue-name": QUEUE},
        },
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox:1.36",
                            "command": ["true"],
                            "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}},
                        }
                    ],
                }
            },
        },
    }


def dispatcher_metrics(text: str) -> dict[str, float]:
    """CPU seconds and refused writes from the dispatcher's /metrics page."""
    from prometheus_client.parser import text_string_to_metric_families

    found = {"cpu": 0.0, "write_errors": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "process_cpu_seconds_total":
                found["cpu"] = round(sample.value, 1)
            elif sample.name.endswith("write_errors_total"):
                found["write_errors"] += sample.value
    return found


def _api(kubeconfig: Path) -> Any:
    from kubernetes import config

    api = config.new_client_from_config(config_file=str(kubeconfig))
    api.configuration.connection_pool_maxsize = 16
    return api


def _admitted(workload: dict[str, Any]) -> bool:
    conditions = (workload.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Admitted" and c["status"] == "True" for c in conditions)


def _watch(kubeconfig: Path, stop: threading.Event, on_event: Any) -> None:
    """Workloads of NAMESPACE as they change, each event handed to `on_event`; a watch the
    server ends is started again from the last version seen."""
    from kubernetes import client, watch
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    objects = client.CustomObjectsApi(_api(kubeconfig))
    version = ""
    while not stop.is_set():
        stream = watch.Watch()
        try:
            for event in stream.stream(
                objects.list_namespaced_custom_object,
                "kueue.x-k8s.io",
                "v1beta2",
                NAMESPACE,
                "workloads",
                resource_version=version or None,
                timeout_seconds=30,
            ):
                item = event["object"]
                if event["type"] == "ERROR":  # 410 Gone: the version is too old, list again
                    version = ""
                    break
                version = item["metadata"]["resourceVersion"]
                on_event(event["type"], item)
                if stop.is_set():
                    break
        except (ApiException, HTTPError, OSError):  # the server closed it: list again
            version = ""
            time.sleep(0.2)


def measure(dispatcher: str, workloads: int, folder: Path, timeout: float, log: Any) -> Run:
    from tests.helpers.real_fleet import dispatched_fleet, loopback_document

    began = time.monotonic()
    running = dispatched_fleet(loopback_document(3), folder, dispatcher=dispatcher)
    fleet, spec, local = running.fleet, running.connected.spec, running.local
    run = Run(dispatcher)
    stop = threading.Event()
    try:
        manager = spec.manager.name
        ready = time.monotonic() - began
        log(f"  {dispatcher}: fleet of {len(spec.clusters)} clusters ready in {ready:.0f} s")
        lock = threading.Lock()

        def on_manager(kind: str, item: dict[str, Any]) -> None:
            owners = item["metadata"].get("ownerReferences") or [{}]
            name = owners[0].get("name", "")
            if kind != "DELETED" and _admitted(item):
                with lock:
                    run.admitted.setdefault(name, time.monotonic())

        def on_worker(_kind: str, item: dict[str, Any]) -> None:
            with lock:
                run.copies.add(item["metadata"]["uid"])  # a watch listed again sees it again

        threads = [
            threading.Thread(target=_watch, args=(fleet.kubeconfig(manager), stop, on_manager))
        ] + [
            threading.Thread(target=_watch, args=(fleet.kubeconfig(w.name), stop, on_worker))
            for w in spec.workers
        ]
        for thread in threads:
            thread.start()
        time.sleep(2)  # the watches have listed
        from kubernetes import client

        batch = client.BatchV1Api(_api(fleet.kubeconfig(manager)))

        def create(index: int) -> None:
            name = f"tp-{index:05d}"
            batch.create_namespaced_job(NAMESPACE, job(name))
            with lock:
                run.created[name] = time.monotonic()

        run.started = time.monotonic()
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(create, range(workloads)))
        log(f"  {dispatcher}: {workloads} Jobs created in {time.monotonic() - run.started:.0f} s")
        deadline = time.monotonic() + timeout
        said = time.monotonic()
        while len(run.admitted) < workloads and time.monotonic() < deadline:
            time.sleep(1)
            if time.monotonic() - said >= 30:
                said = time.monotonic()
                log(f"  {dispatcher}: {len(run.admitted)} of {workloads} admitted")
        stop.set()
        for thread in threads:
            thread.join(timeout=40)
        if local is not None:
            run.dispatcher_metrics = dispatcher_metrics(local.metrics_text())
        return run
    finally:
        stop.set()
        running.down()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", type=int, default=1000)
    parser.add_argument("--dispatchers", default=",".join(DISPATCHERS))
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    parser.add_argument("--csv", type=Path)
    parser.add_argument(
        "--simulate",
        action="store_true",
        help="print the simulation of the same shape (Kueue's worker clients modelled) and exit",
    )
    args = parser.parse_args(argv)
    chosen = [d.strip() for d in args.dispatchers.split(",") if d.strip()]
    unknown = [d for d in chosen if d not in DISPATCHERS]
    if unknown or not chosen:
        parser.error(f"--dispatchers: {', '.join(unknown) or 'none'}: choose from {DISPATCHERS}")
    if args.workloads < 1:
        parser.error("--workloads: at least 1")
    if args.simulate:
        runs = {d: simulated(d, args.workloads) for d in chosen}
        print(table([run.row() for run, _ in runs.values()]))
        print("requests to each worker, simulated: " + ", ".join(
            f"{d} {sent:.0f} ({sent / args.workloads:.1f} a workload)"
            for d, (_, sent) in runs.items()))  # fmt: skip
        return 0
    from components.upstream import toolchain

    missing = [t for t in toolchain.CONTROL_PLANE if not toolchain.path_of(t).exists()]
    if missing:
        print(
            f"error: {', '.join(missing)} not built: run `python -m loopback build` first",
            file=sys.stderr,
        )
        return 2
    # A TERM (a CI job cancelled, `kill`) ends the run as Ctrl-C does: each fleet is torn
    # down by measure()'s finally, not left running.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    from loopback.controlplane import StartError
    from loopback.fleet import FleetError

    rows = []
    for dispatcher in chosen:
        try:
            with tempfile.TemporaryDirectory(prefix="mkf-throughput-") as tmp:
                run = measure(dispatcher, args.workloads, Path(tmp), args.timeout, print)
        except (FleetError, StartError, RuntimeError) as exc:  # the fleet is down again
            print(f"error: {dispatcher}: {exc}", file=sys.stderr)
            return 2
        rows.append(run.row())
        print(f"  {dispatcher}: {rows[-1]}")
    print(table(rows))
    if args.csv:
        with args.csv.open("w", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return 0 if all(r["admitted"] == r["workloads"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
