"""`mkf job` and `mkf logs` against emulated clusters seeded as Kueue's MultiKueue leaves a
job: the manager's Job and its Workload, the worker's copies, pods and events. The kind tier
runs both on a real sample Job (tests/kind/test_kind_tier.py)."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.helpers.fleet_harness import K, workload
from tests.helpers.kube_emulator import Emulator

NS = "default"
WORKLOADS = f"{K}/workloads"


def _job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
        },
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox:1.36"}],
                }
            }
        },
    }


def _condition(kind: str, at: str, reason: str = "") -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True",
        "reason": reason or kind,
        "message": "",
        "lastTransitionTime": at,
    }


def _owned(wl: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    wl["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": job["metadata"]["name"],
            "uid": job["metadata"]["uid"],
            "controller": True,
        }
    ]
    return wl


def _pod(name: str, job_uid: str, phase: str, restarts: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {"batch.kubernetes.io/controller-uid": job_uid},
        },
        "spec": {"nodeName": "w1-node", "containers": [{"name": "main", "image": "busybox"}]},
        "status": {
            "phase": phase,
            "containerStatuses": [{"name": "main", "restartCount": restarts}],
        },
    }


def _event(name: str, kind: str, about: str, reason: str, at: str, message: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": NS},
        "involvedObject": {"kind": kind, "name": about, "namespace": NS},
        "reason": reason,
        "message": message,
        "type": "Normal",
        "lastTimestamp": at,
    }


async def _seeded(tmp_path: Path) -> tuple[Emulator, Emulator, Emulator]:
    manager, w1, w2 = Emulator("manager"), Emulator("w1"), Emulator("w2")
    for e in (manager, w1, w2):
        await e.start()
    clusters = []
    for name, e, role in (
        ("manager", manager, "manager"),
        ("w1", w1, "worker"),
        ("w2", w2, "worker"),
    ):
        path = tmp_path / f"{name}.kubeconfig"
        path.write_text(yaml.safe_dump(e.kubeconfig()))
        clusters.append({"name": name, "role": role, "kubeconfig": path.name})
    (tmp_path / "summary.json").write_text(json.dumps({"clusters": clusters}))

    # Ran on w1 and finished: two pods (the first one restarted once).
    job = manager.put("batch/jobs", _job("sample-job"))
    # Admitted: Kueue has cleared the nomination (the CRD keeps clusterName and
    # nominatedClusterNames apart).
    wl = workload("job-sample-job-1a2b3", cpu="100m", cluster="w1", namespace=NS)
    wl["status"]["conditions"] += [
        _condition("Admitted", "2026-11-29T05:00:03Z"),
        _condition("Finished", "2026-11-29T05:00:20Z", "Succeeded"),
    ]
    wl["status"]["conditions"][0]["lastTransitionTime"] = "2026-11-29T05:00:01Z"
    manager.put(WORKLOADS, _owned(wl, job))
    manager.put(
        "events",
        _event("e1", "Workload", "job-sample-job-1a2b3", "Nominated", "2026-11-29T05:00:02Z", "w1"),
    )
    manager.put(
        "events", _event("e2", "Job", "sample-job", "Resumed", "2026-11-29T05:00:03Z", "resumed")
    )
    manager.put("events", _event("e3", "Job", "other", "Resumed", "2026-11-29T05:00:03Z", "no"))
    remote_job = w1.put("batch/jobs", _job("sample-job"))
    remote_wl = workload("job-sample-job-1a2b3", cpu="100m", namespace=NS)
    remote_wl["status"]["conditions"].append(
        _condition("Finished", "2026-11-29T05:00:19Z", "Succeeded")
    )
    w1.put(WORKLOADS, remote_wl)
    uid = remote_job["metadata"]["uid"]
    w1.put("pods", _pod("sample-job-aaaaa", uid, "Succeeded", restarts=1))
    w1.put("pods", _pod("sample-job-bbbbb", uid, "Succeeded"))
    w1.put("pods", _pod("another-job-ccccc", "some-other-uid", "Running"))
    w1.put(
        "events",
        _event("p1", "Pod", "sample-job-aaaaa", "Started", "2026-11-29T05:00:05Z", "started"),
    )
    w1.logs[(NS, "sample-job-aaaaa", "main")] = "hello from a worker\nsecond line\n"
    w1.logs[(NS, "sample-job-bbbbb", "main")] = "hello from the other pod\n"

    # Finished on w1 a while ago: MultiKueue has removed its copy there, pods and all.
    gone = manager.put("batch/jobs", _job("gone-job"))
    wl = workload("job-gone-job-7f8a9", cpu="100m", cluster="w1", namespace=NS)
    wl["status"]["conditions"].append(_condition("Finished", "2026-11-29T04:00:00Z", "Succeeded"))
    manager.put(WORKLOADS, _owned(wl, gone))

    # Nominated to w2, not admitted there yet: its copy waits in w2's queue.
    waiting = manager.put("batch/jobs", _job("waiting-job"))
    wl = workload("job-waiting-job-4d5e6", cpu="100m", namespace=NS)
    wl["status"]["nominatedClusterNames"] = ["w2"]
    manager.put(WORKLOADS, _owned(wl, waiting))
    w2.put(WORKLOADS, workload("job-waiting-job-4d5e6", cpu="100m", reserved=False, namespace=NS))
    w2.put("batch/jobs", _job("waiting-job"))
    return manager, w1, w2


async def _started(*args: str) -> asyncio.subprocess.Process:
    """`mkf ARGS` in a process of its own, its output piped."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "components",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _mkf(*args: str) -> tuple[int, str, str]:
    process = await _started(*args)
    out, err = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode or 0, out.decode(), err.decode()


