"""The real-fleet replay (bench/fleet_replay.py) against emulated API servers: a manager
and three workers, with a stand-in for Kueue that admits each submitted job on a worker
and finishes it. What it checks is the replay's own work: the stream submitted where and
when it says, LeaderWorkerSets served their time and deleted, every Workload version
recorded and measured, and the run's end; Kueue itself is the kind tier's to run."""

from __future__ import annotations

import asyncio
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import fleet_replay
from fleet_metrics import ORIGIN_LABEL
from fleet_stream import draw

from tests.helpers.fleet_harness import BenchFleet
from tests.helpers.kube_emulator import Emulator

NS = "team-a"
WORKLOADS = "kueue.x-k8s.io/workloads"
CLASSES = {0: "low", 100: "normal", 200: "high"}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(kind: str) -> dict[str, Any]:
    return {"type": kind, "status": "True", "lastTransitionTime": _now(), "reason": kind}


# The kinds whose Workloads the fake Kueue below never finishes: they go when their owner does.
PLURALS = {
    "LeaderWorkerSet": "leaderworkerset.x-k8s.io/leaderworkersets",
    "JobSet": "jobset.x-k8s.io/jobsets",
}


def admit(
    manager: Emulator,
    worker: Emulator,
    cluster: str,
    obj: dict[str, Any],
    name: str,
    never_end: frozenset[str],
) -> None:
    """A Workload `name` for `obj`: reserved on the manager, its copy reserved on `worker`,
    then admitted there."""
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if obj["kind"] in never_end:
        meta["ownerReferences"] = [{"kind": obj["kind"], "name": obj["metadata"]["name"]}]
    reserved = {"conditions": [_condition("QuotaReserved")]}
    manager.put(WORKLOADS, {"metadata": dict(meta), "status": reserved})
    copy = {"name": name, "namespace": NS, "labels": {ORIGIN_LABEL: "manager"}}
    worker.put(WORKLOADS, {"metadata": copy, "status": reserved})
    admitted = [_condition("QuotaReserved"), _condition("Admitted")]
    manager.put(
        WORKLOADS,
        {"metadata": dict(meta), "status": {"clusterName": cluster, "conditions": admitted}},
    )


async def kueue(
    manager: Emulator,
    workers: dict[str, Emulator],
    run_for: float,
    finalizer: bool = True,
    never_end: frozenset[str] = frozenset({"LeaderWorkerSet"}),
) -> None:
    """Each Job, JobSet and LeaderWorkerSet on the manager gets a Workload, reserved, a
    copy on a worker, admitted there, and (but those of `never_end`: a LeaderWorkerSet's,
    and a JobSet's where nothing runs JobSets) finished `run_for` later; a never-ending
    Workload goes when its owner does, as Kueue's owner reference
    makes it (leaderworkerset_reconciler.go 363): marked for deletion first while a
    finalizer holds it, or (`finalizer` False) removed at once, its last version showing no
    deletionTimestamp."""
    names = sorted(workers)
    started: dict[str, float] = {}
    while True:
        for plural in (
            "batch/jobs",
            "jobset.x-k8s.io/jobsets",
            "leaderworkerset.x-k8s.io/leaderworkersets",
        ):
            for obj in manager.items(plural):
                name = obj["metadata"]["name"]
                if name in started:
                    continue
                started[name] = time.monotonic()
                worker = names[len(started) % len(names)]
                groups = obj["spec"]["replicas"] if obj["kind"] == "LeaderWorkerSet" else 1
                for group in range(groups):
                    admit(manager, workers[worker], worker, obj, f"{name}-{group}", never_end)
        for wl in manager.items(WORKLOADS):
            name = wl["metadata"]["name"]
            owner = name.rsplit("-", 1)[0]
            status = wl.get("status") or {}
            if wl["metadata"].get("ownerReferences"):
                plural = PLURALS[wl["metadata"]["ownerReferences"][0]["kind"]]
                if manager.get(plural, owner, NS) is None:
                    if not finalizer:
                        manager.remove(WORKLOADS, name, NS)
                        continue
                    gone = {**wl, "metadata": {**wl["metadata"], "deletionTimestamp": _now()}}
                    manager.put(WORKLOADS, gone)
                continue
            finished = any(c["type"] == "Finished" for c in status.get("conditions") or [])
            if not finished and time.monotonic() - started[owner] > run_for:
                status = {**status, "conditions": [*status["conditions"], _condition("Finished")]}
                manager.put(WORKLOADS, {**wl, "status": status})
        await asyncio.sleep(0.05)


