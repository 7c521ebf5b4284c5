"""The real-fleet comparison's driver (bench/fleet_compare.py) against emulated API servers:
the workers' quotas and queue settings read back from their ClusterQueues, the switch
between Kueue's built-in dispatchers and ours (and back to the stack's), the dispatcher's
cost read from its metrics, and the table. The runs themselves are the kind tier's
(tests/kind/test_kind_tier.py, on the dev fleet)."""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import fleet_compare
from fleet_stream import StreamError

from controller.metrics import Metrics
from tests.helpers.fleet_harness import BenchFleet, cluster_queue
from tests.helpers.kube_emulator import Emulator

OURS = "multikueue-fleet/dispatcher"
CONFIG = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "multiKueue": {"dispatcherName": OURS}}


def _deployment(namespace: str, name: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": replicas, "template": {"metadata": {}}},
        "status": {"replicas": replicas, "updatedReplicas": replicas,
                   "availableReplicas": replicas, "observedGeneration": 1},
    }  # fmt: skip


async def _controller(manager: Emulator) -> None:
    """A stand-in for the Deployment controller: status follows spec and generation."""
    while True:
        for d in manager.items("apps/deployments"):
            want, generation = d["spec"]["replicas"], d["metadata"]["generation"]
            if d["status"].get("observedGeneration") != generation:
                d["status"] = {
                    "replicas": want,
                    "updatedReplicas": want,
                    "availableReplicas": want,
                    "observedGeneration": generation,
                }
                manager.put("apps/deployments", d)
        await asyncio.sleep(0.05)


def _cluster_queue(cpu: str, within: str) -> dict[str, Any]:
    cq = cluster_queue(cpu, "2Gi")
    cq["spec"]["preemption"] = {"withinClusterQueue": within}
    return cq


def test_queues_read_back_and_the_switch_goes_there_and_back() -> None:
    async def main() -> None:
        bench = await BenchFleet.start(("worker1", "worker2", "worker3"))
        manager, workers, kube, kubes = bench.manager, bench.workers, bench.kube, bench.kubes
        manager.put(
            "configmaps",
            {
                "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
                "data": {"controller_manager_config.yaml": yaml.safe_dump(CONFIG)},
            },
        )
        manager.put("apps/deployments", _deployment("kueue-system", "kueue-controller-manager", 1))
        manager.put(
            "apps/deployments",
            _deployment("multikueue-fleet-system", "multikueue-fleet-dispatcher", 2),
        )
        for e, cpu in zip(workers.values(), ("300m", "400m", "0.5"), strict=True):
            e.put("kueue.x-k8s.io/clusterqueues", _cluster_queue(cpu, "LowerPriority"))
            e.put(
                "kueue.x-k8s.io/localqueues",
                {"metadata": {"name": "user-queue", "namespace": "team-a"},
                 "spec": {"clusterQueue": "cluster-queue"}},
            )  # fmt: skip
        deployments = asyncio.create_task(_controller(manager))
        fleet = fleet_compare.Fleet(kube, kubes)
        try:
            quotas, queues = await fleet_compare.worker_queues(fleet, "team-a", "user-queue")
            assert quotas == {"worker1": 0.3, "worker2": 0.4, "worker3": 0.5}
            assert set(queues.values()) == {("BestEffortFIFO", "LowerPriority")}
            with pytest.raises(StreamError, match="no LocalQueue team-a/other"):
                await fleet_compare.worker_queues(fleet, "team-a", "other")

            switch = fleet_compare.Switch(kube)
            await switch.remember()
            await switch.to("Incremental")
            config = manager.get("configmaps", "kueue-manager-config", "kueue-system")
            dispatcher = yaml.safe_load(config["data"]["controller_manager_config.yaml"])
            assert (
                dispatcher["multiKueue"]["dispatcherName"] == fleet_compare.BUILT_IN["Incremental"]
            )
            ours = manager.get(
                "apps/deployments", "multikueue-fleet-dispatcher", "multikueue-fleet-system"
            )
            assert ours["spec"]["replicas"] == 0
            kueue = manager.get("apps/deployments", "kueue-controller-manager", "kueue-system")
            restarted = kueue["spec"]["template"]["metadata"]["annotations"]
            assert "fleet-bench/restarted-at" in restarted
            await switch.to("policy")
            config = manager.get("configmaps", "kueue-manager-config", "kueue-system")
            back = yaml.safe_load(config["data"]["controller_manager_config.yaml"])
            assert back == CONFIG  # the stack's configuration, every other key kept
            ours = manager.get(
                "apps/deployments", "multikueue-fleet-dispatcher", "multikueue-fleet-system"
            )
            assert ours["spec"]["replicas"] == 2  # the stack's replicas

            # A fleet whose Kueue runs a built-in dispatcher is not the bench's.
            await switch.to("AllAtOnce")
            with pytest.raises(StreamError, match="runs no dispatcher of ours"):
                await fleet_compare.Switch(kube).remember()
        finally:
            deployments.cancel()
            await bench.stop()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_the_dispatchers_cost_is_read_from_its_own_metrics() -> None:
    from prometheus_client import generate_latest

    metrics = Metrics()
    before = fleet_compare.usage_of(generate_latest(metrics.registry).decode())
    assert before["cpu"] > 0 and before["rss"] > 2**20
    assert (before["delay_sum"], before["delay_count"]) == (0, 0)
    for seconds in (1.0, 4.0):
        metrics.nomination_delay.observe(seconds)
    after = fleet_compare.usage_of(generate_latest(metrics.registry).decode())
    assert fleet_compare.mean_delay(before, after) == 2.5
    assert math.isnan(fleet_compare.mean_delay(after, after))


