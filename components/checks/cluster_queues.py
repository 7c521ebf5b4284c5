"""ClusterQueue rules, as Kueue v0.19.2 refuses them in the CRD
(apis/kueue/v1beta2/clusterqueue_types.go) and its webhook
(pkg/webhooks/clusterqueue_webhook.go): resource groups (each resource covered once, each
flavor defined and used once with exactly the covered resources, how many of each),
borrowing and lending limits (only in a cohort, lendingLimit within nominalQuota),
preemption, flavor fungibility, and a name Kueue can put on pods.

The quota rules are checked on what each cluster gets, after a worker's quota overrides
and the manager's sum (or managerQuota): an override can break a rule the stack-level
queue meets. Each rule's upstream reference is in kueue_rules.RULE_INVENTORY."""

from __future__ import annotations

import difflib
from collections.abc import Iterator

from components.checks.rule import error
from components.model import quantity
from components.model.fieldtypes import is_dns_label
from components.model.problems import Problem, did_you_mean, key_path
from components.model.spec import ClusterQueueSpec, ClusterSpec, FleetSpec, ResourceQuota
from components.objects.queues import manager_quotas, worker_quotas


def resource_groups(spec: FleetSpec) -> Iterator[Problem]:
    """Each resource covered once, each flavor defined and used once, with exactly the
    covered resources (clusterqueue_webhook.go v0.19.2:313, :322; clusterqueue_types.go
    :254). How many of each there may be: resource_group_count and the rules after it."""
    flavors = {f.name for f in spec.queues.flavors}
    used = {
        fq.flavor
        for cq in spec.queues.cluster_queues
        for g in cq.resource_groups
        for fq in g.flavors
    }
    # A definition nothing refers to, close to a name that is referred to but not defined:
    # the misspelling is more likely in the definition, so the hint names it there rather
    # than suggesting the misspelt name to every reference.
    unused = {f.name: f.path for f in spec.queues.flavors if f.name not in used}
    for cq in spec.queues.cluster_queues:
        covered_by: dict[str, str] = {}
        flavor_seen: dict[str, str] = {}
        for g in cq.resource_groups:
            for res in g.covered:
                if res in covered_by:
                    yield error(
                        key_path(g.path, "coveredResources"),
                        f"'{res}' is covered by two resource groups",
                        "cover each resource in one group only",
                    )
                covered_by[res] = g.path
            for fq in g.flavors:
                if fq.flavor not in flavors:
                    close = difflib.get_close_matches(fq.flavor, sorted(unused), n=1)
                    hint = (
                        f"{unused[close[0]]} defines '{close[0]}', which no ClusterQueue "
                        f"uses: if that is a misspelling, rename it to '{fq.flavor}'; "
                        "otherwise define this flavor under queues.flavors"
                        if close
                        else f"{did_you_mean(fq.flavor, flavors)}define it under queues.flavors"
                    )
                    yield error(
                        key_path(fq.path, "name"), f"no ResourceFlavor named '{fq.flavor}'", hint
                    )
                if fq.flavor in flavor_seen:
                    yield error(
                        key_path(fq.path, "name"),
                        f"flavor '{fq.flavor}' is used twice in this ClusterQueue",
                        "use a flavor in one resource group only",
                    )
                flavor_seen[fq.flavor] = fq.path
                if set(fq.resources) != set(g.covered):
                    yield error(
                        key_path(fq.path, "resources"),
                        f"flavor '{fq.flavor}' must give a quota for exactly the covered "
                        f"resources ({', '.join(g.covered)})",
                        "add the missing resources or remove the extra ones",
                    )


def limits_need_a_cohort(spec: FleetSpec) -> Iterator[Problem]:
    for cq in spec.queues.cluster_queues:
        if cq.cohort:
            continue
        for g in cq.resource_groups:
            for fq in g.flavors:
                for res, quota in fq.resources.items():
                    if quota.borrowing_limit or quota.lending_limit:
                        yield error(
                            key_path(key_path(fq.path, "resources"), res),
                            "borrowingLimit and lendingLimit need a cohort",
                            f"set {key_path(cq.path, 'cohort')} or remove the limits",
                        )


def borrowing_needs_reclaim(spec: FleetSpec) -> Iterator[Problem]:
    for cq in spec.queues.cluster_queues:
        pre = cq.preemption
        if (
            pre is not None
            and (pre.reclaim_within_cohort or "Never") == "Never"
            and pre.borrow_within_cohort is not None
            and pre.borrow_within_cohort.policy != "Never"
        ):
            yield error(
                key_path(cq.path, "preemption.borrowWithinCohort"),
                "borrowWithinCohort needs reclaimWithinCohort other than Never",
                "set preemption.reclaimWithinCohort to LowerPriority or Any",
            )


