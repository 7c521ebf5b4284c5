"""The queue objects together: names unique within each kind (ResourceFlavor, Topology,
ClusterQueue, LocalQueue), and the quotas the manager and each worker get: workers' quota
overrides and managerQuota name a ClusterQueue's flavors and resources, a managerQuota
other than the workers' sum is said, and a ClusterQueue admits something somewhere.
The quota values themselves: quantities.py."""

from __future__ import annotations

from collections.abc import Iterator

from components.checks.rule import error, unique, warn
from components.model import quantity
from components.model.problems import Problem, did_you_mean, key_path
from components.model.spec import FleetSpec


def queue_names_unique(spec: FleetSpec) -> Iterator[Problem]:
    q = spec.queues
    yield from unique(((f.name, f.path) for f in q.flavors), "ResourceFlavor")
    yield from unique(((t.name, t.path) for t in q.topologies), "Topology")
    yield from unique(((c.name, c.path) for c in q.cluster_queues), "ClusterQueue")
    yield from unique(
        ((f"{lq.namespace}/{lq.name}", lq.path) for lq in q.local_queues), "LocalQueue"
    )


def _quota_refs(
    spec: FleetSpec, cq_name: str, overrides: dict[str, dict[str, str]], path: str
) -> Iterator[Problem]:
    cq = next((c for c in spec.queues.cluster_queues if c.name == cq_name), None)
    if cq is None:
        names = [c.name for c in spec.queues.cluster_queues]
        yield error(
            path,
            f"no ClusterQueue named '{cq_name}'",
            f"{did_you_mean(cq_name, names)}use a name from queues.clusterQueues",
        )
        return
    covered = {fq.flavor: set(g.covered) for g in cq.resource_groups for fq in g.flavors}
    for flavor, resources in overrides.items():
        fpath = key_path(path, flavor)
        if flavor not in covered:
            yield error(
                fpath,
                f"ClusterQueue '{cq_name}' has no flavor '{flavor}'",
                f"use one of {', '.join(covered) or '(none)'}",
            )
            continue
        for res in resources:
            if res not in covered[flavor]:
                yield error(
                    key_path(fpath, res),
                    f"flavor '{flavor}' of '{cq_name}' does not cover '{res}'",
                    f"use one of {', '.join(sorted(covered[flavor]))}",
                )


def worker_quotas_refer_to_queues(spec: FleetSpec) -> Iterator[Problem]:
    for w in spec.workers:
        for cq_name, overrides in w.quotas.items():
            yield from _quota_refs(
                spec, cq_name, overrides, key_path(key_path(w.path, "quotas"), cq_name)
            )


def manager_quota(spec: FleetSpec) -> Iterator[Problem]:
    """managerQuota names the ClusterQueue's flavors and resources; a total other than the
    workers' sum is a warning (over- or under-subscription)."""
    from components.objects.queues import worker_quota_sum

    for cq in spec.queues.cluster_queues:
        if cq.manager_quota is None:
            continue
        path = key_path(cq.path, "managerQuota")
        refs = list(_quota_refs(spec, cq.name, cq.manager_quota, path))
        if refs:
            yield from refs
            continue
        sums = worker_quota_sum(spec, cq)
        for flavor, resources in cq.manager_quota.items():
            for res, value in resources.items():
                total = sums.get(flavor, {}).get(res, "0")
                if not quantity.equal(value, total):
                    yield warn(
                        key_path(key_path(path, flavor), res),
                        f"the manager admits {value} of {res} in '{flavor}' but the workers "
                        f"together offer {total}",
                        "fine if intended (over- or under-subscription); otherwise remove "
                        "managerQuota and the stack uses the workers' sum",
                    )


def quotas_admit_something(spec: FleetSpec) -> Iterator[Problem]:
    """A ClusterQueue whose every quota is zero fleet-wide can never admit a workload
    (unless it borrows from a cohort)."""
    from components.objects.queues import manager_quotas, worker_quotas

    for cq in spec.queues.cluster_queues:
        if cq.cohort or not any(g.flavors for g in cq.resource_groups):
            continue
        try:
            quotas = manager_quotas(spec, cq)
        except (KeyError, ValueError):
            continue  # a reference problem, reported by its own rule
        if all(quantity.parse(q.nominal) == 0 for r in quotas.values() for q in r.values()):
            yield warn(
                key_path(cq.path, "resourceGroups"),
                f"every quota of ClusterQueue '{cq.name}' is zero, so it can never admit a "
                "workload",
                "give a flavor a quota above zero (on the ClusterQueue or a worker's quotas), "
                "or put the ClusterQueue in a cohort it can borrow from",
            )
            continue
        for w in spec.workers:
            mine = worker_quotas(cq, w)
            if all(quantity.parse(q.nominal) == 0 for r in mine.values() for q in r.values()):
                yield warn(
                    key_path(key_path(w.path, "quotas"), cq.name),
                    f"worker '{w.name}' offers nothing to ClusterQueue '{cq.name}' (every "
                    "quota is zero), so no workload of it is ever sent there",
                    "fine if intended; otherwise give this worker a quota above zero",
                )
