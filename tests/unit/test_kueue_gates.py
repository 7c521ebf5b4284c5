"""The Kueue v0.19.2 gate table and the gate combinations Kueue refuses at start-up.

Expected values are written out here from kubernetes-sigs/kueue v0.19.2
pkg/features/kube_features.go and pkg/config/validation.go (LoadAndValidateFeatureGates,
validateDRAFeatureGateDependencies), not read back from components.kueue_gates.
"""

from __future__ import annotations

import pytest

from components.model import kueue_gates
from components.model.kueue_gates import ALPHA, BETA, DEPRECATED, GA
from tests.helpers.fleet_config import base, only, problems_of

TAS = "TopologyAwareScheduling"

# (gate, the gate it requires) - one case per dependency rule in v0.19.2 validation.go.
DEPENDENCIES = [
    ("TASProfileMixed", TAS),
    ("TASHandleOverlappingFlavors", TAS),
    ("TASFailedNodeReplacement", TAS),
    ("TASFailedNodeReplacementFailFast", TAS),
    ("TASFailedNodeReplacementFailFast", "TASFailedNodeReplacement"),
    ("TASReplaceNodeOnPodTermination", TAS),
    ("TASReplaceNodeOnPodTermination", "TASFailedNodeReplacement"),
    ("TASReplaceNodeDueToNotReadyOverFixedTime", TAS),
    ("TASReplaceNodeDueToNotReadyOverFixedTime", "TASFailedNodeReplacement"),
    ("TASBalancedPlacement", TAS),
    ("TASReplaceNodeOnNodeTaints", TAS),
    ("TASMultiLayerTopology", TAS),
    ("TASRespectNodeAffinityPreferred", TAS),
    ("TASRecomputeAssignmentWithinSchedulingCycle", TAS),
    ("UnadmittedWorkloadsExplicitStatus", "UnadmittedWorkloadsObservability"),
    ("ElasticJobsViaWorkloadSlicesWithTAS", "ElasticJobsViaWorkloadSlices"),
    ("ElasticJobsViaWorkloadSlicesWithTAS", TAS),
    ("KueueDRAIntegrationExtendedResource", "KueueDRAIntegration"),
    ("KueueDRAIntegrationPartitionableDevices", "KueueDRAIntegration"),
    ("KueueDRAIntegrationConsumableCapacity", "KueueDRAIntegration"),
]


def _errors(config: dict) -> list:
    return [p for p in problems_of(config) if p.severity == "error"]


def _gates_config(gates: dict[str, bool], key: str = "featureGates") -> dict:
    config = base()
    config["kueue"][key] = gates
    return config


@pytest.mark.parametrize(("gate", "dependency"), DEPENDENCIES)
def test_gate_on_without_its_dependency_is_refused(gate: str, dependency: str) -> None:
    # Everything else that needs the dependency is off, so every refusal is this gate's.
    others = {g: False for g in kueue_gates.needs(dependency) if g != gate}
    problems = _errors(_gates_config({**others, gate: True, dependency: False}))
    assert {p.path for p in problems} == {f"kueue.featureGates.{gate}"}, problems
    (problem,) = [p for p in problems if f"{gate} requires {dependency}," in p.message]
    assert problem.severity == "error"
    assert dependency in problem.hint


@pytest.mark.parametrize(("gate", "dependency"), DEPENDENCIES)
def test_gate_with_its_dependency_on_passes(gate: str, dependency: str) -> None:
    gates = {gate: True, dependency: True, "TASFailedNodeReplacement": True, TAS: True}
    if gate == "UnadmittedWorkloadsExplicitStatus":
        gates["UnadmittedWorkloadsObservability"] = True
    assert _errors(_gates_config(gates)) == []


def test_the_rules_are_exactly_upstreams() -> None:
    pairs = {(g, d) for g, deps in kueue_gates.REQUIRES.items() for d in deps}
    assert pairs == set(DEPENDENCIES)


def test_dependency_off_reports_the_defaulted_gates_at_the_dependency() -> None:
    problem = only(
        problems_of(_gates_config({"KueueDRAIntegration": False})),
        "kueue.featureGates.KueueDRAIntegration",
    )
    # On by default in 0.19: ExtendedResource and PartitionableDevices; ConsumableCapacity is off.
    assert "KueueDRAIntegrationExtendedResource" in problem.message
    assert "KueueDRAIntegrationPartitionableDevices" in problem.message
    assert "ConsumableCapacity" not in problem.message


def test_flag_gates_are_reported_under_feature_gate_flags() -> None:
    config = _gates_config({"UnadmittedWorkloadsExplicitStatus": True}, "featureGateFlags")
    only(problems_of(config), "kueue.featureGateFlags.UnadmittedWorkloadsExplicitStatus")


def test_tas_gates_without_a_start_up_rule_may_stay_on_with_tas_off() -> None:
    """Upstream has no rule for these; the project's old `TAS* needs TAS` rule refused them."""
    off = {g: False for g in kueue_gates.needs(TAS)}
    gates = {
        TAS: False,
        **off,
        "TASCacheNodeMatchResults": True,
        "TASCachingRemainingResources": True,
        "TASAssignmentsEncodingByHostnamePrefix": True,
        "TASValidateWorkloadSliceSize": True,
        "TASCacheTopologyTree": True,
    }
    assert _errors(_gates_config(gates)) == []


@pytest.mark.parametrize(
    ("name", "default", "stage"),
    [
        # the ten the project used to call unknown
        ("TASCacheTopologyTree", False, ALPHA),
        ("PrioritizePreemptorWorkloads", False, ALPHA),
        ("RecomputeAssignmentUponPreemptionTargetsOverlap", False, ALPHA),
        ("WorkloadValidateResourcesAreNonNegative", True, BETA),
        ("TASValidateWorkloadSliceSize", True, BETA),
        ("WorkloadValidationForPodSetMetadata", True, BETA),
        ("FlavorFungibilityPreserveScanProgress", True, BETA),
        ("SkipAncestorCheckForDeletedWorkloads", True, BETA),
        ("PodIntegrationValidateGroupOwner", True, BETA),
        ("ValidateRayAndSparkJobUpdates", True, BETA),
        # stages that change what a user may do
        ("TASReplaceNodeDueToNotReadyOverFixedTime", False, DEPRECATED),
        ("HierarchicalCohorts", True, GA),
        ("UnadmittedWorkloadsObservability", False, BETA),
    ],
)
def test_gate_table_entry(name: str, default: bool, stage: str) -> None:
    gate = kueue_gates.GATES[name]
    assert (gate.default, gate.stage) == (default, stage)
    assert _errors(_gates_config({name: default})) == []


def test_gate_table_size_and_locked_gates() -> None:
    assert len(kueue_gates.GATES) == 89
    assert {n for n, g in kueue_gates.GATES.items() if g.locked} == {
        "HierarchicalCohorts",
        "ManagedJobsNamespaceSelectorAlwaysRespected",
        "MultiKueueAllowInsecureKubeconfigs",
        "MultiKueueRedoAdmissionOnEvictionInWorker",
        "MultiKueueWaitForWorkloadAdmitted",
        "ObjectRetentionPolicies",
        "PropagateBatchJobLabelsToWorkload",
        "SkipFinalizersForPodsSuspendedByParent",
    }


def test_deprecated_gate_turned_on_is_a_warning() -> None:
    gates = {"TASReplaceNodeDueToNotReadyOverFixedTime": True}
    problem = only(
        problems_of(_gates_config(gates)),
        "kueue.featureGates.TASReplaceNodeDueToNotReadyOverFixedTime",
    )
    assert problem.severity == "warning"