# clusterqueue_types.go:74 (resourceGroups), :261-262 (coveredResources), :278-279 (flavors).
MAX_RESOURCE_GROUPS = 16
MAX_PER_GROUP = 64
# clusterqueue_webhook.go:193, :206, :220.
MAX_TOTAL_FLAVORS = 256
MAX_TOTAL_COVERED = 256
MAX_FLAVOR_RESOURCE_PAIRS = 512


def resource_group_count(spec: FleetSpec) -> Iterator[Problem]:
    """clusterqueue_types.go:74: resourceGroups has at most 16 items."""
    for cq in spec.queues.cluster_queues:
        if len(cq.resource_groups) > MAX_RESOURCE_GROUPS:
            yield error(
                key_path(cq.path, "resourceGroups"),
                f"ClusterQueue '{cq.name}' has {len(cq.resource_groups)} resource groups; "
                f"Kueue allows at most {MAX_RESOURCE_GROUPS}",
                f"merge resource groups (one group covers up to {MAX_PER_GROUP} resources)",
            )


def covered_resources_per_group(spec: FleetSpec) -> Iterator[Problem]:
    """clusterqueue_types.go:261-262: coveredResources has 1 to 64 items (and so has each
    flavor's resources, which must be exactly the covered ones: :294-295, :254)."""
    for cq in spec.queues.cluster_queues:
        for g in cq.resource_groups:
            count = len(g.covered)
            if 1 <= count <= MAX_PER_GROUP:
                continue
            what = "covers no resource" if not count else f"covers {count} resources"
            yield error(
                key_path(g.path, "coveredResources"),
                f"a resource group of ClusterQueue '{cq.name}' {what}; Kueue allows 1 to "
                f"{MAX_PER_GROUP}",
                "list the resources this group's flavors give quota for"
                if not count
                else "split them into several resource groups",
            )


def flavors_per_group(spec: FleetSpec) -> Iterator[Problem]:
    """clusterqueue_types.go:278-279: a resource group has 1 to 64 flavors."""
    for cq in spec.queues.cluster_queues:
        for g in cq.resource_groups:
            if not g.flavors:
                yield error(
                    key_path(g.path, "flavors"),
                    "a resource group needs a flavor",
                    "add a flavor with quotas for the covered resources",
                )
            elif len(g.flavors) > MAX_PER_GROUP:
                yield error(
                    key_path(g.path, "flavors"),
                    f"a resource group of ClusterQueue '{cq.name}' has {len(g.flavors)} "
                    f"flavors; Kueue allows at most {MAX_PER_GROUP}",
                    "move some flavors to another resource group (with other resources)",
                )


def total_flavors(spec: FleetSpec) -> Iterator[Problem]:
    """clusterqueue_webhook.go:193: at most 256 flavors across all resource groups."""
    for cq in spec.queues.cluster_queues:
        total = sum(len(g.flavors) for g in cq.resource_groups)
        if total > MAX_TOTAL_FLAVORS:
            yield error(
                key_path(cq.path, "resourceGroups"),
                f"ClusterQueue '{cq.name}' has {total} flavors in all its resource groups; "
                f"Kueue's webhook allows at most {MAX_TOTAL_FLAVORS}",
                "use fewer flavors, or split the queue into several ClusterQueues",
            )


def total_covered_resources(spec: FleetSpec) -> Iterator[Problem]:
    """clusterqueue_webhook.go:206: at most 256 covered resources across all groups."""
    for cq in spec.queues.cluster_queues:
        total = sum(len(g.covered) for g in cq.resource_groups)
        if total > MAX_TOTAL_COVERED:
            yield error(
                key_path(cq.path, "resourceGroups"),
                f"ClusterQueue '{cq.name}' covers {total} resources in all its resource "
                f"groups; Kueue's webhook allows at most {MAX_TOTAL_COVERED}",
                "cover fewer resources, or split the queue into several ClusterQueues",
            )


def flavor_resource_pairs(spec: FleetSpec) -> Iterator[Problem]:
    """clusterqueue_webhook.go:220: at most 512 flavor x resource quotas in one group."""
    for cq in spec.queues.cluster_queues:
        for g in cq.resource_groups:
            pairs = sum(len(fq.resources) for fq in g.flavors)
            if pairs > MAX_FLAVOR_RESOURCE_PAIRS:
                yield error(
                    key_path(g.path, "flavors"),
                    f"a resource group of ClusterQueue '{cq.name}' has {pairs} flavor x "
                    f"resource quotas; Kueue's webhook allows at most "
                    f"{MAX_FLAVOR_RESOURCE_PAIRS} per group",
                    "use fewer flavors or resources in this group, or split it in two",
                )


