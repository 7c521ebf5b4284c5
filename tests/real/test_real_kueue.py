"""The real tier: Kueue v0.19.2 and a kube-apiserver v1.36, built from tools/go.mod and run
on loopback (python -m loopback), judge what the project renders.

- Kueue starts and stays ready with the Configuration and gate flags of every cluster of
  every shipped stack (its strict decoder and gate checks are the judges), and refuses a gate
  that `validate` refuses;
- every object the project renders for a cluster is accepted by the real API server with
  Kueue's webhooks live (server-side apply), and rules that `validate` enforces are refused
  by the server too;
- MultiKueue on the manager reaches Active for every worker with exactly the credentials and
  worker RBAC the project generates, and no Kueue logs `forbidden`.
"""

from __future__ import annotations

import copy
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from components.checks.load import load_checked
from components.model.problems import FleetConfigError
from components.objects.fleet import cluster_objects
from components.objects.kueue_install import kueue_objects
from loopback.client import Client
from tests.helpers.dispatch_steps import condition_true
from tests.helpers.fleet_config import base
from tests.helpers.real_fleet import (
    STACKS,
    KueuePlane,
    MultiKueueFleet,
    apply_all,
    kueue_key,
    manifest,
    not_active_message,
    spec_of,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from fleet_metrics import ORIGIN_LABEL, measure


def _distinct_clusters(stack: str) -> list[Any]:
    """The stack's clusters whose Kueue runs with a configuration of its own."""
    spec = spec_of(stack)
    seen: set[str] = set()
    found = []
    for cluster in spec.clusters:
        key = kueue_key(kueue_objects(manifest(), spec, cluster))
        if key not in seen:
            seen.add(key)
            found.append(cluster)
    return found


def _delete_all(client: Client, objects: tuple[dict[str, Any], ...]) -> None:
    """What the next stack could collide with (immutable fields), namespaces aside."""
    ours = [o for o in objects if o["kind"] not in ("Namespace", "CustomResourceDefinition")]
    for obj in reversed(ours):
        client.delete(obj)
    deadline = time.monotonic() + 60
    for obj in ours:
        while client.get(obj["apiVersion"], obj["kind"], obj["metadata"]["name"],
                         obj["metadata"].get("namespace")) is not None:  # fmt: skip
            assert time.monotonic() < deadline, f"{obj['kind']} {obj['metadata']['name']} stays"
            time.sleep(0.3)


@pytest.mark.parametrize("stack", STACKS)
def test_kueue_runs_every_rendered_configuration_and_accepts_every_object(
    stack: str, kueue_plane: KueuePlane
) -> None:
    spec = spec_of(stack)
    checked = 0
    for cluster in _distinct_clusters(stack):
        kueue = kueue_plane.start_kueue_for(spec, cluster)
        objects = cluster_objects(spec, cluster).objects
        refused = apply_all(kueue_plane.client, objects)
        assert not refused, f"{stack}/{cluster.name}: the API server refused\n" + "\n".join(refused)
        # Still up after it has seen the objects: the configuration is not only decoded
        # but lived with (a bad one makes the manager exit once its controllers start).
        time.sleep(2)
        kueue.wait_ready(kueue_plane.client, 30)
        _delete_all(kueue_plane.client, objects)
        checked += 1
    assert checked >= 1


def _kueue_exits_with(plane: KueuePlane, gates: dict[str, bool]) -> str:
    """Starts Kueue with `gates` added to the dev manager's Configuration; its log once it
    exited (the test fails if it stays up)."""
    spec = spec_of("dev")
    objects = kueue_objects(manifest(), spec, spec.manager)
    for obj in objects:
        if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == "kueue-manager-config":
            key = next(iter(obj["data"]))
            config = yaml.safe_load(obj["data"][key])
            config["featureGates"] = {**config.get("featureGates", {}), **gates}
            obj["data"][key] = yaml.safe_dump(config)
    log = plane.plane.folder / "kueue.log"
    before = log.stat().st_size if log.exists() else 0
    with pytest.raises(Exception, match="exited"):
        plane.start_kueue(objects, timeout=60)
    record = next(p for p in plane.plane.started if p.name.endswith("/kueue"))
    assert record.exited()
    text = log.read_bytes()[before:].decode(errors="replace")
    plane.stop_kueue()
    return text


@pytest.mark.parametrize(
    ("gate", "value", "kueue_says"),
    [
        ("HierarchicalCohorts", False, "locked"),
        ("NoSuchGate", True, "unrecognized feature gate"),
    ],
)
def test_a_gate_validate_refuses_is_refused_by_kueue(
    gate: str, value: bool, kueue_says: str, kueue_plane: KueuePlane
) -> None:
    config = base()
    config["kueue"] = {"featureGates": {gate: value}}
    with pytest.raises(FleetConfigError) as refused:
        load_checked(config, "dev", "test")
    assert gate in str(refused.value)
    log = _kueue_exits_with(kueue_plane, {gate: value})
    assert kueue_says in log and gate in log, log[-2000:]


def test_a_cluster_queue_validate_refuses_is_refused_by_the_server(
    kueue_plane: KueuePlane,
) -> None:
    """A borrowingLimit on a ClusterQueue in no cohort: `validate` says so at the config path,
    and the API server refuses it by the CRD's CEL rule (apis/kueue/v1beta2/
    clusterqueue_types.go at v0.19.2, "borrowingLimit must be nil when cohort is empty")."""
    config = base()
    flavor = config["queues"]["clusterQueues"][0]["resourceGroups"][0]["flavors"][0]
    flavor["resources"]["cpu"] = {"nominalQuota": 4, "borrowingLimit": 2}
    with pytest.raises(FleetConfigError) as refused:
        load_checked(config, "dev", "test")
    assert "need a cohort" in str(refused.value)
    if kueue_plane.kueue is None:
        spec = spec_of("dev")
        kueue_plane.start_kueue_for(spec, spec.manager)
    spec, _ = load_checked(base(), "dev", "test")
    queue = next(
        copy.deepcopy(o)
        for o in cluster_objects(spec, spec.manager).objects
        if o["kind"] == "ClusterQueue"
    )
    resource = queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    resource["borrowingLimit"] = "2"
    with pytest.raises(ApiException) as server:
        kueue_plane.client.apply(queue)
    assert server.value.status == 422
    assert "borrowingLimit must be nil when cohort is empty" in str(server.value.body)


# --- MultiKueue across a whole loopback fleet -------------------------------------------


def test_multikueue_reaches_every_worker_with_the_generated_credentials(
    dev_multikueue: MultiKueueFleet,
) -> None:
    """connect_multikueue (tests/helpers/real_fleet.py) applies what the project renders for each
    worker, builds the MultiKueue and reader kubeconfigs from the tokens the token
    controller fills, and applies the manager's objects with them."""
    assert dev_multikueue.all_active(), not_active_message(dev_multikueue)
    # Kueue connected with the project's RBAC: no request of its was forbidden anywhere, from
    # its start until every worker was connected.
    for name in dev_multikueue.fleet.clusters:
        text = dev_multikueue.connection_log(name)
        forbidden = [line for line in text.splitlines() if "forbidden" in line.lower()]
        assert not forbidden, f"{name}: {forbidden[:3]}"


def test_every_rule_kueue_enforces_is_refused_by_the_real_server_with_kueue_running(
    kueue_plane: KueuePlane,
) -> None:
    """Each case of tests/unit/test_kueue_rules.py that Kueue's CRDs or webhooks refuse, as the
    object the project would write were `validate` not to stop it, dry-run created with Kueue
    v0.19.2 running: refused, saying what the table says it says."""
    from tests.helpers.kueue_rule_cases import CASES, RULE_KIND, written_object

    if kueue_plane.kueue is None:
        spec = spec_of("dev")
        kueue_plane.start_kueue_for(spec, spec.manager)
    wrong = []
    checked = 0
    for case in CASES:
        if RULE_KIND[case.rule] not in ("schema", "webhook"):
            continue  # a job's label, or Kueue's behaviour: no object of ours is refused
        obj = copy.deepcopy(written_object(case))
        namespace = obj["metadata"].get("namespace")
        if namespace:
            kueue_plane.client.apply(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            )
        try:
            kueue_plane.client.dry_run_create(obj)
            said = "accepted"
        except ApiException as exc:
            said = f"{exc.status} {json.loads(exc.body).get('message', exc.body)}"
        checked += 1
        if case.server_says not in said:
            wrong.append(f"{case.id} ({RULE_KIND[case.rule]}): expected {case.server_says!r}, "
                         f"got {said[:300]}")  # fmt: skip
    assert checked >= 20
    assert wrong == [], "\n".join(wrong)


def _bench_workload(name: str, priority: int, copy: bool) -> dict[str, Any]:
    labels = {ORIGIN_LABEL: "bench-manager"} if copy else {}
    container = {"name": "c", "image": "busybox:1.36", "resources": {"requests": {"cpu": "1"}}}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "bench-preempt", "labels": labels},
        "spec": {
            "queueName": "bench-lq",
            "priority": priority,
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "containers": [container], "restartPolicy": "Never"}}}],
        },
    }  # fmt: skip


