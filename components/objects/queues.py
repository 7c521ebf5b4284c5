"""Builders for queue objects: ResourceFlavors, Topologies, ClusterQueues, LocalQueues and
the namespaces they live in, for the manager and for each worker.

Workers get the same flavors, ClusterQueue names and LocalQueues as the manager
(MultiKueue creates remote copies in the same namespace with the same queue name), each
with its own quotas. The manager's ClusterQueue admits, by default, the sum of what the
workers offer, and carries the MultiKueue admission check.
"""

from __future__ import annotations

from typing import Any

from components.model import quantity
from components.model.spec import (
    ClusterQueueSpec,
    ClusterSpec,
    FlavorSpec,
    FleetSpec,
    ResourceQuota,
    TopologySpec,
)
from components.objects.labels import KUEUE_API, metadata

MULTIKUEUE_CHECK = "multikueue"


def flavor_object(f: FlavorSpec) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if f.node_labels:
        body["nodeLabels"] = dict(f.node_labels)
    if f.node_taints:
        body["nodeTaints"] = [t.as_k8s() for t in f.node_taints]
    if f.tolerations:
        body["tolerations"] = [t.as_k8s() for t in f.tolerations]
    if f.topology:
        body["topologyName"] = f.topology
    return {
        "apiVersion": KUEUE_API,
        "kind": "ResourceFlavor",
        "metadata": metadata(f.name),
        "spec": body,
    }


def topology_object(t: TopologySpec) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_API,
        "kind": "Topology",
        "metadata": metadata(t.name),
        "spec": {"levels": [{"nodeLabel": level} for level in t.levels]},
    }


def worker_quotas(cq: ClusterQueueSpec, worker: ClusterSpec) -> dict[str, dict[str, ResourceQuota]]:
    """flavor -> resource -> quota on this worker: the ClusterQueue's, with the worker's
    overrides of nominalQuota applied."""
    overrides = worker.quotas.get(cq.name, {})
    out: dict[str, dict[str, ResourceQuota]] = {}
    for group in cq.resource_groups:
        for fq in group.flavors:
            out[fq.flavor] = {
                res: ResourceQuota.model_construct(
                    nominal=overrides.get(fq.flavor, {}).get(res, q.nominal),
                    borrowing_limit=q.borrowing_limit,
                    lending_limit=q.lending_limit,
                )
                for res, q in fq.resources.items()
            }
    return out


def worker_quota_sum(spec: FleetSpec, cq: ClusterQueueSpec) -> dict[str, dict[str, str]]:
    """flavor -> resource -> the total nominal quota of all workers."""
    per_worker = [worker_quotas(cq, w) for w in spec.workers]
    return {
        flavor: {
            res: quantity.total(q[flavor][res].nominal for q in per_worker) for res in resources
        }
        for flavor, resources in (per_worker[0].items() if per_worker else [])
    }


def manager_quotas(spec: FleetSpec, cq: ClusterQueueSpec) -> dict[str, dict[str, ResourceQuota]]:
    sums = worker_quota_sum(spec, cq)
    chosen = cq.manager_quota or {}
    out: dict[str, dict[str, ResourceQuota]] = {}
    for group in cq.resource_groups:
        for fq in group.flavors:
            out[fq.flavor] = {
                res: ResourceQuota.model_construct(
                    nominal=chosen.get(fq.flavor, {}).get(res, sums[fq.flavor][res]),
                    borrowing_limit=q.borrowing_limit,
                    lending_limit=q.lending_limit,
                )
                for res, q in fq.resources.items()
            }
    return out


def cluster_queue_object(
    cq: ClusterQueueSpec,
    quotas: dict[str, dict[str, ResourceQuota]],
    admission_check: str | None,
) -> dict[str, Any]:
    groups = []
    for group in cq.resource_groups:
        flavors = []
        for fq in group.flavors:
            resources = []
            for res in group.covered:
                q = quotas[fq.flavor][res]
                entry: dict[str, Any] = {"name": res, "nominalQuota": q.nominal}
                if q.borrowing_limit is not None:
                    entry["borrowingLimit"] = q.borrowing_limit
                if q.lending_limit is not None:
                    entry["lendingLimit"] = q.lending_limit
                resources.append(entry)
            flavors.append({"name": fq.flavor, "resources": resources})
        groups.append({"coveredResources": list(group.covered), "flavors": flavors})
    # An absent namespaceSelector admits nothing; {} admits every namespace.
    body: dict[str, Any] = {
        "namespaceSelector": cq.namespace_selector.as_k8s(),
        "queueingStrategy": cq.queueing_strategy,
        "resourceGroups": groups,
    }
    if cq.cohort:
        body["cohortName"] = cq.cohort
    if cq.preemption:
        body["preemption"] = cq.preemption.as_k8s()
    if cq.flavor_fungibility:
        body["flavorFungibility"] = cq.flavor_fungibility.as_k8s()
    if admission_check:
        # v1beta2 has no spec.admissionChecks; MultiKueue's check must not use onFlavors.
        body["admissionChecksStrategy"] = {"admissionChecks": [{"name": admission_check}]}
    return {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": metadata(cq.name),
        "spec": body,
    }


def namespace_objects(spec: FleetSpec) -> list[dict[str, Any]]:
    names = dict.fromkeys(lq.namespace for lq in spec.queues.local_queues)
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata(ns)}
        for ns in names
        if ns != "default"
    ]


def local_queue_objects(spec: FleetSpec) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": KUEUE_API,
            "kind": "LocalQueue",
            "metadata": metadata(lq.name, lq.namespace),
            "spec": {"clusterQueue": lq.cluster_queue},
        }
        for lq in spec.queues.local_queues
    ]


def queue_objects(spec: FleetSpec, cluster: ClusterSpec) -> list[dict[str, Any]]:
    """Every queue-related object of one cluster, manager or worker."""
    objects = namespace_objects(spec)
    objects += [topology_object(t) for t in spec.queues.topologies]
    objects += [flavor_object(f) for f in spec.queues.flavors]
    for cq in spec.queues.cluster_queues:
        if cluster.role == "manager":
            objects.append(cluster_queue_object(cq, manager_quotas(spec, cq), MULTIKUEUE_CHECK))
        else:
            objects.append(cluster_queue_object(cq, worker_quotas(cq, cluster), None))
    objects += local_queue_objects(spec)
    return objects
