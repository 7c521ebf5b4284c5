"""`monitoring.prometheusOperator`: the objects it puts on each cluster (monitoring/'s files as
they are, every series labelled with its cluster), the stack key's errors, and the deploy-time
check that the Prometheus Operator's API is served, against fakes. The real API server's
verdict on these objects is tests/real/test_real_pulumi.py's."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from components.checks.monitoring import unserved_monitoring
from components.objects.fleet import cluster_objects
from components.objects.labels import FLEET_NAMESPACE, KUEUE_NAMESPACE
from components.objects.monitoring import (
    ALERTS,
    CLUSTER_LABEL,
    DASHBOARD,
    MONITORING_API,
    monitoring_objects,
)
from components.resources.commands import CommandFailed
from components.resources.monitoring import MonitoringApiCheckProvider, check_monitoring
from tests.helpers.fleet_config import load, problems_of
from tests.helpers.monitoring import operator_howto

ON = {"prometheusOperator": True, "labels": {"release": "kps"}}


def spec_with(monitoring: dict[str, Any], **more: Any) -> Any:
    spec, problems = load({"monitoring": monitoring, **more}, stack="dev")
    assert not [p for p in problems if p.severity == "error"], problems
    return spec


def by_kind(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{o['kind']} {o['metadata']['name']}": o for o in objects}


def test_off_by_default_and_nothing_of_the_operators_api_is_rendered() -> None:
    spec = spec_with({})
    assert spec.monitoring.prometheus_operator is False
    for cluster in spec.clusters:
        objects = cluster_objects(spec, cluster).objects
        assert not [o for o in objects if o["apiVersion"] == MONITORING_API]
        assert not [o for o in objects if "grafana_dashboard" in o["metadata"]["labels"]]


def test_each_cluster_gets_a_kueue_monitor_and_the_manager_the_rest() -> None:
    spec = spec_with(ON)
    manager = by_kind(monitoring_objects(spec, spec.manager))
    assert sorted(manager) == [
        "ConfigMap multikueue-fleet-dashboard",
        "PrometheusRule multikueue-fleet",
        "ServiceMonitor kueue-metrics",
        "ServiceMonitor multikueue-fleet-dispatcher",
    ]
    for worker in spec.workers:
        assert sorted(by_kind(monitoring_objects(spec, worker))) == ["ServiceMonitor kueue-metrics"]
    # render and the program take them from the one list of the cluster's objects.
    rendered = {o["metadata"]["name"] for o in cluster_objects(spec, spec.manager).objects}
    assert {o["metadata"]["name"] for o in manager.values()} <= rendered


def test_every_series_is_labelled_with_the_clusters_name_in_the_stack() -> None:
    spec = spec_with(ON)
    for cluster in spec.clusters:
        for obj in monitoring_objects(spec, cluster):
            if obj["kind"] != "ServiceMonitor":
                continue
            (endpoint,) = obj["spec"]["endpoints"]
            assert endpoint["relabelings"] == [
                {"action": "replace", "targetLabel": CLUSTER_LABEL, "replacement": cluster.name}
            ]


def test_kueue_is_scraped_as_its_own_monitor_does_and_the_dispatcher_on_its_port() -> None:
    spec = spec_with(ON)
    objects = by_kind(monitoring_objects(spec, spec.manager))
    kueue = objects["ServiceMonitor kueue-metrics"]
    assert kueue["metadata"]["namespace"] == KUEUE_NAMESPACE
    (endpoint,) = kueue["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["scheme"]) == ("https", "https")
    assert endpoint["bearerTokenFile"].endswith("/serviceaccount/token")
    assert kueue["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == (
        "metrics-service"
    )
    dispatcher = objects["ServiceMonitor multikueue-fleet-dispatcher"]
    assert dispatcher["metadata"]["namespace"] == FLEET_NAMESPACE
    (endpoint,) = dispatcher["spec"]["endpoints"]
    assert endpoint["port"] == "metrics"
    # The Service it selects is the dispatcher's own.
    service = next(
        o
        for o in cluster_objects(spec, spec.manager).objects
        if o["kind"] == "Service" and o["metadata"]["namespace"] == FLEET_NAMESPACE
    )
    assert dispatcher["spec"]["selector"]["matchLabels"].items() <= (
        service["metadata"]["labels"].items()
    )
    assert "metrics" in [p["name"] for p in service["spec"]["ports"]]


def test_the_rule_and_the_dashboard_are_the_repositorys_files_as_they_are() -> None:
    spec = spec_with(ON)
    objects = by_kind(monitoring_objects(spec, spec.manager))
    rule = objects["PrometheusRule multikueue-fleet"]
    assert rule["spec"] == yaml.safe_load(ALERTS.read_text())
    board = objects["ConfigMap multikueue-fleet-dashboard"]
    (text,) = board["data"].values()
    assert json.loads(text) == json.loads(DASHBOARD.read_text())
    assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert board["metadata"]["namespace"] == FLEET_NAMESPACE


def test_the_stacks_labels_and_dashboard_namespace_are_used() -> None:
    spec = spec_with({**ON, "dashboardNamespace": "grafana"})
    for obj in monitoring_objects(spec, spec.manager):
        assert obj["metadata"]["labels"]["release"] == "kps", obj["kind"]
    board = by_kind(monitoring_objects(spec, spec.manager))["ConfigMap multikueue-fleet-dashboard"]
    assert board["metadata"]["namespace"] == "grafana"


def test_a_dispatcher_run_locally_or_not_at_all_has_no_monitor_in_the_cluster() -> None:
    for dispatcher in ({"run": "local"}, {"enabled": False}):
        spec = spec_with(ON, dispatcher=dispatcher)
        kinds = by_kind(monitoring_objects(spec, spec.manager))
        assert "ServiceMonitor multikueue-fleet-dispatcher" not in kinds, dispatcher
        assert "PrometheusRule multikueue-fleet" in kinds


@pytest.mark.parametrize(
    ("monitoring", "path", "said"),
    [
        ({"prometheusOperator": "yes"}, "monitoring.prometheusOperator", "true or false"),
        ({"dashboardNamespace": "Grafana_NS"}, "monitoring.dashboardNamespace", ""),
        ({"labels": {"bad key!": "x"}}, "monitoring.labels.bad key!", "label key"),
        ({"prometheusOperatr": True}, "monitoring.prometheusOperatr", ""),
    ],
)
def test_a_wrong_setting_is_named_with_its_path(
    monitoring: dict[str, Any], path: str, said: str
) -> None:
    errors = [
        p for p in problems_of({"monitoring": monitoring}, stack="dev") if p.severity == "error"
    ]
    assert [p.path for p in errors] == [path], errors
    assert said in errors[0].message and errors[0].hint, errors[0]


def test_the_setting_the_operations_page_shows_loads_and_its_line_is_the_checks() -> None:
    setting, said = operator_howto()
    spec = spec_with(setting)
    assert spec.monitoring.prometheus_operator and spec.monitoring.labels
    assert [said] == unserved_monitoring("worker1", ["ServiceMonitor"], None)


# --- the deploy-time check ---------------------------------------------------------------


class FakeApi:
    """A cluster whose operator API appears after `calls` look-ups."""

    def __init__(
        self, kinds: set[str] | None, calls: int = 0, namespaces: frozenset[str] = frozenset()
    ) -> None:
        self.served, self.calls, self.namespaces, self.seen = kinds, calls, namespaces, 0

    def kinds(self, api_version: str) -> set[str] | None:
        assert api_version == MONITORING_API
        self.seen += 1
        return None if self.seen <= self.calls else self.served

    def has_namespace(self, name: str) -> bool:
        return name in self.namespaces


def test_unserved_says_what_is_missing_and_how_to_fix_it() -> None:
    (line,) = unserved_monitoring("w1", ["ServiceMonitor"], None)
    assert line.startswith("cluster 'w1' serves no monitoring.coreos.com/v1 API")
    assert "install the Prometheus Operator's CRDs there" in line
    assert "monitoring.prometheusOperator: false" in line
    (line,) = unserved_monitoring("m", ["PrometheusRule", "ServiceMonitor"], {"ServiceMonitor"})
    assert "without PrometheusRule" in line
    (line,) = unserved_monitoring("m", ["ServiceMonitor"], {"ServiceMonitor"}, "grafana", False)
    assert "no namespace grafana" in line and "monitoring.dashboardNamespace" in line
    assert unserved_monitoring("m", ["ServiceMonitor"], {"ServiceMonitor", "PodMonitor"}) == []


def test_the_check_waits_for_the_api_to_appear_then_passes() -> None:
    api = FakeApi({"ServiceMonitor", "PrometheusRule"}, calls=2)
    check_monitoring("m", ["PrometheusRule", "ServiceMonitor"], None, api, 5, 0.01)
    assert api.seen == 3


def test_the_check_fails_with_every_missing_thing_after_its_bound() -> None:
    api = FakeApi({"ServiceMonitor"})
    with pytest.raises(CommandFailed) as failed:
        check_monitoring("m", ["PrometheusRule", "ServiceMonitor"], "grafana", api, 0.05, 0.01)
    lines = str(failed.value).splitlines()
    assert len(lines) == 2
    assert "without PrometheusRule" in lines[0] and "no namespace grafana" in lines[1]


def test_the_check_runs_again_only_for_another_cluster_or_need() -> None:
    provider = MonitoringApiCheckProvider()
    olds = {
        "kubeconfig": "a",
        "cluster": "existing/https://m",
        "cluster_name": "m",
        "kinds": ["ServiceMonitor"],
        "namespace": "",
    }
    assert not provider.diff("m", olds, dict(olds)).changes
    assert not provider.diff("m", olds, {**olds, "kubeconfig": "b"}).changes
    for key, value in [
        ("cluster", "existing/https://n"),
        ("kinds", ["PrometheusRule", "ServiceMonitor"]),
        ("namespace", "grafana"),
    ]:
        assert provider.diff("m", olds, {**olds, key: value}).replaces == [key]


def test_the_operator_crds_the_real_tier_applies_are_the_module_its_go_mod_pins() -> None:
    from tests.helpers.monitoring import OPERATOR_MODULE, OPERATOR_VERSION, ROOT

    module = ROOT / "tools" / "prometheus-operator"
    assert f"require {OPERATOR_MODULE} {OPERATOR_VERSION}\n" in (module / "go.mod").read_text()
    sums = (module / "go.sum").read_text().splitlines()
    assert [line.split()[:2] for line in sums if " h1:" in line] == [
        [OPERATOR_MODULE, OPERATOR_VERSION],
        [OPERATOR_MODULE, f"{OPERATOR_VERSION}/go.mod"],
    ]


def test_the_checks_leave_the_engines_hooks_to_pulumi() -> None:
    """A dynamic provider's `check` is the engine's input validation (found on the real
    engine: a check named so was called with the old and new inputs, and failed)."""
    from pulumi.dynamic import ResourceProvider

    from components.resources.existing_kueue import KueueApiCheckProvider

    for provider in (MonitoringApiCheckProvider, KueueApiCheckProvider):
        for hook in ("check", "read", "update"):
            assert getattr(provider, hook) is getattr(ResourceProvider, hook), (provider, hook)