def _true(obj: dict[str, Any] | None, kind: str, reason: str = "") -> bool:
    return condition_true((obj or {}).get("status") or {}, kind, reason)


def test_preemptions_for_a_copy_are_told_from_local_ones_as_kueue_words_them(
    kueue_plane: KueuePlane,
) -> None:
    """bench/fleet_metrics.py reads who preempted whom from the Evicted message a real
    Kueue v0.19.2 writes: a local workload preempted by a MultiKueue copy counts as a
    preemption (as the simulation counts them), the copy preempted in turn by local work of
    a higher priority counts apart."""
    spec = spec_of("dev")
    kueue_plane.start_kueue_for(spec, spec.manager)
    client = kueue_plane.client
    setup = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench-preempt"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
         "metadata": {"name": "bench-flavor"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
         "metadata": {"name": "bench-cq"},
         "spec": {"namespaceSelector": {}, "preemption": {"withinClusterQueue": "LowerPriority"},
                  "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                      {"name": "bench-flavor",
                       "resources": [{"name": "cpu", "nominalQuota": "1"}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
         "metadata": {"name": "bench-lq", "namespace": "bench-preempt"},
         "spec": {"clusterQueue": "bench-cq"}},
    ]  # fmt: skip
    assert not apply_all(client, tuple(setup))
    steps = [("local-low", 0, False), ("copy", 100, True), ("local-high", 200, False)]
    try:
        for at, (name, priority, is_copy) in enumerate(steps):
            client.create(_bench_workload(name, priority, is_copy))
            if at:  # it preempts the one before, whose quota comes back as a job's would
                victim = steps[at - 1][0]
                _wait(client, victim, "Evicted", "Preempted")
                _release_as_its_job_would(client, victim)
            _wait(client, name, "QuotaReserved")
        seen = {name: _get_workload(client, name) for name, _, _ in steps}
        found = measure([seen["copy"]], {"worker": list(seen.values())})
        assert (found["preemptions"], found["local_preemptions"]) == (1, 1)
    finally:
        for name, _, _ in steps:
            client.delete(_bench_workload(name, 0, False))
        for obj in reversed(setup):
            client.delete(obj)


def _get_workload(client: Client, name: str) -> dict[str, Any] | None:
    return client.get("kueue.x-k8s.io/v1beta2", "Workload", name, "bench-preempt")


def _wait(client: Client, name: str, kind: str, reason: str = "") -> None:
    deadline = time.monotonic() + 90
    while not _true(_get_workload(client, name), kind, reason):
        assert time.monotonic() < deadline, f"Workload {name}: never {kind} {reason}"
        time.sleep(0.5)


def _release_as_its_job_would(client: Client, name: str) -> None:
    """What Kueue's job reconciler does for an evicted workload once its job stopped
    (pkg/controller/jobframework/reconciler.go at v0.19.2, UnsetQuotaReservationWithCondition
    in pkg/workload/workload.go): admission gone, QuotaReserved and Admitted False. These
    Workloads have no job to do it."""
    found = _get_workload(client, name)
    assert found is not None
    conditions = []
    for cond in found["status"]["conditions"]:
        if cond["type"] in ("QuotaReserved", "Admitted"):
            cond = {**cond, "status": "False", "reason": "Pending", "message": "evicted"}
        conditions.append(cond)
    client.patch_status(
        "kueue.x-k8s.io/v1beta2", "Workload", name, "bench-preempt",
        {"admission": None, "conditions": conditions},
    )  # fmt: skip
