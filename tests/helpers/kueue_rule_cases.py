"""The cases of Kueue v0.19.2's rules for the objects the fleet writes
(components/checks/kueue_rules.py), shared by the tiers that check them.

CASES is one table: a stack mutation, the project's error (config path and text), and the
object the real server would refuse with what it says. Where the CRD refuses
(`schema`), the offline CRD check with Kueue's real CRDs (tests/helpers/upstream_data.py) must say
so; where only Kueue's webhook, the API server on a job's labels, or Kueue's behaviour does,
the CRD must accept the object (the project is then the only offline guard). With
KUBEBUILDER_ASSETS, the same objects go to a real kube-apiserver with Kueue's real CRDs
(dry-run): refused with `server_says` exactly where the CRD refuses. A tier with Kueue's
webhooks running can submit the others and expect `server_says` too. Every rule of
RULE_INVENTORY has a case, every case a rule, the inventory is docs/kueue-rules.md, and
each upstream reference is checked against Kueue's Go module.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.checks.kueue_rules import RULE_INVENTORY
from components.model.spec import load_spec
from components.objects.fleet import build_fleet
from tests.helpers.fleet_config import base

Mutate = Callable[[dict[str, Any]], None]
Patch = Callable[[dict[str, Any]], None]
ROOT = Path(__file__).resolve().parents[2]
CQ = "queues.clusterQueues[0]"
GROUP0 = f"{CQ}.resourceGroups[0]"


@dataclass(frozen=True)
class Case:
    id: str
    rule: str  # a RULE_INVENTORY id
    mutate: Mutate
    path: str  # where the project's problem is
    message: str  # text in it
    # The object the real server refuses: cluster directory, kind, name.
    refused: tuple[str, str, str]
    # What the server says (a CRD problem's text for `schema`; the webhook's or API
    # server's text otherwise, for the real tier).
    server_says: str
    # For a rule of the typed model (the spec cannot be built): how the object the
    # project would otherwise write differs from the unmutated base's.
    patch: Patch | None = None
    severity: str = "error"
    extra: dict[str, Any] = field(default_factory=dict)


def _cq(config: dict[str, Any]) -> dict[str, Any]:
    return config["queues"]["clusterQueues"][0]


def _flavor(config: dict[str, Any]) -> dict[str, Any]:
    return config["queues"]["flavors"][0]


def _groups(groups: int, flavors: int, resources: int) -> Mutate:
    """ClusterQueue cq with `groups` resource groups of `flavors` flavors covering
    `resources` resources each, every flavor and resource distinct."""

    def mutate(config: dict[str, Any]) -> None:
        names = []
        rgs = []
        for g in range(groups):
            covered = [f"example.com/r{g}-{r}" for r in range(resources)]
            fqs = []
            for f in range(flavors):
                name = f"f{g}-{f}"
                names.append(name)
                fqs.append({"name": name, "resources": dict.fromkeys(covered, 1)})
            rgs.append({"coveredResources": covered, "flavors": fqs})
        config["queues"]["flavors"] = [{"name": n} for n in names]
        _cq(config)["resourceGroups"] = rgs

    return mutate


def _set_flavor(**values: Any) -> Mutate:
    return lambda config: _flavor(config).update(values)


def _set_cq(**values: Any) -> Mutate:
    return lambda config: _cq(config).update(values)


def _quota(resource: str, value: Any, cohort: bool = True) -> Mutate:
    def mutate(config: dict[str, Any]) -> None:
        if cohort:
            _cq(config)["cohort"] = "co"
        _cq(config)["resourceGroups"][0]["flavors"][0]["resources"][resource] = value

    return mutate


def _seq(*mutations: Mutate) -> Mutate:
    def mutate(config: dict[str, Any]) -> None:
        for m in mutations:
            m(config)

    return mutate


def _topology(levels: list[str]) -> Mutate:
    def mutate(config: dict[str, Any]) -> None:
        config["queues"]["topologies"] = [{"name": "topo", "levels": levels}]

    return mutate


def _patch_flavor(**values: Any) -> Patch:
    return lambda obj: obj["spec"].update(values)


def _patch_group(**values: Any) -> Patch:
    return lambda obj: obj["spec"]["resourceGroups"][0].update(values)


TAINT = {"key": "example.com/gpu", "value": "true", "effect": "NoSchedule"}
LONG_KEY = "a" * 253 + "/" + "b" * 63  # a valid label key, 317 characters
WORKER_CQ = ("worker-worker1", "ClusterQueue", "cq")
MANAGER_CQ = ("manager", "ClusterQueue", "cq")
FLAVOR = ("manager", "ResourceFlavor", "default-flavor")

CASES: list[Case] = [
    Case(
        "17 resource groups",
        "cq-resource-groups",
        _groups(17, 1, 1),
        f"{CQ}.resourceGroups",
        "17 resource groups",
        MANAGER_CQ,
        "spec.resourceGroups: Too many: 17: must have at most 16 items",
    ),
    Case(
        "a group covering nothing",
        "cq-covered-resources",
        lambda c: _cq(c)["resourceGroups"][0].update(
            coveredResources=None, flavors=[{"name": "default-flavor", "resources": {}}]
        ),
        f"{GROUP0}.coveredResources",
        "covers no resource",
        WORKER_CQ,
        "spec.resourceGroups[0].coveredResources: Invalid value: 0: "
        "spec.resourceGroups[0].coveredResources in body should have at least 1 items",
    ),
    Case(
        "a group covering 65 resources",
        "cq-covered-resources",
        _groups(1, 1, 65),
        f"{GROUP0}.coveredResources",
        "covers 65 resources",
        WORKER_CQ,
        "spec.resourceGroups[0].coveredResources: Too many: 65: must have at most 64 items",
    ),
    Case(
        "a group without flavors",
        "cq-flavors",
        lambda c: _cq(c)["resourceGroups"][0].update(flavors=[]),
        f"{GROUP0}.flavors",
        "needs a flavor",
        WORKER_CQ,
        "spec.resourceGroups[0].flavors: Invalid value: 0: "
        "spec.resourceGroups[0].flavors in body should have at least 1 items",
    ),
    Case(
        "a group with 65 flavors",
        "cq-flavors",
        _groups(1, 65, 1),
        f"{GROUP0}.flavors",
        "65 flavors",
        WORKER_CQ,
        "spec.resourceGroups[0].flavors: Too many: 65: must have at most 64 items",
    ),
    Case(
        "260 flavors in all",
        "cq-total-flavors",
        _groups(5, 52, 1),
        f"{CQ}.resourceGroups",
        "260 flavors",
        WORKER_CQ,
        "total number of flavors across all resourceGroups must be ≤ 256, got 260",
    ),
    Case(
        "260 covered resources in all",
        "cq-total-covered",
        _groups(5, 1, 52),
        f"{CQ}.resourceGroups",
        "covers 260 resources",
        WORKER_CQ,
        "total number of covered resources across all resourceGroups must be ≤ 256, got 260",
    ),
    Case(
        "513 flavor x resource quotas in a group",
        "cq-flavor-resource-pairs",
        _groups(1, 9, 57),
        f"{GROUP0}.flavors",
        "513 flavor x resource quotas",
        WORKER_CQ,
        "number of flavor-resource combinations in a resourceGroup must be ≤ 512, got 513",
    ),
    Case(
        "cpu covered by two groups",
        "cq-unique-resources-and-flavors",
        lambda c: (
            c["queues"]["flavors"].append({"name": "other"}),
            _cq(c)["resourceGroups"].append(
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "other", "resources": {"cpu": 1}}],
                }
            ),
        ),
        f"{CQ}.resourceGroups[1].coveredResources",
        "'cpu' is covered by two resource groups",
        WORKER_CQ,
        'spec.resourceGroups[1].coveredResources[0]: Duplicate value: "cpu"',
    ),
    Case(
        "a resource name that is no label key",
        "cq-resource-name",
        lambda c: _cq(c)["resourceGroups"][0].update(
            coveredResources=["cpu", "bad name"],
            flavors=[{"name": "default-flavor", "resources": {"cpu": 1, "bad name": 1}}],
        ),
        f"{GROUP0}.coveredResources[1]",
        "not a valid label key",
        WORKER_CQ,
        'spec.resourceGroups[0].coveredResources[1]: Invalid value: "bad name"',
        patch=_patch_group(
            coveredResources=["cpu", "bad name"],
            flavors=[
                {
                    "name": "default-flavor",
                    "resources": [
                        {"name": "cpu", "nominalQuota": "1"},
                        {"name": "bad name", "nominalQuota": "1"},
                    ],
                }
            ],
        ),
    ),
    Case(
        "a negative quota",
        "cq-quota-not-negative",
        _quota("cpu", "-1", cohort=False),
        f"{GROUP0}.flavors[0].resources.cpu",
        "negative",
        WORKER_CQ,
        'spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: Invalid value: "-1": '
        "must be greater than or equal to 0",
        patch=lambda obj: obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0].update(
            nominalQuota="-1"
        ),
    ),
    Case(
        "a borrowingLimit without a cohort",
        "cq-limits-need-cohort",
        _quota("cpu", {"nominalQuota": 4, "borrowingLimit": 2}, cohort=False),
        f"{GROUP0}.flavors[0].resources.cpu",
        "need a cohort",
        WORKER_CQ,
        "borrowingLimit must be nil when cohort is empty",
    ),
    Case(
        "a lendingLimit above the ClusterQueue's nominalQuota",
        "cq-lending-limit",
        _quota("cpu", {"nominalQuota": 4, "lendingLimit": 5}),
        f"{GROUP0}.flavors[0].resources.cpu.lendingLimit",
        "is above its nominalQuota 4",
        WORKER_CQ,
        'spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: Invalid value: "5": '
        "must be less than or equal to the nominalQuota",
    ),
    Case(
        "a worker's override below the lendingLimit",
        "cq-lending-limit",
        _seq(
            _quota("cpu", {"nominalQuota": 4, "lendingLimit": 3}),
            lambda c: c["workers"][1].update(quotas={"cq": {"default-flavor": {"cpu": 2}}}),
        ),
        "workers[1].quotas.cq.default-flavor.cpu",
        "worker 'worker2' gets",
        ("worker-worker2", "ClusterQueue", "cq"),
        'spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: Invalid value: "3": '
        "must be less than or equal to the nominalQuota",
    ),
    Case(
        "a managerQuota below the lendingLimit",
        "cq-lending-limit",
        _seq(
            _quota("cpu", {"nominalQuota": 4, "lendingLimit": 3}),
            _set_cq(managerQuota={"default-flavor": {"cpu": 2, "memory": "16Gi"}}),
        ),
        f"{CQ}.managerQuota.default-flavor.cpu",
        "the manager's nominalQuota",
        MANAGER_CQ,
        'spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: Invalid value: "3": '
        "must be less than or equal to the nominalQuota",
    ),
    Case(
        "a preference with whenCanBorrow left at its default",
        "cq-fungibility-preference",
        _set_cq(flavorFungibility={"preference": "BorrowingOverPreemption"}),
        f"{CQ}.flavorFungibility.preference",
        "whenCanBorrow: MayStopSearch (its default)",
        WORKER_CQ,
        "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor",
    ),
    Case(
        "a preference with whenCanPreempt MayStopSearch",
        "cq-fungibility-preference",
        _set_cq(
            flavorFungibility={
                "whenCanBorrow": "TryNextFlavor",
                "whenCanPreempt": "MayStopSearch",
                "preference": "PreemptionOverBorrowing",
            }
        ),
        f"{CQ}.flavorFungibility.preference",
        "whenCanPreempt: MayStopSearch",
        WORKER_CQ,
        "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor",
    ),
    Case(
        "borrowWithinCohort while reclaimWithinCohort defaults to Never",
        "cq-borrow-needs-reclaim",
        _seq(
            _set_cq(cohort="co"),
            _set_cq(preemption={"borrowWithinCohort": {"policy": "LowerPriority"}}),
        ),
        f"{CQ}.preemption.borrowWithinCohort",
        "needs reclaimWithinCohort",
        WORKER_CQ,
        "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
    ),
    Case(
        "a selector operator In without values",
        "cq-namespace-selector",
        _set_cq(namespaceSelector={"matchExpressions": [{"key": "team", "operator": "In"}]}),
        f"{CQ}.namespaceSelector.matchExpressions[0].values",
        "operator In needs values",
        WORKER_CQ,
        "spec.namespaceSelector.matchExpressions[0].values: Required value",
        patch=lambda obj: obj["spec"].update(
            namespaceSelector={"matchExpressions": [{"key": "team", "operator": "In"}]}
        ),
    ),
    Case(
        "a dotted ClusterQueue name",
        "cq-name-pod-label",
        lambda c: (
            _cq(c).update(name="cq.v1"),
            c["queues"]["localQueues"][0].update(clusterQueue="cq.v1"),
        ),
        f"{CQ}.name",
        "will not put the kueue.x-k8s.io/cluster-queue-name label",
        ("worker-worker1", "ClusterQueue", "cq.v1"),
        "Cluster queue name could not be set as a label for pods",
        severity="warning",
    ),
    Case(
        "nine node labels",
        "rf-item-counts",
        _set_flavor(nodeLabels={f"example.com/l{i}": "x" for i in range(9)}),
        "queues.flavors[0].nodeLabels",
        "9 nodeLabels",
        FLAVOR,
        "spec.nodeLabels: Too many: 9: must have at most 8 items",
    ),
    Case(
        "nine taints",
        "rf-item-counts",
        _set_flavor(nodeTaints=[{**TAINT, "key": f"example.com/t{i}"} for i in range(9)]),
        "queues.flavors[0].nodeTaints",
        "9 nodeTaints",
        FLAVOR,
        "spec.nodeTaints: Too many: 9: must have at most 8 items",
    ),
    Case(
        "nine tolerations",
        "rf-item-counts",
        _set_flavor(
            tolerations=[{"key": f"example.com/t{i}", "operator": "Exists"} for i in range(9)]
        ),
        "queues.flavors[0].tolerations",
        "9 tolerations",
        FLAVOR,
        "spec.tolerations: Too many: 9: must have at most 8 items",
    ),
    Case(
        "a node label that is no label key",
        "rf-node-labels",
        _set_flavor(nodeLabels={"bad key": "x"}),
        "queues.flavors[0].nodeLabels.bad key",
        "not a valid label key",
        FLAVOR,
        'spec.nodeLabels: Invalid value: "bad key"',
        patch=_patch_flavor(nodeLabels={"bad key": "x"}),
    ),
    Case(
        "a taint value that is no label value",
        "rf-taint-syntax",
        _set_flavor(nodeTaints=[{**TAINT, "value": "not valid!"}]),
        "queues.flavors[0].nodeTaints[0].value",
        "not a valid label value",
        FLAVOR,
        'spec.nodeTaints[0].value: Invalid value: "not valid!"',
        patch=_patch_flavor(nodeTaints=[{**TAINT, "value": "not valid!"}]),
    ),
    Case(
        "a taint effect Kueue does not know",
        "rf-taint-effect",
        _set_flavor(nodeTaints=[{**TAINT, "effect": "NoScheduling"}]),
        "queues.flavors[0].nodeTaints[0].effect",
        "not one of",
        FLAVOR,
        "supported taint effect values",
        patch=_patch_flavor(nodeTaints=[{**TAINT, "effect": "NoScheduling"}]),
    ),
    Case(
        "one taint twice",
        "rf-unique-taints",
        _set_flavor(nodeTaints=[TAINT, {**TAINT, "value": "false"}]),
        "queues.flavors[0].nodeTaints[1]",
        "listed twice",
        FLAVOR,
        "taints must be unique by key and effect pair",
    ),
    Case(
        "a toleration without a key, operator Equal",
        "rf-toleration-without-key",
        _set_flavor(tolerations=[{"operator": "Equal", "value": "x"}]),
        "queues.flavors[0].tolerations[0].operator",
        "without a key must use operator Exists",
        FLAVOR,
        "operator must be Exists when 'key' is empty",
        patch=_patch_flavor(tolerations=[{"operator": "Equal", "value": "x"}]),
    ),
    Case(
        "operator Exists with an empty value",
        "rf-toleration-exists-no-value",
        _set_flavor(tolerations=[{"key": "a", "operator": "Exists", "value": ""}]),
        "queues.flavors[0].tolerations[0].value",
        "operator Exists has no value",
        FLAVOR,
        "a value must be empty when 'operator' is 'Exists'",
        patch=_patch_flavor(tolerations=[{"key": "a", "operator": "Exists", "value": ""}]),
    ),
    Case(
        "tolerationSeconds with effect NoSchedule",
        "rf-toleration-seconds",
        _set_flavor(
            tolerations=[
                {"key": "a", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 30}
            ]
        ),
        "queues.flavors[0].tolerations[0].tolerationSeconds",
        "only to effect NoExecute",
        FLAVOR,
        "effect must be 'NoExecute' when 'tolerationSeconds' is set",
        patch=_patch_flavor(
            tolerations=[
                {"key": "a", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 30}
            ]
        ),
    ),
    Case(
        "a topology flavor without node labels",
        "rf-topology-node-label",
        _seq(_topology(["kubernetes.io/hostname"]), _set_flavor(topology="topo")),
        "queues.flavors[0].nodeLabels",
        "needs at least one node label",
        FLAVOR,
        # The rule reads spec.nodeLabels, absent here: the server fails evaluating it.
        "nodeLabels",
    ),
    Case(
        "17 topology levels",
        "topo-levels",
        _topology([f"example.com/l{i}" for i in range(17)]),
        "queues.topologies[0].levels",
        "1 to 16 levels",
        ("manager", "Topology", "topo"),
        "spec.levels: Too many: 17: must have at most 16 items",
    ),
    Case(
        "a topology level twice",
        "topo-levels",
        _topology(["example.com/rack", "example.com/rack"]),
        "queues.topologies[0].levels",
        "listed twice",
        ("manager", "Topology", "topo"),
        "must be unique",
    ),
    Case(
        "hostname above another level",
        "topo-levels",
        _topology(["kubernetes.io/hostname", "example.com/rack"]),
        "queues.topologies[0].levels",
        "may only be the last level",
        ("manager", "Topology", "topo"),
        "the kubernetes.io/hostname label can only be used at the lowest level of topology",
    ),
    Case(
        "a 317-character topology level",
        "topo-level-length",
        _topology([LONG_KEY]),
        "queues.topologies[0].levels[0]",
        "317 characters",
        ("manager", "Topology", "topo"),
        "spec.levels[0].nodeLabel: Too long: may not be more than 316",
    ),
    Case(
        "a LocalQueue name longer than a label value",
        "lq-name-label-value",
        lambda c: c["queues"]["localQueues"][0].update(name="q" * 64),
        "queues.localQueues[0].name",
        "64 characters",
        ("manager", "LocalQueue", "q" * 64),
        # A Job labelled kueue.x-k8s.io/queue-name with it (apimachinery IsValidLabelValue).
        "must be no more than 63 characters",
        extra={"job_label": {"kueue.x-k8s.io/queue-name": "q" * 64}},
    ),
    Case(
        "21 workers",
        "mk-config-clusters",
        lambda c: c.update(workers=[{"name": f"w{i}"} for i in range(21)]),
        "workers",
        "at most 20 clusters",
        ("manager", "MultiKueueConfig", "multikueue"),
        "spec.clusters: Too many: 21: must have at most 20 items",
    ),
]

RULE_KIND = {rule.id: rule.refused_by for rule in RULE_INVENTORY}


def written_object(case: Case) -> dict[str, Any]:
    """The object the project would write for the mutated stack, were it not refused."""
    config = base()
    if case.patch is None:
        case.mutate(config)
    spec, problems = load_spec(config, "t")
    assert spec is not None, problems
    cluster, kind, name = case.refused
    by_dir = {c.directory: c for c in build_fleet(spec)}
    if case.patch is not None:
        kind_, _ = kind, name
        obj = next(o for o in by_dir[cluster].objects if o["kind"] == kind_)
        obj = copy.deepcopy(obj)
        case.patch(obj)
        return obj
    return next(
        o for o in by_dir[cluster].objects if o["kind"] == kind and o["metadata"]["name"] == name
    )
