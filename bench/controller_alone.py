"""The controller alone in a process, for bench/controller_bench.py: only the controller's
own modules are loaded, so its peak memory and CPU time are its own, and the benchmark's
polling and writing happen elsewhere.

    python bench/controller_alone.py MANAGER_KUBECONFIG [--profile FILE]

Prints "ready" once connected to the manager, starts at a "go" line on stdin, stops at the
next line, then prints its peak resident memory in MB. `--profile` writes cProfile
statistics of the run, in CPU time.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import resource
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from controller.app import run
from controller.kube import Kube
from controller.metrics import Metrics
from controller.settings import Settings


async def main(kubeconfig: Path, profile: str | None) -> None:
    manager = await Kube.from_kubeconfig(yaml.safe_load(kubeconfig.read_text()), "manager")
    stop = asyncio.Event()
    print("ready", flush=True)
    sys.stdin.readline()  # go
    # The next line, or the benchmark going away, stops it.
    asyncio.get_running_loop().add_reader(sys.stdin.fileno(), stop.set)
    # CPU time, not wall-clock: on a shared machine the time spent descheduled would land
    # on whatever call was running.
    profiler = cProfile.Profile(time.process_time) if profile else None
    if profiler is not None:
        profiler.enable()
    try:
        await run(manager, Settings(identity="bench", metrics_port=0), stop, Metrics(), port=0)
    finally:
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(profile)
        await manager.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kubeconfig", type=Path)
    parser.add_argument("--profile")
    args = parser.parse_args()
    asyncio.run(main(args.kubeconfig, args.profile))
    print(f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}", flush=True)
