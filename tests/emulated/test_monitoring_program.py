"""`monitoring.prometheusOperator` under the mock engine: a check per cluster that the
Prometheus Operator's API is served, every monitoring object after its cluster's check, and a
preview that registers exactly what render writes. Off, the program registers nothing of it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.objects.fleet import build_fleet, object_key
from components.objects.monitoring import MONITORING_API
from tests.helpers.fleet_config import load
from tests.helpers.pulumi_harness import (
    Run,
    before,
    kube_objects,
    run_program,
    synthetic_environment,
)

# Clusters that exist already (the harness kubeconfig's contexts), with the monitoring on.
CONFIG: dict[str, Any] = {
    "fleetName": "watched",
    "manager": {
        "provider": "existing",
        "kubernetesVersion": "1.35",
        "existing": {"context": "lab-manager"},
    },
    "workers": [
        {
            "name": "lab-a",
            "provider": "existing",
            "existing": {"context": "lab-a", "server": "https://lab-a.k8s.internal:6443"},
        },
    ],
    "frameworks": ["batch"],
    "kueue": {"install": "existing"},
    "dispatcher": {"image": "registry.example/mkf/dispatcher@sha256:" + "0" * 64},
    "monitoring": {
        "prometheusOperator": True,
        "labels": {"release": "kps"},
        "dashboardNamespace": "grafana",
    },
}
CHECK = "multikueue-fleet:MonitoringApi"


def program(config: dict[str, Any], preview: bool) -> Run:
    engine = {f"multikueue-fleet:{k}": json.dumps(v) for k, v in config.items()}
    return run_program("watched", engine, [], preview=preview)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    with synthetic_environment(tmp_path_factory.mktemp("watched")):
        off = {k: v for k, v in CONFIG.items() if k != "monitoring"}
        return {
            "up": program(CONFIG, preview=False),
            "preview": program(CONFIG, preview=True),
            "off": program(off, preview=False),
        }


def _key(reg: Any) -> str:
    return object_key(reg.inputs)


def test_a_check_per_cluster_asks_for_what_that_cluster_gets(runs: dict[str, Run]) -> None:
    checks = {c.inputs["cluster_name"]: c.inputs for c in runs["up"].monitor.of_type(CHECK)}
    assert sorted(checks) == ["lab-a", "manager"]
    assert checks["manager"]["kinds"] == ["PrometheusRule", "ServiceMonitor"]
    assert checks["lab-a"]["kinds"] == ["ServiceMonitor"]
    # The dashboard's namespace is the user's own: looked for on the manager only.
    assert (checks["manager"]["namespace"], checks["lab-a"]["namespace"]) == ("grafana", "")
    assert checks["manager"]["cluster"].startswith("existing/")


def test_every_monitoring_object_waits_for_its_clusters_check(runs: dict[str, Run]) -> None:
    monitor = runs["up"].monitor
    check_of = {c.inputs["cluster_name"]: c.urn for c in monitor.of_type(CHECK)}
    watched = [
        r
        for r in kube_objects(monitor)
        if r.inputs["apiVersion"] == MONITORING_API
        or "grafana_dashboard" in r.inputs["metadata"].get("labels", {})
    ]
    assert sorted(r.name for r in watched) == [
        "lab-a:ServiceMonitor:kueue-system/kueue-metrics",
        "manager:ConfigMap:grafana/multikueue-fleet-dashboard",
        "manager:PrometheusRule:multikueue-fleet-system/multikueue-fleet",
        "manager:ServiceMonitor:kueue-system/kueue-metrics",
        "manager:ServiceMonitor:multikueue-fleet-system/multikueue-fleet-dispatcher",
    ]
    for reg in watched:
        assert check_of[reg.name.split(":")[0]] in before(monitor, reg.urn), reg.name
    # The fleet's own namespace is made by the fleet, before what goes in it.
    rule = next(r for r in watched if r.inputs["kind"] == "PrometheusRule")
    namespace = monitor.named("manager:Namespace:multikueue-fleet-system")
    assert namespace.urn in before(monitor, rule.urn)


def test_a_preview_registers_exactly_the_rendered_objects(runs: dict[str, Run]) -> None:
    spec, _ = load(CONFIG, stack="watched")
    registered: dict[str, set[str]] = {}
    for reg in kube_objects(runs["preview"].monitor):
        registered.setdefault(reg.name.split(":")[0], set()).add(_key(reg))
    for cluster in build_fleet(spec):
        rendered = {object_key(o) for o in cluster.objects}
        assert registered[cluster.cluster.name] == rendered, cluster.cluster.name


def test_off_nothing_of_it_is_registered(runs: dict[str, Run]) -> None:
    monitor = runs["off"].monitor
    assert monitor.of_type(CHECK) == []
    assert not [r for r in kube_objects(monitor) if r.inputs["apiVersion"] == MONITORING_API]