def _cluster_quotas(
    spec: FleetSpec, cq: ClusterQueueSpec
) -> Iterator[tuple[ClusterSpec, dict[str, dict[str, ResourceQuota]]]]:
    """Each cluster with the quotas its copy of `cq` gets (overrides applied)."""
    try:
        manager = manager_quotas(spec, cq)
    except (KeyError, ValueError):
        manager = {}  # a reference problem, reported by queues.py's own rules
    yield spec.manager, manager
    for w in spec.workers:
        yield w, worker_quotas(cq, w)


def _nominal_source(
    cq: ClusterQueueSpec, c: ClusterSpec, flavor: str, res: str, nominal: str
) -> tuple[str, str]:
    """Where the nominal quota `c` gets for (flavor, res) is written ("" when it is the
    ClusterQueue's own), and how a message names it."""
    if c.role == "manager":
        if (cq.manager_quota or {}).get(flavor, {}).get(res) is not None:
            path = key_path(key_path(key_path(cq.path, "managerQuota"), flavor), res)
            return path, f"the manager's nominalQuota {nominal} ({path})"
        return "", f"the manager's nominalQuota {nominal} (the sum of the workers' quotas)"
    if c.quotas.get(cq.name, {}).get(flavor, {}).get(res) is not None:
        path = key_path(key_path(key_path(key_path(c.path, "quotas"), cq.name), flavor), res)
        return path, f"the nominalQuota {nominal} worker '{c.name}' gets ({path})"
    return "", f"its nominalQuota {nominal}"


def lending_limit_within_nominal(spec: FleetSpec) -> Iterator[Problem]:
    """clusterqueue_webhook.go:385: lendingLimit <= nominalQuota, on every cluster's copy
    (a worker's override or the manager's total can fall below the stack's lendingLimit)."""
    for cq in spec.queues.cluster_queues:
        limit_paths = {
            (fq.flavor, res): key_path(key_path(fq.path, "resources"), f"{res}.lendingLimit")
            for g in cq.resource_groups
            for fq in g.flavors
            for res in fq.resources
        }
        reported: set[str] = set()
        for cluster, quotas in _cluster_quotas(spec, cq):
            for flavor, resources in quotas.items():
                for res, q in resources.items():
                    if q.lending_limit is None or quantity.parse(q.lending_limit) <= quantity.parse(
                        q.nominal
                    ):
                        continue
                    source, named = _nominal_source(cq, cluster, flavor, res, q.nominal)
                    limit_path = limit_paths[(flavor, res)]
                    path = source or limit_path
                    if path in reported:
                        continue
                    reported.add(path)
                    yield error(
                        path,
                        f"lendingLimit {q.lending_limit} of '{res}' in flavor '{flavor}' of "
                        f"ClusterQueue '{cq.name}' is above {named}: Kueue's "
                        "webhook refuses a lendingLimit above nominalQuota",
                        f"lower {limit_path} to at most {q.nominal}"
                        + (f", or raise {source}" if source else ""),
                    )


def flavor_fungibility_preference(spec: FleetSpec) -> Iterator[Problem]:
    """clusterqueue_types.go:455 (and clusterqueue_webhook.go:290): `preference` only with
    whenCanBorrow and whenCanPreempt both TryNextFlavor; unset, they default to
    MayStopSearch (:465) and TryNextFlavor (:477)."""
    for cq in spec.queues.cluster_queues:
        ff = cq.flavor_fungibility
        if ff is None or ff.preference is None:
            continue
        borrow = ff.when_can_borrow or "MayStopSearch"
        preempt = ff.when_can_preempt or "TryNextFlavor"
        if borrow == preempt == "TryNextFlavor":
            continue
        wrong = [
            f"{key}: {value}{' (its default)' if unset else ''}"
            for key, value, unset in (
                ("whenCanBorrow", borrow, ff.when_can_borrow is None),
                ("whenCanPreempt", preempt, ff.when_can_preempt is None),
            )
            if value != "TryNextFlavor"
        ]
        yield error(
            key_path(key_path(cq.path, "flavorFungibility"), "preference"),
            f"preference is set while {', '.join(wrong)}; Kueue takes a preference only "
            "when both whenCanBorrow and whenCanPreempt are TryNextFlavor",
            "set whenCanBorrow and whenCanPreempt to TryNextFlavor, or remove preference",
        )


def cluster_queue_name_as_pod_label(spec: FleetSpec) -> Iterator[Problem]:
    """jobframework/reconciler.go:1785: Kueue labels a job's pods with the admitting
    ClusterQueue's name only when the name is a DNS label; a longer or dotted name is
    accepted, and the label silently left out."""
    for cq in spec.queues.cluster_queues:
        if not is_dns_label(cq.name):
            yield Problem(
                key_path(cq.path, "name"),
                f"ClusterQueue name '{cq.name}' is not a DNS label (at most 63 characters, "
                "no dots), so Kueue will not put the kueue.x-k8s.io/cluster-queue-name label "
                "on its pods",
                "fine if nothing selects pods by that label; otherwise use a shorter name "
                "without dots",
                "warning",
            )
