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

from components.checks.monitoring import unserved_monitoring
from components.objects.monitoring import MONITORING_API
from components.resources.api_check import (
    CHECK_TIMEOUT,
    ApiCheckProvider,
    ClusterApi,
    KubernetesApi,
    wait_until_served,
    with_secret_kubeconfig,
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


class MonitoringApiCheckProvider(ApiCheckProvider):
    recheck_on = ("kinds", "namespace")

    def verify(self, props: dict[str, Any], api: KubernetesApi) -> None:
        check_monitoring(
            props["cluster_name"],
            props["kinds"],
            props.get("namespace") or None,
            api,
            float(props.get("timeout") or CHECK_TIMEOUT),
            server=api.server,
        )


class MonitoringApiCheck(pulumi.dynamic.Resource, module="multikueue-fleet", name="MonitoringApi"):
    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions) -> None:
        super().__init__(MonitoringApiCheckProvider(), name, props, with_secret_kubeconfig(opts))