def test_worker_cores_sizes_the_stream_for_every_worker_alike() -> None:
    quotas = {"worker1": 4.0, "worker2": 4.0}
    assert fleet_compare.sized(quotas, None) == quotas
    assert fleet_compare.sized(quotas, 1.0) == {"worker1": 1.0, "worker2": 1.0}


def test_a_fleet_folder_without_the_kubeconfigs_says_which_folder(tmp_path: Path) -> None:
    (tmp_path / "kubeconfigs").mkdir()
    (tmp_path / "kubeconfigs" / "manager.yaml").write_text("{}")
    with pytest.raises(StreamError, match=r"holds \['manager'\]; give the --out folder"):
        asyncio.run(fleet_compare.Fleet.open(tmp_path))
    assert fleet_compare.main(["--fleet", str(tmp_path / "none")]) == 2


def test_the_table_holds_medians_over_seeds_beside_the_simulation() -> None:
    def run(dispatcher: str, seed: int, p95: float) -> dict[str, Any]:
        real = {"p95": p95, "copies": 1.0, "unfinished": 0.0, "cpu_s": 2.0}
        return {"dispatcher": dispatcher, "seed": seed, "real": real,
                "simulated": {"p95": 9.0, "copies": math.nan}}  # fmt: skip

    text = fleet_compare.table([run("policy", 1, 4.0), run("policy", 2, 6.0), run("policy", 3, 30)])
    real, simulated = text.splitlines()[2:]
    assert real.startswith("| policy | real (3 seeds) | n/a | 6 (4-30) | n/a |")
    assert "| 2 |" in real  # the dispatcher's CPU seconds, the same in every run
    assert simulated.startswith("| policy | simulated (3 seeds) | n/a | 9 |")
    assert "local preemptions" in text.splitlines()[0]


def test_agreement_is_the_real_median_over_the_simulations_marked_beyond_a_quarter() -> None:
    def run(seed: int, p95: float, preemptions: float) -> dict[str, Any]:
        real = {"p95": p95, "p99": 12.0, "copies": 1.0, "preemptions": preemptions}
        simulated = {"p95": 10.0, "p99": 10.0, "copies": 1.0, "preemptions": 0.0}
        return {"dispatcher": "policy", "seed": seed, "real": real, "simulated": simulated}

    text = fleet_compare.agreement([run(1, 8.0, 0.0), run(2, 11.0, 0.0), run(3, 40.0, 0.0)])
    head, _, row = text.splitlines()
    assert head == (
        "| dispatcher | admit P50 s | admit P95 s | admit P99 s | JCT P95 s | copies/wl "
        "| preemptions | Workload reads on workers per workload |"
    )
    # P50, JCT and the reads unmeasured (kind runs do not count reads); P95's median 11
    # against 10; P99 1.2 is within a quarter; preemptions 0 against 0 agree.
    assert row == "| policy | n/a | 1.10 | 1.20 | n/a | 1.00 | = | n/a |"
    off = fleet_compare.agreement([run(1, 13.0, 2.0)]).splitlines()[2]
    assert off == "| policy | n/a | 1.30 **off** | 1.20 | n/a | 1.00 | vs 0 **off** | n/a |"
    # Kueue's times are whole seconds: 0 s against 0.5 s is the same reading, 2 against 0.5
    # is not; a count has no such tolerance.
    small = [run(1, 0.0, 1.0)]
    small[0]["simulated"].update(p95=0.5, preemptions=0.5)
    assert fleet_compare.agreement(small).splitlines()[2].split(" | ")[2] == "0.00"
    small[0]["real"]["p95"] = 2.0
    assert fleet_compare.agreement(small).splitlines()[2] == (
        "| policy | n/a | 4.00 **off** | 1.20 | n/a | 1.00 | 2.00 **off** | n/a |"
    )


