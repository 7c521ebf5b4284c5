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

import yaml
from kubernetes import client as k8s

from components.checks.load import load_stack
from components.upstream import toolchain
from loopback import fleet as loopback_fleet
from loopback.kwok import RUN_ANNOTATION, NodeShape
from tests.helpers.real_fleet import (
    binaries,
    connect_multikueue,
    keep_logs,
    manifest,
    not_active_message,
    real_fetch,
    start_dispatcher,
)

ROOT = Path(__file__).resolve().parents[2]
RUN_SECONDS = 6
NAMESPACE = "team-a"


def _one_worker_stack(folder: Path) -> Path:
    document = yaml.safe_load((ROOT / "stacks" / "Pulumi.loopback.yaml").read_text())
    document.pop("encryptionsalt", None)
    config = document["config"]
    del config["multikueue-fleet:workers"][1:]
    stack = folder / "Pulumi.kwok-real.yaml"
    stack.write_text(yaml.safe_dump(document, sort_keys=False))
    return stack


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
    stack = _one_worker_stack(tmp_path)
    spec, _ = load_stack(str(stack))
    state = tmp_path / "fleet"
    fleet = loopback_fleet.up(
        str(stack),
        state,
        spec=spec,
        kwok=NodeShape(cpu="2", memory="4Gi", pods="10"),
        log=lambda _line: None,
        fetch=real_fetch,
    )
    try:
        connected = connect_multikueue(fleet, spec)
        assert connected.all_active(), not_active_message(connected)
        dispatcher = start_dispatcher(connected)
        dispatcher.wait_ready(120)
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
            keep_logs(state, tmp_path / "logs")
        finally:
            loopback_fleet.down(state, log=lambda _line: None)
