"""monitoring/'s dashboard and alerts, and the scrape targets they read, as Prometheus
Operator objects (`monitoring.prometheusOperator`): on every cluster a ServiceMonitor for
Kueue's metrics, on the manager one for the dispatcher's, the alerts as a PrometheusRule and
the dashboard as a ConfigMap Grafana's dashboard sidecar loads.

Every series gets the label `fleet_cluster`, the cluster's name in the stack file, which
the dashboard's cluster selector and per-cluster panels group by (a target label, so it
holds wherever the series are sent or federated to)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from components.model.spec import ClusterSpec, FleetSpec
from components.objects.dispatcher import APP_LABELS
from components.objects.dispatcher import NAME as DISPATCHER
from components.objects.labels import FLEET_NAMESPACE, KUEUE_NAMESPACE, metadata

MONITORING_API = "monitoring.coreos.com/v1"
# The kinds these objects need each cluster to serve (the manager's PrometheusRule too).
WORKER_KINDS = ("ServiceMonitor",)
MANAGER_KINDS = ("PrometheusRule", "ServiceMonitor")
FOLDER = Path(__file__).resolve().parents[2] / "monitoring"
ALERTS = FOLDER / "alerts.yaml"
DASHBOARD = FOLDER / "fleet-dashboard.json"
CLUSTER_LABEL = "fleet_cluster"
# kube-prometheus-stack's Grafana sidecar loads ConfigMaps with this label (its values.yaml,
# grafana.sidecar.dashboards.label and labelValue).
DASHBOARD_LABEL = {"grafana_dashboard": "1"}
DASHBOARD_KEY = "multikueue-fleet.json"
NAME = "multikueue-fleet"


def _cluster_label(cluster: ClusterSpec) -> list[dict[str, str]]:
    return [{"action": "replace", "targetLabel": CLUSTER_LABEL, "replacement": cluster.name}]


def kueue_service_monitor(spec: FleetSpec, cluster: ClusterSpec) -> dict[str, Any]:
    """Kueue's metrics as Kueue's own ServiceMonitor reads them (kueue v0.19.2
    config/components/prometheus/monitor.yaml): HTTPS on the Service's `https` port, with the
    scraping Prometheus's ServiceAccount token, which Kueue's metrics server checks (a
    SubjectAccessReview for GET /metrics: the Prometheus's ClusterRole, or Kueue's
    `kueue-metrics-reader`, must grant it). Kueue's metrics certificate is self-signed in
    the process unless cert-manager issues one (internalCertManagement), so there is no CA
    to check it against: Kueue's monitor skips verification, and so does this one."""
    return {
        "apiVersion": MONITORING_API,
        "kind": "ServiceMonitor",
        "metadata": metadata("kueue-metrics", KUEUE_NAMESPACE, dict(spec.monitoring.labels)),
        "spec": {
            "endpoints": [
                {
                    "path": "/metrics",
                    "port": "https",
                    "scheme": "https",
                    "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
                    "tlsConfig": {"insecureSkipVerify": True},
                    "relabelings": _cluster_label(cluster),
                }
            ],
            # The labels of kueue-controller-manager-metrics-service in v0.19.2's manifest.
            "selector": {
                "matchLabels": {
                    "app.kubernetes.io/component": "metrics-service",
                    "app.kubernetes.io/name": "kueue",
                }
            },
        },
    }


def dispatcher_service_monitor(spec: FleetSpec, cluster: ClusterSpec) -> dict[str, Any]:
    """The dispatcher's metrics Service (components/objects/dispatcher.py): plain HTTP on its
    `metrics` port, every replica (the leader and the standbys say which they are)."""
    return {
        "apiVersion": MONITORING_API,
        "kind": "ServiceMonitor",
        "metadata": metadata(DISPATCHER, FLEET_NAMESPACE, dict(spec.monitoring.labels)),
        "spec": {
            "endpoints": [
                {"path": "/metrics", "port": "metrics", "relabelings": _cluster_label(cluster)}
            ],
            "selector": {"matchLabels": dict(APP_LABELS)},
        },
    }


def alert_rules(spec: FleetSpec) -> dict[str, Any]:
    """monitoring/alerts.yaml as it is: a rule file's `groups` are a PrometheusRule's spec."""
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return {
        "apiVersion": MONITORING_API,
        "kind": "PrometheusRule",
        "metadata": metadata(NAME, FLEET_NAMESPACE, dict(spec.monitoring.labels)),
        "spec": {"groups": groups},
    }


def dashboard(spec: FleetSpec) -> dict[str, Any]:
    """monitoring/fleet-dashboard.json, compacted: a ConfigMap holds at most 1 MiB."""
    text = json.dumps(json.loads(DASHBOARD.read_text()), separators=(",", ":"))
    namespace = spec.monitoring.dashboard_namespace or FLEET_NAMESPACE
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(
            f"{NAME}-dashboard", namespace, {**spec.monitoring.labels, **DASHBOARD_LABEL}
        ),
        "data": {DASHBOARD_KEY: text},
    }


def monitoring_objects(spec: FleetSpec, cluster: ClusterSpec) -> list[dict[str, Any]]:
    """What `monitoring.prometheusOperator` puts on `cluster`; [] when it is off."""
    if not spec.monitoring.prometheus_operator:
        return []
    objects = [kueue_service_monitor(spec, cluster)]
    if cluster.role == "manager":
        if spec.dispatcher.enabled and spec.dispatcher.run == "cluster":
            objects.append(dispatcher_service_monitor(spec, cluster))
        objects += [alert_rules(spec), dashboard(spec)]
    return objects


def monitoring_kinds(cluster: ClusterSpec) -> tuple[str, ...]:
    return MANAGER_KINDS if cluster.role == "manager" else WORKER_KINDS
