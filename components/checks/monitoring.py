"""`monitoring.prometheusOperator`: at deploy time, whether a cluster serves the Prometheus
Operator's API the monitoring objects need, and has the namespace the dashboard goes to."""

from __future__ import annotations

from collections.abc import Sequence

from components.objects.monitoring import MONITORING_API

FIX = (
    "install the Prometheus Operator's CRDs there (kube-prometheus-stack brings them), "
    "or set monitoring.prometheusOperator: false"
)


def unserved_monitoring(
    cluster: str,
    kinds: Sequence[str],
    served: set[str] | None,
    namespace: str | None = None,
    namespace_found: bool = True,
) -> list[str]:
    """One line per thing the cluster lacks, saying what to do; [] when it has it all.
    `served`: the kinds discovery lists for monitoring.coreos.com/v1, None when it serves no
    such API; `namespace`: the dashboard's, on the manager."""
    problems: list[str] = []
    if served is None:
        problems.append(
            f"cluster '{cluster}' serves no {MONITORING_API} API, which "
            f"monitoring.prometheusOperator needs for its {', '.join(kinds)}: {FIX}"
        )
    elif missing := [k for k in kinds if k not in served]:
        problems.append(
            f"cluster '{cluster}' serves {MONITORING_API} without {', '.join(missing)}, which "
            f"monitoring.prometheusOperator needs: {FIX}"
        )
    if namespace and not namespace_found:
        problems.append(
            f"cluster '{cluster}' has no namespace {namespace} for the dashboard's ConfigMap "
            "(monitoring.dashboardNamespace): set it to the namespace Grafana's dashboard "
            "sidecar searches"
        )
    return problems
