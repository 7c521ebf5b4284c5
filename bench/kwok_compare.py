"""The real-fleet comparison on control planes that are not starved (issue 39, item 3): the
stream of bench/fleet_compare.py through Kueue's AllAtOnce and our dispatcher on loopback
fleets whose workers have simulated nodes (loopback/kwok.py): real kube-apiservers, etcds,
controller managers and schedulers, Kueue v0.19.2 with MultiKueue and our dispatcher, and
pods that run for their job's time without a container.

    .venv-dev/bin/python -m loopback build kwok kube-scheduler lws
    .venv-dev/bin/python bench/kwok_compare.py [--workers 3] [--seeds 1,2,3] \\
        [--minutes 3] [--csv runs.csv]
    .venv-dev/bin/python bench/kwok_compare.py --table runs.csv     # the table again
    .venv-dev/bin/python bench/kwok_compare.py --seeds 1 --keep-workloads kept
    .venv-dev/bin/python bench/preemption_compare.py kept/1-policy.json  # who preempted whom

Each run has a fleet of its own, brought up for it and down after it (about a minute), so
nothing of one run is left for the next; the dispatchers run in a turned order per seed, as
on kind. The workers' ClusterQueues hold 3, 4 and 5 cores in turn (bench's fleet at
`--cpu-unit 1`: a simulated node holds whole cores, so the stream is the simulation's at
full size), 4 GiB of memory per core as the simulation's workers have, and preempt lower
priorities within a ClusterQueue. Jobs run `duration` from the moment their pod is Running
(RUN_ANNOTATION on the pod template, read by KWOK's pod-complete stage).

What differs from the kind fleet, and why:
- JobSets are served as LeaderWorkerSets are, deleted their run time after admission:
  JobSet v0.12.0 cannot run as a process beside others (loopback/operators.py), so nothing
  makes a JobSet's Jobs here, and Kueue admits and MultiKueue dispatches it all the same.
  The LeaderWorkerSet controller runs (its webhook defaults what the CRD requires); its
  pods serve on the simulated nodes until the replay deletes their LeaderWorkerSet;
- no waitForPodsReady: a JobSet's Workload has no pods here to become ready.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from dq_sim import Settings
from fleet_compare import (
    Fleet,
    agreement,
    canary,
    default_dispatchers,
    ensure_priority_classes,
    mean_delay,
    no_usage,
    read_csv,
    record_run,
    replay_on,
    rotated,
    stream_options,
    table,
    until_stopped,
    usage_of,
    worker_queues,
)
from fleet_replay import RUN_ERRORS, _predicted, report_error
from fleet_stream import Stream, draw

from components.upstream.gomodule import ModuleSourceError
from components.upstream.toolchain import ToolchainError
from controller.kube import Kube
from loopback.controlplane import StartError
from loopback.fleet import FleetError

# What stops a run, said in one line: the stream's and the recording's, and the fleet's own.
ERRORS = (*RUN_ERRORS, FleetError, StartError, ToolchainError, ModuleSourceError, RuntimeError)

ROOT = Path(__file__).resolve().parent.parent
QUOTAS = (3, 4, 5)  # cores of worker i: QUOTAS[i % 3]
SERVED = frozenset({"LeaderWorkerSet", "JobSet"})
# The simulation's settings for this fleet (bench/dq_sim.py Settings; the defaults are a kind
# fleet's, and leave out the manager's clients):
# - an evicted or deleted workload's pods are gone within a second, as KWOK's pod-delete
#   stage deletes a pod at once (no kubelet, no grace period), not in the ten seconds
#   kind's pods take;
# - the manager reaches each worker through Kueue v0.19.2's clients, 5 QPS and burst 10
#   (bench/dq_clients.py), and a copy's pods start only when the manager has made its job
#   on the worker: both read in Kueue's source, not fitted to the runs;
# - with the way to a worker modelled, `admission_delay` is the worker's Kueue alone, from
#   a copy's creation to its QuotaReserved: 0.0 to 0.16 s (mean per run) in the six runs of
#   BENCHMARKS.md section 5 (bench/fleet_metrics.py delays), where kind's default is 2 s.
KWOK_SETTINGS = Settings(
    release_delay=1.0, admission_delay=0.1, worker_qps=5.0, worker_burst=10, job_on_seen=True
)


def stack_document(workers: int) -> dict[str, Any]:
    """The loopback stack as the comparison's fleet: `workers` workers of QUOTAS cores, the
    frameworks the stream uses, preemption of lower priorities, our dispatcher enabled
    (tests/helpers/real_fleet.dispatched_fleet runs Kueue's instead where asked)."""
    from tests.helpers.real_fleet import loopback_document

    document = loopback_document(workers)
    config = document["config"]
    for index, worker in enumerate(config["multikueue-fleet:workers"]):
        cores = QUOTAS[index % len(QUOTAS)]
        worker["quotas"] = {
            "cluster-queue": {"default-flavor": {"cpu": cores, "memory": f"{cores * 4}Gi"}}
        }
    config["multikueue-fleet:frameworks"] = ["batch", "jobset", "leaderworkerset"]
    queues = config["multikueue-fleet:queues"]
    queues["clusterQueues"] = [q for q in queues["clusterQueues"] if q["name"] == "cluster-queue"]
    queues["clusterQueues"][0]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    queues["localQueues"] = [lq for lq in queues["localQueues"] if lq["namespace"] == "team-a"]
    return document


class KwokFleet:
    """One run's loopback fleet with simulated nodes: up, then down."""

    def __init__(self, dispatcher: str, workers: int, folder: Path, timeout: float) -> None:
        self.dispatcher, self.workers, self.folder = dispatcher, workers, folder
        self.timeout = timeout  # for each step of `up` to be ready
        self.running: Any = None  # tests/helpers/real_fleet.DispatchedFleet, once up

    def up(self) -> Any:
        """The loopback fleet, every worker Active, dispatched by self.dispatcher."""
        from loopback.kwok import NodeShape
        from tests.helpers.real_fleet import dispatched_fleet

        self.running = dispatched_fleet(
            stack_document(self.workers),
            self.folder,
            dispatcher=self.dispatcher,
            timeout=self.timeout,
            framework_controllers=True,
            kwok=NodeShape(cpu="64", memory="256Gi", pods="500"),
        )
        return self.running.fleet

    def usage(self) -> dict[str, float]:
        if self.running is None or self.running.local is None:
            return no_usage()
        return usage_of(self.running.local.metrics_text())

    def workload_reads(self) -> float:
        """The GETs of Workloads every worker's API server has served so far
        (`apiserver_request_total`, verb GET, resource workloads): the manager's MultiKueue
        reads each copy with a GET through a client without a cache (`readGroup`, Kueue
        v0.19.2 pkg/controller/admissionchecks/multikueue/workload.go), where a worker's own
        Kueue, our dispatcher and the controller manager read theirs from watches, but for
        the garbage collector's look at a dependent whose owner went."""
        from kubernetes import config as kube_config

        total = 0.0
        for cluster in self.running.fleet.clusters.values():
            if cluster["role"] == "manager":
                continue
            config = yaml.safe_load(Path(cluster["kubeconfig"]).read_text())
            with kube_config.new_client_from_config_dict(config) as api:
                answer = api.call_api("GET", f"{api.configuration.host}/metrics")
                answer.read()
                total += workload_gets(answer.data.decode())
        return total

    def down(self) -> None:
        if self.running is not None:
            self.running.down()


_REQUESTS = re.compile(r"^apiserver_request_total\{([^}]*)\}\s+(\S+)$", re.MULTILINE)


def workload_gets(page: str) -> float:
    """The GETs of Workloads a kube-apiserver's /metrics page counts, every code."""
    return sum(
        float(value)
        for labels, value in _REQUESTS.findall(page)
        if 'resource="workloads"' in labels
        and 'verb="GET"' in labels
        and 'subresource=""' in labels
    )


async def open_fleet(loopback: Any) -> Fleet:
    kubes = {
        name: await Kube.from_kubeconfig(yaml.safe_load(Path(c["kubeconfig"]).read_text()), name)
        for name, c in loopback.clusters.items()
    }
    manager = next(n for n, c in loopback.clusters.items() if c["role"] == "manager")
    return Fleet(kubes.pop(manager), kubes)


async def one_run(
    dispatcher: str, seed: int, args: argparse.Namespace, folder: Path
) -> tuple[dict[str, float], Stream]:
    """A fleet up, the seed's stream through it, the fleet down."""
    run = KwokFleet(dispatcher, args.workers, folder, args.up_timeout)
    try:
        # In this thread, blocking the loop: a SIGTERM meanwhile cancels the run once `up` has
        # returned, so that `down` below stops what it started (`up` in another thread would
        # go on starting processes after the cancelled run had cleaned up).
        loopback = run.up()
        fleet = await open_fleet(loopback)
        try:
            quotas, queues = await worker_queues(fleet, args.namespace, args.local_queue)
            stream = draw(quotas, args.minutes, args.time_scale, seed, queues=queues)
            await ensure_priority_classes(fleet)
            waited = await canary(fleet, args)
            print(f"  {dispatcher}: the fleet dispatches ({waited:.0f} s)", flush=True)
            before, read = run.usage(), run.workload_reads()
            found = await replay_on(
                fleet, stream, args, served_kinds=SERVED, run=f"{seed}-{dispatcher}"
            )
            after, read_after = run.usage(), run.workload_reads()
            workloads = sum(job.parts for job in stream.scenario.jobs)
            found["workload_reads"] = (read_after - read) / max(workloads, 1)
            found["cpu_s"] = after["cpu"] - before["cpu"]
            found["rss_mib"] = after["rss"] / 2**20
            found["nomination_delay_s"] = mean_delay(before, after)
            return found, stream
        finally:
            await fleet.close()
    finally:
        run.down()


async def compare(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    dispatchers = args.dispatchers or default_dispatchers(args.workers)
    with tempfile.TemporaryDirectory(prefix="mkf-kwok-") as tmp:
        for seed in args.seeds:
            order = rotated(dispatchers, seed)
            print(f"seed {seed}: {args.workers} workers; in this order: {', '.join(order)}")
            for number, dispatcher in enumerate(order):
                started = time.monotonic()
                folder = Path(tmp) / f"{seed}-{number}"
                real, stream = await one_run(dispatcher, seed, args, folder)
                if number == 0:
                    print(f"  {stream.scenario.about}; {len(stream.scenario.jobs)} jobs")
                record_run(rows, args, dispatcher, seed, stream, real, started, KWOK_SETTINGS)
    return rows


def stream_of(args: argparse.Namespace, seed: int) -> Stream:
    """The stream a run of seed `seed` drew on the fleet stack_document makes (the quotas
    and queue settings it gives every worker), without the fleet."""
    quotas = {f"worker{i + 1}": float(QUOTAS[i % len(QUOTAS)]) for i in range(args.workers)}
    queues = dict.fromkeys(quotas, ("BestEffortFIFO", "LowerPriority"))
    return draw(quotas, args.minutes, args.time_scale, seed, queues=queues)


def simulated_again(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """Each row's simulated side computed again with KWOK_SETTINGS, from the stream its seed
    draws: the simulation is a function of the stream alone, so a --csv of an earlier model
    reads against the current one."""
    for row in rows:
        stream = stream_of(args, row["seed"])
        row["simulated"] = _predicted(stream, row["dispatcher"], KWOK_SETTINGS)


def _workers(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        count = 0
    if not 2 <= count <= 20:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of workers from 2 to 20")
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=_workers, default=3)
    parser.add_argument(
        "--up-timeout",
        type=float,
        default=180.0,
        help="seconds each step of a fleet's start may take (its control planes, its Kueues; "
        "ten workers on two cores need more than the default)",
    )
    stream_options(parser, "the pods' image (never pulled)")
    parser.add_argument(
        "--table",
        type=Path,
        metavar="CSV",
        help="print the table of a --csv file of this script, the simulation run again with "
        "the same --workers, --minutes and --time-scale, and exit",
    )
    args = parser.parse_args(argv)
    if args.table:
        try:
            rows = read_csv(args.table)
            simulated_again(rows, args)
        except (OSError, KeyError, ValueError) as exc:
            print(f"error: --table {args.table}: not a --csv file of this script ({exc})",
                  file=sys.stderr)  # fmt: skip
            return 2
        print(table(rows))
        print("\nreal over simulated, medians over seeds:\n")
        print(agreement(rows))
        return 0
    started = time.monotonic()
    try:
        # Stopped, each run's fleet is brought down.
        rows = asyncio.run(until_stopped(compare(args)))
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("interrupted: each run's fleet was brought down", file=sys.stderr)
        return 130
    except ERRORS as exc:
        return report_error(
            exc, "the fleet is the project's loopback stack; its processes' logs went with it"
        )
    print(f"\n{len(rows)} runs in {time.monotonic() - started:.0f} s; medians over seeds\n")
    print(table(rows))
    print("\nreal over simulated, medians over seeds:\n")
    print(agreement(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
