"""`monitoring.prometheusOperator`: before a cluster's monitoring objects are applied, a
dynamic resource checks that the cluster serves the Prometheus Operator's API (and, on the
manager, has the dashboard's namespace); where it does not, `up` stops with a line naming
the cluster and what to do (components/checks/monitoring.py), not with the API server's
"no matches for kind ServiceMonitor".

As the existing-Kueue check (components/resources/existing_kueue.py) it runs when created
and again when the cluster or what it must serve changes; it creates nothing, so it deletes
nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider

from components.checks.monitoring import unserved_monitoring
from components.objects.monitoring import MONITORING_API
from components.resources.existing_kueue import (
    CHECK_TIMEOUT,
    ClusterApi,
    KubernetesApi,
    wait_until_served,
)


def check_monitoring(
    cluster: str,
    kinds: Sequence[str],
    namespace: str | None,
    api: ClusterApi,
    timeout: float = CHECK_TIMEOUT,
    interval: float = 2.0,
    server: str = "",
) -> None:
    """Returns once the cluster serves `kinds` of the Prometheus Operator's API (and has
    `namespace`, when one is named); CommandFailed with a line per missing thing once
    `timeout` has passed: an operator a pipeline installed just before has time to start."""

    def problems_now() -> list[str]:
        found = api.has_namespace(namespace) if namespace else True
        return unserved_monitoring(cluster, kinds, api.kinds(MONITORING_API), namespace, found)

    wait_until_served(problems_now, cluster, timeout, interval, server)


class MonitoringApiCheckProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        api = KubernetesApi(props["kubeconfig"], props.get("context"))
        check_monitoring(
            props["cluster_name"],
            props["kinds"],
            props.get("namespace") or None,
            api,
            float(props.get("timeout") or CHECK_TIMEOUT),
            server=api.server,
        )
        return CreateResult(id_=props["cluster_name"], outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        cluster = "cluster" if olds.get("cluster") and news.get("cluster") else "kubeconfig"
        keys = (cluster, "cluster_name", "kinds", "namespace")
        replaces = [k for k in keys if olds.get(k) != news.get(k)]
        return DiffResult(changes=bool(replaces), replaces=replaces)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Nothing was created."""


class MonitoringApiCheck(pulumi.dynamic.Resource, module="multikueue-fleet", name="MonitoringApi"):
    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions) -> None:
        super().__init__(
            MonitoringApiCheckProvider(),
            name,
            props,
            pulumi.ResourceOptions.merge(
                opts, pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"])
            ),
        )