def test_job_shows_where_it_ran_its_pods_and_both_sides_events(tmp_path: Path) -> None:
    async def main() -> None:
        emulators = await _seeded(tmp_path)
        d = str(tmp_path)
        try:
            code, out, err = await _mkf("job", "default/sample-job", "--dir", d)
            assert code == 0, err
            assert "Job default/sample-job on manager" in out
            assert "Workload job-sample-job-1a2b3 (queue user-queue): Finished (Succeeded)" in out
            assert "nominated: -    admitted on: w1" in out
            assert "on w1: Workload Finished (Succeeded); Job there" in out
            rows = [
                line.split()
                for line in out.splitlines()
                if "sample-job-" in line and "Succeeded" in line
            ]
            assert ["sample-job-aaaaa", "Succeeded", "1", "w1-node"] in rows
            assert "another-job" not in out  # the worker's other pods are not this job's
            # Both sides' events, oldest first, and only this job's.
            events = out[out.index("Events, oldest first:") :]
            assert events.index("Nominated") < events.index("Resumed") < events.index("Started")
            assert re.search(r"05:00:05  w1 +Pod/sample-job-aaaaa +Normal Started: started", events)
            assert "no" not in events.split("Resumed: resumed")[1].split("\n")[0]

            code, out, err = await _mkf(
                "job", "sample-job", "-n", "default", "--dir", d, "-o", "json"
            )
            assert code == 0, err
            doc = json.loads(out)
            assert doc["finished"] is True and doc["kind"] == "Job"
            (wl,) = doc["workloads"]
            assert wl["admitted_on"] == "w1" and wl["nominated"] == []
            assert wl["since"]["Finished"] == "2026-11-29T05:00:20Z"
            (side,) = wl["workers"]
            assert [p["name"] for p in side["pods"]] == ["sample-job-aaaaa", "sample-job-bbbbb"]
            assert [(e["cluster"], e["reason"]) for e in doc["events"]] == [
                ("manager", "Nominated"),
                ("manager", "Resumed"),
                ("w1", "Started"),
            ]

            # Waiting on a worker: where it was copied to, and nothing admitted yet.
            code, out, err = await _mkf("job", "default/waiting-job", "--dir", d)
            assert code == 0, err
            assert "nominated: w2    admitted on: - (no worker has admitted it yet)" in out
            assert "on w2: Workload Pending; Job there" in out

            # Not found: exit 2, naming what was looked for and where.
            code, out, err = await _mkf("job", "default/nope", "--dir", d)
            assert code == 2 and out == ""
            assert err.startswith("error: no Job, JobSet, LeaderWorkerSet, TrainJob")
            assert "named default/nope on the manager (manager)" in err
            code, _, err = await _mkf("job", "team-b/nope", "--kind", "jobset", "--dir", d)
            assert code == 2 and "error: no JobSet named team-b/nope on the manager" in err
            assert err.count("\n") == 1
        finally:
            for e in emulators:
                await e.stop()

    asyncio.run(main())