def test_each_seed_runs_the_dispatchers_in_a_turned_order() -> None:
    """Interleaved: over three seeds each dispatcher runs once first, once second, once
    last, so a drift across the runs lands on none of them alone."""
    names = ["AllAtOnce", "Incremental", "policy"]
    orders = [fleet_compare.rotated(names, seed) for seed in (1, 2, 3)]
    assert orders[0] == names
    for position in range(3):
        assert sorted(order[position] for order in orders) == sorted(names)
    # By the seed's number: seed 2 run again alone starts with the second, as it did.
    assert fleet_compare.rotated(names, 2) == ["Incremental", "policy", "AllAtOnce"]
    assert fleet_compare.rotated(names, 4) == names


def test_incremental_runs_by_default_only_where_it_differs_from_all_at_once() -> None:
    """Its step is Kueue's DefaultStepSize, 3: on three workers or fewer its first round
    nominates every worker, as AllAtOnce does."""
    assert fleet_compare.default_dispatchers(3) == ["AllAtOnce", "policy"]
    assert fleet_compare.default_dispatchers(4) == ["AllAtOnce", "Incremental", "policy"]


def test_a_run_starts_once_a_canary_job_is_admitted_and_gone() -> None:
    """The first canary is never admitted (a Kueue that has not reconnected to its workers):
    it is deleted and sent again; the second is admitted, then deleted, its Workload gone."""
    ns, workloads = "team-a", "kueue.x-k8s.io/workloads"

    async def main() -> None:
        bench = await BenchFleet.start()
        manager, kube, kubes = bench.manager, bench.kube, bench.kubes
        args = argparse.Namespace(namespace=ns, queue="user-queue", image="busybox:1.36")
        sent: list[dict[str, Any]] = []

        async def kueue() -> None:
            """Deaf to the first Job; admits the next ones; a Workload goes with its Job."""
            while True:
                jobs = {j["metadata"]["uid"]: j for j in manager.items("batch/jobs")}
                for uid, job in jobs.items():
                    if uid not in {j["metadata"]["uid"] for j in sent}:
                        sent.append(job)
                    if len(sent) > 1 and not manager.get(workloads, f"wl-{uid}", ns):
                        owner = {"kind": "Job", "name": job["metadata"]["name"], "uid": uid}
                        admitted = {
                            "type": "Admitted",
                            "status": "True",
                            "reason": "Admitted",
                            "lastTransitionTime": "2026-11-27T10:00:00Z",
                        }
                        manager.put(workloads, {
                            "metadata": {"name": f"wl-{uid}", "namespace": ns,
                                         "ownerReferences": [owner]},
                            "status": {"conditions": [admitted]},
                        })  # fmt: skip
                for wl in manager.items(workloads):
                    if wl["metadata"]["ownerReferences"][0]["uid"] not in jobs:
                        manager.remove(workloads, wl["metadata"]["name"], ns)
                await asyncio.sleep(0.05)

        fake = asyncio.create_task(kueue())
        try:
            waited = await fleet_compare.canary(
                fleet_compare.Fleet(kube, kubes), args, timeout=20, within=3
            )
            assert 3 <= waited < 20 and len(sent) == 2
            assert not manager.items("batch/jobs") and not manager.items(workloads)
            requests = sent[0]["spec"]["template"]["spec"]["containers"][0]["resources"]
            assert requests == {"requests": {"cpu": "1m", "memory": "8Mi"}}
            assert sent[0]["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "bench-high"
        finally:
            fake.cancel()
            await bench.stop()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_the_table_comes_back_from_the_csv(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rows = [
        {"dispatcher": "policy", "seed": 1, "real": {"p95": 4.0, "cpu_s": 2.0},
         "simulated": {"p95": 9.0}},
        {"dispatcher": "AllAtOnce", "seed": 1, "real": {"p95": 5.0}, "simulated": {"p95": 7.0}},
    ]  # fmt: skip
    path = tmp_path / "runs.csv"
    fleet_compare._csv(path, rows)
    assert fleet_compare.main(["--table", str(path)]) == 0
    # The table, and the real runs against the simulation measure by measure.
    table, agreement = (
        capsys.readouterr().out.strip().split("\n\nreal over simulated, medians over seeds:\n\n")
    )
    assert table == fleet_compare.table(rows)
    assert agreement == fleet_compare.agreement(rows)
    assert "| policy | n/a | 0.44 **off** |" in agreement
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    assert fleet_compare.main(["--table", str(tmp_path / "other.csv")]) == 2
    assert "not a --csv file of this script" in capsys.readouterr().err
