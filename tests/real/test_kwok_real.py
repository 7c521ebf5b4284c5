"""A loopback worker with simulated nodes (loopback/kwok.py), against the real engines: a Job
submitted on the manager is nominated by our dispatcher, dispatched by MultiKueue, admitted
on the worker, gets a pod
from the worker's Job controller, is bound by the real kube-scheduler to a node KWOK v0.8.0
manages, runs for the time its pod template names, and completes; MultiKueue then finishes
the manager's Workload. This is what bench/kwok_compare.py's runs rest on."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from components.upstream import toolchain
from loopback.kwok import RUN_ANNOTATION, NodeShape
from tests.helpers.real_fleet import (
    binaries,
    dispatched_fleet,
    keep_logs,
    loopback_document,
    manifest,
    real_fetch,
)

ROOT = Path(__file__).resolve().parents[2]
RUN_SECONDS = 6
NAMESPACE = "team-a"


def _job() -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "timed",
            "namespace": NAMESPACE,
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
        },
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {RUN_ANNOTATION: f"{RUN_SECONDS}s"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox:1.36",
                            "command": ["sleep", str(RUN_SECONDS)],
                            "resources": {"requests": {"cpu": "1", "memory": "64Mi"}},
                        }
                    ],
                },
            },
        },
    }


def _api(kubeconfig: Path) -> Any:
    from kubernetes import config

    return config.new_client_from_config(config_file=str(kubeconfig))


def _until(what: str, check: Any, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"not within {timeout:.0f} s: {what}")


def test_a_job_runs_its_time_on_a_simulated_node_and_completes(tmp_path: Path) -> None:
    binaries((*toolchain.CONTROL_PLANE, "kube-scheduler", "kwok"))
    manifest()
    dispatched = dispatched_fleet(
        loopback_document(1),
        tmp_path,
        kwok=NodeShape(cpu="2", memory="4Gi", pods="10"),
        fetch=real_fetch,
    )
    fleet, spec = dispatched.fleet, dispatched.connected.spec
    try:
        worker = spec.workers[0].name
        nodes = k8s.CoreV1Api(_api(fleet.kubeconfig(worker))).list_node().items
        assert [n.metadata.name for n in nodes] == [f"{worker}-kwok-0"]
        assert nodes[0].status.allocatable["cpu"] == "2"
        # Nothing of KWOK's reaches the manager: only workers get nodes.
        manager_api = _api(fleet.kubeconfig(spec.manager.name))
        assert k8s.CoreV1Api(manager_api).list_node().items == []

        k8s.BatchV1Api(manager_api).create_namespaced_job(NAMESPACE, _job())
        core = k8s.CoreV1Api(_api(fleet.kubeconfig(worker)))

        def pod() -> Any:
            pods = core.list_namespaced_pod(NAMESPACE, label_selector="job-name=timed").items
            return pods[0] if pods and pods[0].status.phase == "Succeeded" else None

        done = _until("the worker's pod Succeeded", pod)
        assert done.spec.node_name == f"{worker}-kwok-0"  # bound by the real scheduler
        running = next(c for c in done.status.conditions if c.type == "Ready")
        ended = done.status.container_statuses[0].state.terminated
        assert ended.reason == "Completed" and ended.exit_code == 0
        # It ran its time from when it was Ready (KWOK's pod-complete delay), not at once.
        ran = (ended.finished_at - running.last_transition_time).total_seconds()
        assert RUN_SECONDS - 1 <= ran <= RUN_SECONDS + 10, ran

        objects = k8s.CustomObjectsApi(manager_api)

        def finished() -> bool:
            items = objects.list_namespaced_custom_object(
                "kueue.x-k8s.io", "v1beta2", NAMESPACE, "workloads"
            )["items"]
            return any(
                c["type"] == "Finished" and c["status"] == "True"
                for w in items
                for c in (w.get("status") or {}).get("conditions") or []
            )

        _until("the manager's Workload Finished", finished)
    finally:
        try:
            (tmp_path / "logs").mkdir()
            keep_logs(fleet.state, tmp_path / "logs")
        finally:
            dispatched.down()