def test_logs_come_from_the_worker_that_runs_the_job(tmp_path: Path) -> None:
    async def main() -> None:
        emulators = await _seeded(tmp_path)
        d = str(tmp_path)
        try:
            code, out, err = await _mkf("logs", "default/sample-job", "--dir", d)
            assert code == 0, err
            assert out == "hello from a worker\nsecond line\n"
            assert "showing pod sample-job-aaaaa, the first of 2" in err

            code, out, err = await _mkf("logs", "sample-job", "--all-pods", "--dir", d)
            assert code == 0, err
            assert out.splitlines() == [
                "[sample-job-aaaaa/main] hello from a worker",
                "[sample-job-aaaaa/main] second line",
                "[sample-job-bbbbb/main] hello from the other pod",
            ]
            code, out, err = await _mkf(
                "logs", "sample-job", "--pod", "sample-job-bbbbb", "-f", "--since", "5m", "--dir", d
            )
            assert (code, out) == (0, "hello from the other pod\n"), err

            # Clear lines, exit 2, for what cannot be shown.
            code, out, err = await _mkf(
                "logs", "default/waiting-job", "--pod-running-timeout", "1", "--dir", d
            )
            assert code == 2 and out == ""
            assert err.splitlines() == [
                "waiting up to 1s (--pod-running-timeout): Job default/waiting-job has not been "
                "admitted on any worker yet (nominated: w2), so it has no logs: `mkf job "
                "default/waiting-job` shows where it waits (--watch follows it)",
                "error: Job default/waiting-job has not been admitted on any worker yet "
                "(nominated: w2), so it has no logs: `mkf job default/waiting-job` shows where "
                "it waits (--watch follows it)",
            ]
            code, out, err = await _mkf("logs", "gone-job", "--dir", d)
            assert code == 2 and out == ""
            assert err.startswith(
                "error: Job default/gone-job has finished on w1, and MultiKueue removed its copy "
                "there with its pods, whose logs went with them"
            )
            code, out, err = await _mkf("job", "gone-job", "--dir", d)
            assert code == 0, err
            assert (
                "on w1: removed by MultiKueue once finished (its pods and their logs with it)"
                in out
            )
            code, _, err = await _mkf("logs", "sample-job", "--pod", "nope", "--dir", d)
            assert code == 2
            assert "has no pod nope: its pods are sample-job-aaaaa, sample-job-bbbbb" in err
            code, _, err = await _mkf("logs", "sample-job", "-c", "sidecar", "--dir", d)
            assert code == 2 and "pod sample-job-aaaaa has no container sidecar" in err
            code, _, err = await _mkf("logs", "sample-job", "--since", "soon", "--dir", d)
            assert code == 2 and "'soon' is not a duration" in err
        finally:
            for e in emulators:
                await e.stop()

    asyncio.run(main())


def test_logs_wait_for_the_job_to_run_then_follow_it(tmp_path: Path) -> None:
    async def main() -> None:
        emulators = await _seeded(tmp_path)
        manager, w2 = emulators[0], emulators[2]
        try:
            process = await _started(
                "logs",
                "default/waiting-job",
                "-f",
                "--pod-running-timeout",
                "60",
                "--dir",
                str(tmp_path),
            )
            assert process.stderr is not None
            said = await asyncio.wait_for(process.stderr.readline(), 30)
            assert said.decode().startswith("waiting up to 60s (--pod-running-timeout): ")
            # w2 admits it and its pod runs: the wait ends and the log streams.
            (wl,) = [
                o
                for (_, n), o in manager.objects[(K, "workloads")].items()
                if n.startswith("job-waiting")
            ]
            del wl["status"]["nominatedClusterNames"]
            wl["status"]["clusterName"] = "w2"
            manager.put(WORKLOADS, wl)
            (copy,) = [o for (_, n), o in w2.objects[("batch", "jobs")].items()]
            w2.put("pods", _pod("waiting-job-ddddd", copy["metadata"]["uid"], "Running"))
            w2.logs[(NS, "waiting-job-ddddd", "main")] = "started at last\n"
            out, err = await asyncio.wait_for(process.communicate(), 30)
            assert (process.returncode, out.decode()) == (0, "started at last\n"), err
        finally:
            for e in emulators:
                await e.stop()

    asyncio.run(main())


def test_job_watch_follows_it_until_it_ends(tmp_path: Path) -> None:
    async def main() -> None:
        emulators = await _seeded(tmp_path)
        manager = emulators[0]
        try:
            process = await _started(
                "job", "default/waiting-job", "--watch", "--interval", "0.2", "--dir", str(tmp_path)
            )
            assert process.stdout is not None
            first = await asyncio.wait_for(process.stdout.readline(), 30)
            assert first.decode().startswith("Job default/waiting-job on manager")
            await asyncio.sleep(0.5)
            assert process.returncode is None  # still following
            (wl,) = [
                o
                for (_, n), o in manager.objects[(K, "workloads")].items()
                if n.startswith("job-waiting")
            ]
            wl["status"]["clusterName"] = "w2"
            del wl["status"]["nominatedClusterNames"]
            wl["status"]["conditions"].append(
                _condition("Finished", "2026-11-29T05:01:00Z", "Succeeded")
            )
            manager.put(WORKLOADS, wl)
            out, err = await asyncio.wait_for(process.communicate(), 30)
            assert process.returncode == 0, err
            text = first.decode() + out.decode()
            assert "\n---\n" in text  # the change printed anew
            assert text.rstrip().split("---")[-1].count("Finished (Succeeded)") == 1
        finally:
            for e in emulators:
                await e.stop()

    asyncio.run(main())
