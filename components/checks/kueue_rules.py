"""Kueue v0.19.2's own rules for the objects this project writes, known without any download:
the inventory of them, each with its upstream reference and where the project checks it.

Kueue refuses a ClusterQueue, ResourceFlavor, Topology or LocalQueue in two places: the
CRD's OpenAPI markers and CEL rules (apis/kueue/v1beta2/*_types.go, enforced by the API
server) and its validating webhooks (pkg/webhooks/*.go). The offline CRD check
(crd_schema.py) knows the first only once a deploy has cached the release, and nothing
offline knows the second. So every such rule a stack file can break is a named rule of
components/checks (cluster_queues.py, flavors.py, local_queues.py, clusters.py), or a
typed field in components/model, each citing where upstream says it.

RULE_INVENTORY lists every rule with its upstream reference and where the project checks
it; docs/kueue-rules.md is that inventory as a table, and tests/unit/test_kueue_rules.py
shows each refusal beside the real schema's and checks each upstream reference against
Kueue's Go module of the same tag.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

KUEUE_TAG = "v0.19.2"

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
_CQ = "components.checks.cluster_queues:"
_RF = "components.checks.flavors:"
_LQ = "components.checks.local_queues:"
_CLUSTERS = "components.checks.clusters:"
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
        (f"{_CQ}resource_group_count",),
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
        (f"{_CQ}covered_resources_per_group", f"{_CQ}resource_groups"),
    ),
    KueueRule(
        "cq-flavors",
        "a resource group has 1 to 64 flavors",
        (
            _u(f"{_T}clusterqueue_types.go", 278, "MinItems=1"),
            _u(f"{_T}clusterqueue_types.go", 279, "MaxItems=64"),
        ),
        "schema",
        (f"{_CQ}flavors_per_group",),
    ),
    KueueRule(
        "cq-total-flavors",
        "at most 256 flavors across a ClusterQueue's resource groups",
        (_u(f"{_W}clusterqueue_webhook.go", 193, "total > 256"),),
        "webhook",
        (f"{_CQ}total_flavors",),
    ),
    KueueRule(
        "cq-total-covered",
        "at most 256 covered resources across a ClusterQueue's resource groups",
        (_u(f"{_W}clusterqueue_webhook.go", 206, "total > 256"),),
        "webhook",
        (f"{_CQ}total_covered_resources",),
    ),
    KueueRule(
        "cq-flavor-resource-pairs",
        "at most 512 flavor x resource quotas in one resource group",
        (_u(f"{_W}clusterqueue_webhook.go", 220, "total > 512"),),
        "webhook",
        (f"{_CQ}flavor_resource_pairs",),
    ),
    KueueRule(
        "cq-unique-resources-and-flavors",
        "a resource is covered by one group only; a flavor appears in one group only",
        (
            _u(f"{_W}clusterqueue_webhook.go", 313, "field.Duplicate(path, name)"),
            _u(f"{_W}clusterqueue_webhook.go", 322, "fqs.Name"),
        ),
        "webhook",
        (f"{_CQ}resource_groups",),
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
        (f"{_CQ}limits_need_a_cohort",),
    ),
    KueueRule(
        "cq-lending-limit",
        "lendingLimit is at most nominalQuota, on the manager's and every worker's copy",
        (_u(f"{_W}clusterqueue_webhook.go", 385, "lend.Cmp(nominal) > 0"),),
        "webhook",
        (f"{_CQ}lending_limit_within_nominal",),
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
        (f"{_CQ}flavor_fungibility_preference",),
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
        (f"{_CQ}borrowing_needs_reclaim",),
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
        (f"{_CQ}cluster_queue_name_as_pod_label",),
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
        (f"{_RF}flavor_item_counts",),
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
        (f"{_RF}unique_taints",),
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
        (f"{_RF}flavor_topologies",),
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
        (f"{_RF}topologies",),
    ),
    KueueRule(
        "topo-level-length",
        "a Topology level (a node label key) is at most 316 characters",
        (_u(f"{_T}topology_types.go", 132, "MaxLength=316"),),
        "schema",
        (f"{_RF}topology_level_length",),
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
        (f"{_LQ}local_queue_name_as_label",),
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
        (f"{_CLUSTERS}worker_count", f"{_CLUSTERS}cluster_names_unique"),
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
