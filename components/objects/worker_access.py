"""Identities on each worker: the one MultiKueue on the manager uses, with rights derived
from the integrations the manager enables, and a read-only one for the dispatcher.

MultiKueue opens a watch on every enabled kind on every worker; when one watch fails (a
missing right or CRD) the whole worker goes inactive, so the rights follow the manager's
integration list exactly, and nothing beyond it.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from components.model import kueue_gates
from components.model.frameworks import (
    MULTIKUEUE_ADAPTERS,
    PATCHING_ADAPTERS,
    ApiResource,
    resource_of_integration,
)
from components.model.spec import FleetSpec
from components.objects.kueue_config import integrations
from components.objects.labels import (
    FLEET_NAMESPACE,
    KUEUE_NAMESPACE,
    KUEUE_SERVICE_ACCOUNT,
    metadata,
)

MULTIKUEUE_SA = "multikueue"
MULTIKUEUE_TOKEN = "multikueue-token"
MULTIKUEUE_ROLE = "multikueue-fleet:multikueue"
READER_SA = "dispatcher-reader"
READER_TOKEN = "dispatcher-reader-token"
READER_ROLE = "multikueue-fleet:dispatcher-reader"
EXTERNAL_ROLE = "multikueue-fleet:kueue-external-frameworks"

# On Workloads, MultiKueue uses every verb but patch (status patches go to workloads/status).
ALL_VERBS = ["create", "delete", "get", "list", "update", "watch"]
ADAPTER_VERBS = ["create", "delete", "get", "watch"]
READ_VERBS = ["get", "list", "watch"]


def _rules(resources: list[ApiResource], verbs: list[str]) -> list[dict[str, Any]]:
    """One rule per API group, resources sorted, so diffs stay small and readable."""
    by_group: dict[str, list[str]] = defaultdict(list)
    for r in resources:
        if r.plural not in by_group[r.group]:
            by_group[r.group].append(r.plural)
    return [
        {"apiGroups": [g], "resources": sorted(p), "verbs": list(verbs)}
        for g, p in sorted(by_group.items())
    ]


def external_resources(spec: FleetSpec) -> list[ApiResource]:
    """Kinds reaching MultiKueue as external frameworks."""
    found = [ApiResource(e.parts[2], e.resource) for e in spec.kueue.external_frameworks]
    return list(dict.fromkeys(found))


def multikueue_rules(spec: FleetSpec) -> list[dict[str, Any]]:
    """What Kueue v0.19.2's MultiKueue calls on a worker, and nothing more
    (pkg/controller/admissionchecks/multikueue and the job adapters at that tag):
    - Workloads: created, read, updated (spec sync), deleted, watched, and listed by origin
      for garbage collection (workload.go, multikueuecluster.go); their status patched on
      admission (pkg/workload/patching, PatchAdmissionStatus), and updated only to open
      preemption gates under MultiKueueOrchestratedPreemption.
    - each kind with an adapter: get, create, delete, and a watch (establishWatch issues a
      watch, not a list); patch only for the adapters that patch (PATCHING_ADAPTERS). No
      status of theirs is read or written on the worker.
    - ClusterQueues and LocalQueues: read through an informer only under
      MultiKueueManagerQuotaAutomation (multikueuecluster.go, cachedKinds).
    """
    gates = {**spec.kueue.feature_gates, **spec.kueue.feature_gate_flags}
    names = [i for i in integrations(spec, spec.manager) if i in MULTIKUEUE_ADAPTERS]
    kinds = [r for n in names if n not in PATCHING_ADAPTERS and (r := resource_of_integration(n))]
    patched = [r for n in names if n in PATCHING_ADAPTERS and (r := resource_of_integration(n))]
    status_verbs = ["patch"]
    if kueue_gates.effective(gates, "MultiKueueOrchestratedPreemption"):
        status_verbs.append("update")
    rules = [
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": list(ALL_VERBS)},
        {
            "apiGroups": ["kueue.x-k8s.io"],
            "resources": ["workloads/status"],
            "verbs": status_verbs,
        },
    ]
    if kueue_gates.effective(gates, "MultiKueueManagerQuotaAutomation"):
        rules.append(
            {
                "apiGroups": ["kueue.x-k8s.io"],
                "resources": ["clusterqueues", "localqueues"],
                "verbs": ["list", "watch"],
            }
        )
    rules += _rules(patched, sorted([*ADAPTER_VERBS, "patch"]))
    rules += _rules(kinds, ADAPTER_VERBS)
    # The external-framework adapter gets, creates, deletes and watches
    # (externalframeworks/adapter.go).
    rules += _rules(external_resources(spec), ADAPTER_VERBS)
    return rules


def _service_account_with_token(
    name: str, token: str, namespace: str, role: str, rules: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata(name, namespace)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": metadata(role),
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": metadata(role),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
        # The token controller fills this Secret asynchronously; the components wait for
        # its `token` key rather than racing it.
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/service-account-token",
            "metadata": metadata(
                token, namespace, annotations={"kubernetes.io/service-account.name": name}
            ),
        },
    ]


def reader_access_objects() -> list[dict[str, Any]]:
    """The dispatcher's read-only identity on a worker: it reads queues, and Workloads for
    the priorities that hold quota in each queue (whether a workload can preempt there),
    nothing else."""
    reader_rules = [
        {
            "apiGroups": ["kueue.x-k8s.io"],
            "resources": ["clusterqueues", "localqueues", "workloads"],
            "verbs": list(READ_VERBS),
        }
    ]
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata(FLEET_NAMESPACE)},
        *_service_account_with_token(
            READER_SA, READER_TOKEN, FLEET_NAMESPACE, READER_ROLE, reader_rules
        ),
    ]


def worker_access_objects(spec: FleetSpec) -> list[dict[str, Any]]:
    """The objects every worker gets so the manager and the dispatcher can reach it."""
    objects = _service_account_with_token(
        MULTIKUEUE_SA,
        MULTIKUEUE_TOKEN,
        KUEUE_NAMESPACE,
        MULTIKUEUE_ROLE,
        multikueue_rules(spec),
    )
    if spec.dispatcher.enabled:
        reader = reader_access_objects()
        objects = [reader[0], *objects, *reader[1:]]  # the namespace first
    return objects


def external_framework_rbac(spec: FleetSpec) -> list[dict[str, Any]]:
    """On the manager: lets kueue-controller-manager manage each external kind and its
    status (Kueue's own install grants this only for built-in integrations)."""
    externals = external_resources(spec)
    if not externals:
        return []
    with_status = [*externals, *(ApiResource(r.group, f"{r.plural}/status") for r in externals)]
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": metadata(EXTERNAL_ROLE),
            "rules": _rules(with_status, ["get", "list", "patch", "update", "watch"]),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": metadata(EXTERNAL_ROLE),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": EXTERNAL_ROLE,
            },
            "subjects": [
                {
                    "kind": "ServiceAccount",
                    "name": KUEUE_SERVICE_ACCOUNT,
                    "namespace": KUEUE_NAMESPACE,
                }
            ],
        },
    ]
