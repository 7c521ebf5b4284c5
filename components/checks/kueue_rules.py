"""Kueue v0.19.2's own rules for the objects this project writes, known without any download.

Kueue refuses a ClusterQueue, ResourceFlavor, Topology or LocalQueue in two places: the
CRD's OpenAPI markers and CEL rules (apis/kueue/v1beta2/*_types.go, enforced by the API
server) and its validating webhooks (pkg/webhooks/*.go). The offline CRD check
(crd_schema.py) knows the first only once a deploy has cached the release, and nothing
offline knows the second. So every such rule a stack file can break is a named rule here,
or a typed field in components/model, each citing where upstream says it.

The quota rules are checked on what each cluster gets, after a worker's quota overrides
and the manager's sum (or managerQuota): an override can break a rule the stack-level
queue meets.

RULE_INVENTORY lists every rule (new ones here, older ones in validate.py and the model)
with its upstream reference and where the project checks it; docs/kueue-rules.md is that
inventory as a table, and tests/unit/test_kueue_rules.py shows each refusal beside the real
schema's and checks each upstream reference against Kueue's Go module of the same tag.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from components.model import quantity
from components.model.fieldtypes import is_dns_label, is_label_value
from components.model.problems import Problem, key_path
from components.model.spec import ClusterQueueSpec, ClusterSpec, FleetSpec, ResourceQuota
from components.objects.queues import manager_quotas, worker_quotas

KUEUE_TAG = "v0.19.2"

# clusterqueue_types.go:74 (resourceGroups), :261-262 (coveredResources), :278-279 (flavors).
MAX_RESOURCE_GROUPS = 16
MAX_PER_GROUP = 64
# clusterqueue_webhook.go:193, :206, :220.
MAX_TOTAL_FLAVORS = 256
MAX_TOTAL_COVERED = 256
MAX_FLAVOR_RESOURCE_PAIRS = 512
# resourceflavor_types.go:65, :84, :98.
MAX_FLAVOR_ITEMS = 8
# topology_types.go:132: one less than a label key's 253 + "/" + 63.
MAX_TOPOLOGY_LEVEL_LENGTH = 316
# A LocalQueue's name is a label value on every job that uses it.
MAX_LABEL_VALUE = 63


def _error(path: str, message: str, fix: str) -> Problem:
    return Problem(path, message, fix)


# --- ClusterQueue: how many of each --------------------------------------------------------


def resource_group_count(spec: FleetSpec) -> Iterator[Problem]:
    """clusterqueue_types.go:74: resourceGroups has at most 16 items."""
    for cq in spec.queues.cluster_queues:
        if len(cq.resource_groups) > MAX_RESOURCE_GROUPS:
            yield _error(
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
            yield _error(
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
                yield _error(
                    key_path(g.path, "flavors"),
                    "a resource group needs a flavor",
                    "add a flavor with quotas for the covered resources",
                )
            elif len(g.flavors) > MAX_PER_GROUP:
                yield _error(
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
            yield _error(
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
            yield _error(
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
                yield _error(
                    key_path(g.path, "flavors"),
                    f"a resource group of ClusterQueue '{cq.name}' has {pairs} flavor x "
                    f"resource quotas; Kueue's webhook allows at most "
                    f"{MAX_FLAVOR_RESOURCE_PAIRS} per group",
                    "use fewer flavors or resources in this group, or split it in two",
                )


# --- ClusterQueue: values ------------------------------------------------------------------


def _cluster_quotas(
    spec: FleetSpec, cq: ClusterQueueSpec
) -> Iterator[tuple[ClusterSpec, dict[str, dict[str, ResourceQuota]]]]:
    """Each cluster with the quotas its copy of `cq` gets (overrides applied)."""
    try:
        manager = manager_quotas(spec, cq)
    except (KeyError, ValueError):
        manager = {}  # a reference problem, reported by validate.py's own rules
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
                    yield _error(
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
        yield _error(
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


# --- ResourceFlavor ------------------------------------------------------------------------


def flavor_item_counts(spec: FleetSpec) -> Iterator[Problem]:
    """resourceflavor_types.go:65, :84, :98: at most 8 nodeLabels, 8 nodeTaints and 8
    tolerations per ResourceFlavor."""
    for f in spec.queues.flavors:
        for key, items in (
            ("nodeLabels", f.node_labels),
            ("nodeTaints", f.node_taints),
            ("tolerations", f.tolerations),
        ):
            if len(items) > MAX_FLAVOR_ITEMS:
                yield _error(
                    key_path(f.path, key),
                    f"ResourceFlavor '{f.name}' has {len(items)} {key}; Kueue allows at most "
                    f"{MAX_FLAVOR_ITEMS}",
                    f"keep at most {MAX_FLAVOR_ITEMS}: select nodes by fewer, broader labels",
                )


def unique_taints(spec: FleetSpec) -> Iterator[Problem]:
    """resourceflavor_webhook.go:111: nodeTaints unique by (key, effect)."""
    for f in spec.queues.flavors:
        seen: dict[tuple[str, str], int] = {}
        for i, taint in enumerate(f.node_taints):
            pair = (taint.key, taint.effect)
            if pair in seen:
                yield _error(
                    key_path(key_path(f.path, "nodeTaints"), i),
                    f"taint '{taint.key}' with effect {taint.effect} is listed twice (also "
                    f"nodeTaints[{seen[pair]}]); Kueue's webhook refuses taints that share "
                    "key and effect",
                    "keep one taint per key and effect",
                )
            else:
                seen[pair] = i


# --- Topology and LocalQueue ---------------------------------------------------------------


def topology_level_length(spec: FleetSpec) -> Iterator[Problem]:
    """topology_types.go:132: a level's nodeLabel is at most 316 characters, one less than
    the longest label key Kubernetes allows."""
    for t in spec.queues.topologies:
        for i, level in enumerate(t.levels):
            if len(level) > MAX_TOPOLOGY_LEVEL_LENGTH:
                yield _error(
                    key_path(key_path(t.path, "levels"), i),
                    f"level '{level[:40]}...' is {len(level)} characters; a Topology level "
                    f"is at most {MAX_TOPOLOGY_LEVEL_LENGTH}",
                    "use a shorter node label key (its prefix or its name)",
                )


def local_queue_name_as_label(spec: FleetSpec) -> Iterator[Problem]:
    """jobframework/validation.go:149 and reconciler.go:1782: a job names its LocalQueue in
    the label kueue.x-k8s.io/queue-name, and Kueue copies it to each pod's
    kueue.x-k8s.io/local-queue-name label; a label value is at most 63 characters, so a
    longer LocalQueue name (valid for the LocalQueue itself) can never be used."""
    for lq in spec.queues.local_queues:
        if not is_label_value(lq.name):
            yield _error(
                key_path(lq.path, "name"),
                f"LocalQueue name '{lq.name[:40]}...' is {len(lq.name)} characters; jobs "
                "name their queue in the label kueue.x-k8s.io/queue-name, whose value is at "
                f"most {MAX_LABEL_VALUE}, so no job could use it",
                f"use a name of at most {MAX_LABEL_VALUE} characters",
            )


RULES = [
    resource_group_count,
    covered_resources_per_group,
    flavors_per_group,
    total_flavors,
    total_covered_resources,
    flavor_resource_pairs,
    lending_limit_within_nominal,
    flavor_fungibility_preference,
    cluster_queue_name_as_pod_label,
    flavor_item_counts,
    unique_taints,
    topology_level_length,
    local_queue_name_as_label,
]


# --- the inventory ----------------------------------------------------------------------------

RefusedBy = Literal["schema", "webhook", "apiserver", "kueue"]


@dataclass(frozen=True)
class Upstream:
    """A line of Kueue's source at KUEUE_TAG, and text that line holds (so a test can tell
    the reference still points at the rule)."""

    file: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class KueueRule:
    id: str
    rule: str
    upstream: tuple[Upstream, ...]
    # schema: the CRD (OpenAPI or CEL) at the API server; webhook: Kueue's validating
    # webhook; apiserver: the API server on a job's labels; kueue: accepted, then ignored.
    refused_by: RefusedBy
    # "module:function" (or "module:Model") that refuses it here.
    checked_in: tuple[str, ...]


_T = "apis/kueue/v1beta2/"
_W = "pkg/webhooks/"
_HERE = "components.checks.kueue_rules:"
_VALIDATE = "components.checks.validate:"
_SPEC = "components.model.spec:"


def _u(file: str, line: int, text: str) -> Upstream:
    return Upstream(file, line, text)


RULE_INVENTORY: tuple[KueueRule, ...] = (
    # ClusterQueue
    KueueRule(
        "cq-resource-groups",
        "a ClusterQueue has at most 16 resource groups",
        (_u(f"{_T}clusterqueue_types.go", 74, "MaxItems=16"),),
        "schema",
        (f"{_HERE}resource_group_count",),
    ),
    KueueRule(
        "cq-covered-resources",
        "a resource group covers 1 to 64 resources, and each flavor gives exactly those",
        (
            _u(f"{_T}clusterqueue_types.go", 261, "MinItems=1"),
            _u(f"{_T}clusterqueue_types.go", 262, "MaxItems=64"),
            _u(f"{_T}clusterqueue_types.go", 294, "MinItems=1"),
            _u(f"{_T}clusterqueue_types.go", 295, "MaxItems=64"),
            _u(
                f"{_T}clusterqueue_types.go",
                254,
                "size(x.resources) == size(self.coveredResources)",
            ),
        ),
        "schema",
        (f"{_HERE}covered_resources_per_group", f"{_VALIDATE}resource_groups"),
    ),
    KueueRule(
        "cq-flavors",
        "a resource group has 1 to 64 flavors",
        (
            _u(f"{_T}clusterqueue_types.go", 278, "MinItems=1"),
            _u(f"{_T}clusterqueue_types.go", 279, "MaxItems=64"),
        ),
        "schema",
        (f"{_HERE}flavors_per_group",),
    ),
    KueueRule(
        "cq-total-flavors",
        "at most 256 flavors across a ClusterQueue's resource groups",
        (_u(f"{_W}clusterqueue_webhook.go", 193, "total > 256"),),
        "webhook",
        (f"{_HERE}total_flavors",),
    ),
    KueueRule(
        "cq-total-covered",
        "at most 256 covered resources across a ClusterQueue's resource groups",
        (_u(f"{_W}clusterqueue_webhook.go", 206, "total > 256"),),
        "webhook",
        (f"{_HERE}total_covered_resources",),
    ),
    KueueRule(
        "cq-flavor-resource-pairs",
        "at most 512 flavor x resource quotas in one resource group",
        (_u(f"{_W}clusterqueue_webhook.go", 220, "total > 512"),),
        "webhook",
        (f"{_HERE}flavor_resource_pairs",),
    ),
    KueueRule(
        "cq-unique-resources-and-flavors",
        "a resource is covered by one group only; a flavor appears in one group only",
        (
            _u(f"{_W}clusterqueue_webhook.go", 313, "field.Duplicate(path, name)"),
            _u(f"{_W}clusterqueue_webhook.go", 322, "fqs.Name"),
        ),
        "webhook",
        (f"{_VALIDATE}resource_groups",),
    ),
    KueueRule(
        "cq-resource-name",
        "a covered resource name is a label key",
        (_u(f"{_W}common.go", 31, "content.IsLabelKey(string(name))"),),
        "webhook",
        ("components.model.fieldtypes:ResourceName",),
    ),
    KueueRule(
        "cq-quota-not-negative",
        "nominalQuota, borrowingLimit and lendingLimit are not negative",
        (_u(f"{_W}clusterqueue_webhook.go", 361, "value.Cmp(resource.Quantity{}) < 0"),),
        "webhook",
        ("components.model.fieldtypes:Quantity",),
    ),
    KueueRule(
        "cq-limits-need-cohort",
        "borrowingLimit and lendingLimit only in a ClusterQueue with a cohort",
        (
            _u(f"{_T}clusterqueue_types.go", 66, "borrowingLimit must be nil when cohort is empty"),
            _u(f"{_W}clusterqueue_webhook.go", 370, "if !config.hasParent"),
        ),
        "schema",
        (f"{_VALIDATE}limits_need_a_cohort",),
    ),
    KueueRule(
        "cq-lending-limit",
        "lendingLimit is at most nominalQuota, on the manager's and every worker's copy",
        (_u(f"{_W}clusterqueue_webhook.go", 385, "lend.Cmp(nominal) > 0"),),
        "webhook",
        (f"{_HERE}lending_limit_within_nominal",),
    ),
    KueueRule(
        "cq-fungibility-preference",
        "flavorFungibility.preference only when whenCanBorrow and whenCanPreempt are both "
        "TryNextFlavor (defaults: MayStopSearch, TryNextFlavor)",
        (
            _u(f"{_T}clusterqueue_types.go", 455, "preference can only be set when both"),
            _u(f"{_T}clusterqueue_types.go", 465, 'default="MayStopSearch"'),
            _u(f"{_W}clusterqueue_webhook.go", 290, "fungibility.Preference != nil"),
        ),
        "schema",
        (f"{_HERE}flavor_fungibility_preference",),
    ),
    KueueRule(
        "cq-borrow-needs-reclaim",
        "borrowWithinCohort other than Never needs reclaimWithinCohort other than Never "
        "(its default)",
        (
            _u(f"{_T}clusterqueue_types.go", 516, "reclaimWithinCohort=Never"),
            _u(f"{_W}clusterqueue_webhook.go", 280, "PreemptionPolicyNever"),
        ),
        "schema",
        (f"{_VALIDATE}borrowing_needs_reclaim",),
    ),
    KueueRule(
        "cq-namespace-selector",
        "namespaceSelector is a valid label selector",
        (_u(f"{_W}clusterqueue_webhook.go", 123, "ValidateLabelSelector"),),
        "webhook",
        (f"{_SPEC}LabelSelectorRequirement",),
    ),
    KueueRule(
        "cq-name-pod-label",
        "a ClusterQueue name that is not a DNS label is not put on pods (warning)",
        (
            _u(
                "pkg/controller/jobframework/reconciler.go",
                1785,
                "IsDNS1123Label(clusterQueueName)",
            ),
        ),
        "kueue",
        (f"{_HERE}cluster_queue_name_as_pod_label",),
    ),
    # ResourceFlavor
    KueueRule(
        "rf-item-counts",
        "a ResourceFlavor has at most 8 nodeLabels, 8 nodeTaints and 8 tolerations",
        (
            _u(f"{_T}resourceflavor_types.go", 65, "MaxProperties=8"),
            _u(f"{_T}resourceflavor_types.go", 84, "MaxItems=8"),
            _u(f"{_T}resourceflavor_types.go", 98, "MaxItems=8"),
        ),
        "schema",
        (f"{_HERE}flavor_item_counts",),
    ),
    KueueRule(
        "rf-node-labels",
        "nodeLabels are valid label keys and values",
        (_u(f"{_W}resourceflavor_webhook.go", 88, "ValidateLabels(rf.Spec.NodeLabels"),),
        "webhook",
        (f"{_SPEC}FlavorSpec",),
    ),
    KueueRule(
        "rf-taint-syntax",
        "a taint's key is a label key, its value a label value",
        (
            _u(f"{_W}resourceflavor_webhook.go", 104, "ValidateLabelName(currTaint.Key"),
            _u(f"{_W}resourceflavor_webhook.go", 106, "IsLabelValue(currTaint.Value)"),
        ),
        "webhook",
        (f"{_SPEC}Taint",),
    ),
    KueueRule(
        "rf-taint-effect",
        "a taint's effect is NoSchedule, PreferNoSchedule or NoExecute",
        (_u(f"{_T}resourceflavor_types.go", 85, "x.effect in ['NoSchedule'"),),
        "schema",
        (f"{_SPEC}Taint",),
    ),
    KueueRule(
        "rf-unique-taints",
        "nodeTaints are unique by key and effect",
        (_u(f"{_W}resourceflavor_webhook.go", 111, "Has(currTaint.Key)"),),
        "webhook",
        (f"{_HERE}unique_taints",),
    ),
    KueueRule(
        "rf-toleration-without-key",
        "a toleration without a key has operator Exists",
        (_u(f"{_T}resourceflavor_types.go", 99, "!has(x.key) ? x.operator == 'Exists'"),),
        "schema",
        (f"{_SPEC}Toleration",),
    ),
    KueueRule(
        "rf-toleration-exists-no-value",
        "a toleration with operator Exists has no value, not even an empty one",
        (_u(f"{_T}resourceflavor_types.go", 102, "x.operator == 'Exists' ? !has(x.value)"),),
        "schema",
        (f"{_SPEC}Toleration",),
    ),
    KueueRule(
        "rf-toleration-seconds",
        "tolerationSeconds only with effect NoExecute",
        (_u(f"{_T}resourceflavor_types.go", 100, "x.effect == 'NoExecute'"),),
        "schema",
        (f"{_SPEC}Toleration",),
    ),
    KueueRule(
        "rf-topology-node-label",
        "a flavor with a topology has at least one node label",
        (_u(f"{_T}resourceflavor_types.go", 48, "self.nodeLabels.size() >= 1"),),
        "schema",
        (f"{_VALIDATE}flavor_topologies",),
    ),
    # Topology
    KueueRule(
        "topo-levels",
        "a Topology has 1 to 16 levels, each once, kubernetes.io/hostname only last",
        (
            _u(f"{_T}topology_types.go", 113, "MinItems=1"),
            _u(f"{_T}topology_types.go", 114, "MaxItems=16"),
            _u(f"{_T}topology_types.go", 116, "must be unique"),
            _u(f"{_T}topology_types.go", 117, "lowest level of topology"),
        ),
        "schema",
        (f"{_VALIDATE}topologies",),
    ),
    KueueRule(
        "topo-level-length",
        "a Topology level (a node label key) is at most 316 characters",
        (_u(f"{_T}topology_types.go", 132, "MaxLength=316"),),
        "schema",
        (f"{_HERE}topology_level_length",),
    ),
    # LocalQueue
    KueueRule(
        "lq-name-label-value",
        "a LocalQueue name is usable as a label value (at most 63 characters)",
        (
            _u("pkg/controller/jobframework/validation.go", 149, "IsDNS1123Subdomain(value)"),
            _u(
                "pkg/controller/jobframework/reconciler.go",
                1782,
                "labels[constants.LocalQueueLabel]",
            ),
        ),
        "apiserver",
        (f"{_HERE}local_queue_name_as_label",),
    ),
    # MultiKueue
    KueueRule(
        "mk-config-clusters",
        "a MultiKueueConfig lists 1 to 20 clusters, each once",
        (
            _u(f"{_T}multikueue_types.go", 155, "MinItems=1"),
            _u(f"{_T}multikueue_types.go", 156, "MaxItems=20"),
            _u(f"{_T}multikueue_types.go", 158, "must be unique"),
        ),
        "schema",
        (f"{_VALIDATE}worker_count", f"{_VALIDATE}cluster_names_unique"),
    ),
)


def inventory_table() -> str:
    """RULE_INVENTORY as the Markdown table of docs/kueue-rules.md."""
    link = f"https://github.com/kubernetes-sigs/kueue/blob/{KUEUE_TAG}/"
    rows = [
        "| id | rule | upstream (Kueue " + KUEUE_TAG + ") | refused by | checked in |",
        "|---|---|---|---|---|",
    ]
    for r in RULE_INVENTORY:
        refs = "<br>".join(f"[`{u}`]({link}{u.file}#L{u.line})" for u in r.upstream)
        where = "<br>".join(f"`{c}`" for c in r.checked_in)
        rows.append(f"| `{r.id}` | {r.rule} | {refs} | {r.refused_by} | {where} |")
    return "\n".join(rows)
