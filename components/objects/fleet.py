"""Every object each cluster of a fleet gets, in apply order, plus the upstream installs
it needs. This is the single source of truth for `render`, the tests and `pulumi up`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from components.model.frameworks import FRAMEWORKS
from components.model.spec import ClusterSpec, FleetSpec
from components.model.versions import Bundle, clusterprofile_crd_bundle, kueue_bundle
from components.objects.dispatcher import BUILT_IMAGE, dispatcher_objects
from components.objects.kueue_config import config_map, fleet_configuration, kueue_pod_annotations
from components.objects.labels import with_fleet_labels
from components.objects.monitoring import monitoring_objects
from components.objects.multikueue import manager_multikueue_objects
from components.objects.queues import queue_objects
from components.objects.worker_access import external_framework_rbac, worker_access_objects

# Namespaces, CRDs and identities first, then credentials, then what refers to them;
# queues after the flavors they use, LocalQueues after their ClusterQueues; workloads
# (the dispatcher) last, and its policy after the CRD that defines it.
APPLY_ORDER = (
    "Namespace", "CustomResourceDefinition", "ConfigMap", "ServiceAccount", "ClusterRole",
    "ClusterRoleBinding", "Role", "RoleBinding", "Secret", "ClusterProfile",
    "MultiKueueCluster", "MultiKueueConfig", "AdmissionCheck", "Topology", "ResourceFlavor",
    "ClusterQueue", "LocalQueue", "Service", "Deployment", "PodDisruptionBudget",
    "DispatchPolicy",
)  # fmt: skip


@dataclass(frozen=True)
class ClusterObjects:
    cluster: ClusterSpec
    bundles: tuple[Bundle, ...]
    objects: tuple[dict[str, Any], ...]
    # With `kueue.install: existing`: the Configuration (the keys the fleet depends on)
    # this stack expects the cluster's Kueue to run with. Nothing applies it (the fleet
    # does not own Kueue there); render shows it so an operator can compare.
    expected_kueue_configuration: dict[str, Any] | None = None

    @property
    def directory(self) -> str:
        return "manager" if self.cluster.role == "manager" else f"worker-{self.cluster.name}"


def object_key(obj: Mapping[str, Any]) -> str:
    meta = obj["metadata"]
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj['kind']} {where}{meta['name']}"


def _ordered(objects: list[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    rank = {kind: i for i, kind in enumerate(APPLY_ORDER)}
    unique: dict[str, dict[str, Any]] = {}
    for obj in objects:
        unique.setdefault(object_key(obj), obj)  # a namespace both sides need, once
    return tuple(sorted(unique.values(), key=lambda o: rank.get(o["kind"], len(rank))))


def bundles(spec: FleetSpec, cluster: ClusterSpec) -> tuple[Bundle, ...]:
    found: list[Bundle] = []
    # An existing Kueue comes with what it needs at start, the ClusterProfile CRD included:
    # Kueue looks for that CRD only once, when it starts.
    if spec.kueue.install == "managed":
        found.append(kueue_bundle(spec.kueue.version, kueue_pod_annotations(spec, cluster)))
        if cluster.role == "manager" and spec.credentials.mode == "clusterProfile":
            found.append(clusterprofile_crd_bundle())
    found += [b for key in frameworks_in_install_order(cluster) for b in FRAMEWORKS[key].bundles]
    return tuple(found)


def frameworks_in_install_order(cluster: ClusterSpec) -> list[str]:
    """The cluster's frameworks, each after those it requires (Trainer after JobSet: its
    controller runs every TrainJob as a JobSet and must find JobSet's CRD and webhook;
    Kueue v0.19.2 hack/testing/e2e-common.sh installs JobSet before Kubeflow Trainer),
    otherwise in the order written."""
    keys = [key for key in cluster.frameworks if key in FRAMEWORKS]
    ordered: list[str] = []

    def place(key: str) -> None:
        if key in ordered:
            return
        for needed in FRAMEWORKS[key].requires:
            if needed in keys:
                place(needed)
        ordered.append(key)

    for key in keys:
        place(key)
    return ordered


def cluster_objects(
    spec: FleetSpec,
    cluster: ClusterSpec,
    credentials: Mapping[str, str] | None = None,
    readers: Mapping[str, str] | None = None,
) -> ClusterObjects:
    """`credentials`: see multikueue.manager_multikueue_objects; `readers`: worker -> the
    dispatcher's read-only kubeconfig there (placeholders where absent, as in `render`)."""
    managed = spec.kueue.install == "managed"
    objects = [config_map(spec, cluster)] if managed else []
    if cluster.role == "manager":
        given = {n: s.value for n, s in spec.worker_kubeconfigs.items() if s.value is not None}
        objects += external_framework_rbac(spec)
        objects += manager_multikueue_objects(spec, {**given, **(credentials or {})})
        objects += dispatcher_objects(
            spec, spec.dispatcher.image or BUILT_IMAGE, reader_kubeconfigs=readers
        )
    else:
        objects += worker_access_objects(spec)
    objects += queue_objects(spec, cluster)
    objects += monitoring_objects(spec, cluster)
    # The fleet's labels, on every object the cluster gets: here, not in each builder.
    return ClusterObjects(
        cluster,
        bundles(spec, cluster),
        _ordered(with_fleet_labels(spec, objects)),
        None if managed else fleet_configuration(spec, cluster),
    )


def build_fleet(
    spec: FleetSpec, credentials: Mapping[str, str] | None = None
) -> list[ClusterObjects]:
    """Manager first, then workers in stack order. `credentials`: see
    multikueue.manager_multikueue_objects."""
    return [cluster_objects(spec, c, credentials) for c in spec.clusters]