@pytest.mark.parametrize(
    ("finalizer", "never_end"),
    [
        (True, frozenset({"LeaderWorkerSet"})),
        (False, frozenset({"LeaderWorkerSet"})),
        # A fleet where nothing runs JobSets (the loopback fleet: bench/kwok_compare.py).
        (True, frozenset({"LeaderWorkerSet", "JobSet"})),
    ],
)
def test_a_stream_is_replayed_recorded_and_measured(
    finalizer: bool, never_end: frozenset[str]
) -> None:
    # Half a minute of arrivals on a time scale of 1/3600: a trace hour per second.
    stream = draw({"w1": 4.0, "w2": 6.0, "w3": 8.0}, minutes=0.05, time=3600, seed=3)
    kinds = {"LeaderWorkerSet": "lws", "JobSet": "multi"}
    lws = [j for j in stream.scenario.jobs if j.kind in {kinds[k] for k in never_end}]
    assert lws and len(stream.scenario.jobs) > 5
    assert {j.kind for j in lws} == {kinds[k] for k in never_end}

    async def main() -> dict[str, float]:
        bench = await BenchFleet.start()
        manager, workers, kube, kubes = bench.manager, bench.workers, bench.kube, bench.kubes
        fake = asyncio.create_task(
            kueue(manager, workers, run_for=0.3, finalizer=finalizer, never_end=never_end)
        )
        try:
            began = time.monotonic()
            found, served = await fleet_replay.replay(
                stream,
                kube,
                kubes,
                NS,
                "user-queue",
                "user-queue",
                CLASSES,
                "busybox",
                30,
                served_kinds=never_end,
            )
            assert time.monotonic() - began < 20  # it ended when all were done, not at 30 s
            assert served == {f"{NS}/{j.name}" for j in lws}
            # Local work went straight to its worker, labelled for the worker's LocalQueue.
            local = {n: len(e.items("batch/jobs")) for n, e in workers.items()}
            assert sum(local.values()) == len(stream.scenario.local)
            return found
        finally:
            fake.cancel()
            await bench.stop()

    found = asyncio.run(asyncio.wait_for(main(), 60))
    assert found["workloads"] == sum(j.parts for j in stream.scenario.jobs)
    assert (found["unfinished"], found["pending"], found["lost"]) == (0, 0, 0)
    assert found["copies"] == 1.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--worker", "w1=a.yaml"], "--worker 'w1=a.yaml': write NAME=KUBECONFIG:CORES"),
        (["--worker", "w1=a.yaml:0"], "the worker ClusterQueue's cpu quota, a positive number"),
        (["--priority-class", "normal"], "--priority-class 'normal': write PRIORITY=NAME"),
        (["--worker", "w1=a.yaml:4"], "--worker: 1 given; the comparison needs"),
    ],
)
def test_bad_options_are_one_line(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manager = tmp_path / "m.yaml"
    manager.write_text(yaml.safe_dump({"clusters": [{"name": "m"}]}))
    code = fleet_replay.main(["--manager", str(manager), "--dispatcher", "policy", *args])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1, err


def test_an_unreadable_kubeconfig_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workers = [f"--worker=w{i}={tmp_path / 'missing.yaml'}:4" for i in range(3)]
    code = fleet_replay.main(
        ["--manager", str(tmp_path / "m.yaml"), "--dispatcher", "policy", *workers]
    )
    err = capsys.readouterr().err
    assert code == 2 and "--worker w0" in err and "cannot read it as a kubeconfig" in err


def test_a_cluster_whose_workloads_cannot_be_watched_stops_the_run_with_one_line() -> None:
    """w2 refuses to list Workloads (its reader lacks the right): the run is not measured,
    and the error says where, instead of waiting for its timeout."""
    stream = draw({"w1": 4.0, "w2": 6.0, "w3": 8.0}, minutes=0.05, time=3600, seed=3)

    async def main() -> str:
        bench = await BenchFleet.start()
        workers, kube, kubes = bench.workers, bench.kube, bench.kubes
        workers["w2"].fail("GET", "workloads", 403, times=1000)
        try:
            with pytest.raises(fleet_replay.RecordError) as caught:
                await fleet_replay.replay(
                    stream, kube, kubes, NS, "user-queue", "user-queue", CLASSES, "busybox", 30
                )
            return str(caught.value)
        finally:
            await bench.stop()

    message = asyncio.run(asyncio.wait_for(main(), 25))
    assert message.startswith("w2: watching Workloads in team-a failed") and "\n" not in message
