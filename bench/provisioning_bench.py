"""Provisioning scale under Pulumi's mock engine: how long evaluating the program takes,
and how many resources and objects it registers, as workers and ClusterQueues grow.

    .venv-dev/bin/python bench/provisioning_bench.py [--workers 2 10 20] [--queues 10 100]

Each row is one fleet (kind, 1 manager + N workers, Q ClusterQueues each with a
LocalQueue) run through __main__.py with the mock engine, as the tests do. The last
column divides the time by the objects registered: flat means linear growth.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.helpers.pulumi_harness import kube_objects, prepare_environment, run_program  # noqa: E402


def stack_config(workers: int, queues: int) -> dict[str, str]:
    quota = {
        "coveredResources": ["cpu", "memory"],
        "flavors": [{"name": "default-flavor", "resources": {"cpu": 8, "memory": "32Gi"}}],
    }
    body = {
        "manager": {"provider": "kind"},
        "workers": [{"name": f"worker{i}"} for i in range(workers)],
        "queues": {
            "flavors": [{"name": "default-flavor"}],
            "clusterQueues": [
                {"name": f"cq-{i}", "resourceGroups": [quota]} for i in range(queues)
            ],
            "localQueues": [
                {"namespace": f"team-{i % 10}", "name": f"lq-{i}", "clusterQueue": f"cq-{i}"}
                for i in range(queues)
            ],
        },
    }
    return {f"multikueue-fleet:{k}": json.dumps(v) for k, v in body.items()}


def measure(workers: int, queues: int) -> dict[str, float]:
    started = time.perf_counter()
    run = run_program("bench", stack_config(workers, queues), [])
    elapsed = time.perf_counter() - started
    resources = len(run.monitor.registered)
    # The project's own objects are one resource each; upstream installs stay grouped.
    objects = len(kube_objects(run.monitor)) + sum(
        len(r.inputs.get("objs") or [])
        for r in run.monitor.registered.values()
        if r.typ.endswith("yaml/v2:ConfigGroup")
    )
    return {
        "workers": workers,
        "queues": queues,
        "seconds": elapsed,
        "resources": resources,
        "objects": objects,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 10, 20])
    parser.add_argument("--queues", type=int, nargs="+", default=[10, 100])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        prepare_environment(Path(tmp))
        measure(2, 10)  # imports and first-run costs stay out of the table
        print(
            f"{'workers':>7} {'CQs':>5} {'seconds':>8} {'resources':>10} {'objects':>8} "
            f"{'ms/object':>10}"
        )
        for workers in args.workers:
            for queues in args.queues:
                r = measure(workers, queues)
                print(
                    f"{r['workers']:>7} {r['queues']:>5} {r['seconds']:>8.2f} "
                    f"{r['resources']:>10} {r['objects']:>8} "
                    f"{1000 * r['seconds'] / r['objects']:>10.3f}"
                )


if __name__ == "__main__":
    main()
