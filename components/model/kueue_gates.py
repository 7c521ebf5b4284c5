"""Kueue 0.19 feature gates: which exist, their stage and default, which are locked or removed,
and which combinations stop Kueue at start-up.

Kueue fails to start on an unknown gate name, on a locked gate set to a value other than its
default (component-base featuregate.SetFromMap), and on the gate combinations that
LoadAndValidateFeatureGates refuses, so all of these are checked before anything is applied.

How GATES was derived (redo it on every Kueue bump): kubernetes-sigs/kueue tag v0.19.2,
pkg/features/kube_features.go, map `defaultVersionedFeatureGates`. For each gate take the
*last* VersionedSpecs entry: Kueue registers the gates on component-base's default feature
gate, whose emulation version is the Kubernetes version it was built with (1.36 for
component-base v0.36.2, see go.mod), which is above every Kueue version ("0.x") listed, so
the last entry is in effect. Copy Default, PreRelease and LockToDefault. Every name in the
`const` block has exactly one entry in that map (89 at v0.19.2).

How REQUIRES was derived: same tag, pkg/config/validation.go, LoadAndValidateFeatureGates
(the TAS profile and TASHandleOverlappingFlavors checks, every validateFeatureGateDependency
call, the ElasticJobsViaWorkloadSlicesWithTAS block) and validateDRAFeatureGateDependencies.
cmd/kueue/main.go at that tag refuses no other combination.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.model.problems import Problem

ALPHA, BETA, GA, DEPRECATED = "Alpha", "Beta", "GA", "Deprecated"


@dataclass(frozen=True)
class Gate:
    default: bool
    stage: str
    locked: bool = False


GATES: dict[str, Gate] = {
    "AdmissionFairSharing": Gate(True, BETA),
    "AdmissionGatedBy": Gate(True, BETA),
    "AssignQueueLabelsForPods": Gate(True, BETA),
    "CleanupProvisioningRequestsOnEviction": Gate(True, BETA),
    "ConcurrentAdmission": Gate(False, ALPHA),
    "CustomMetricLabels": Gate(False, ALPHA),
    "DeferRayServiceFinalizationForRedisCleanup": Gate(True, BETA),
    "DisableWaitForPodsReady": Gate(False, ALPHA),
    "ElasticJobsViaWorkloadSlices": Gate(True, BETA),
    "ElasticJobsViaWorkloadSlicesWithTAS": Gate(False, ALPHA),
    "FailureRecoveryPolicy": Gate(False, ALPHA),
    "FairSharingPreemptWithinNominal": Gate(True, BETA),
    "FairSharingPrioritizeNonBorrowing": Gate(True, BETA),
    "FastQuotaReleaseInPodIntegration": Gate(False, ALPHA),
    "FinishOrphanedWorkloads": Gate(True, BETA),
    "FlavorFungibility": Gate(True, BETA),
    "FlavorFungibilityPreserveScanProgress": Gate(True, BETA),
    "HierarchicalCohorts": Gate(True, GA, locked=True),
    "KueueDRAIntegration": Gate(True, BETA),
    "KueueDRAIntegrationConsumableCapacity": Gate(False, ALPHA),
    "KueueDRAIntegrationExtendedResource": Gate(True, BETA),
    "KueueDRAIntegrationPartitionableDevices": Gate(True, BETA),
    "KueueDRARejectWorkloadsWhenDRADisabled": Gate(True, BETA),
    "LWSImmutableGroupSize": Gate(True, BETA),
    "LocalQueueMetrics": Gate(True, BETA),
    "ManagedJobsNamespaceSelectorAlwaysRespected": Gate(True, GA, locked=True),
    "MetricForWorkloadCreationLatency": Gate(True, BETA),
    "MetricsForCohorts": Gate(True, BETA),
    "MultiKueue": Gate(True, BETA),
    "MultiKueueAdaptersForCustomJobs": Gate(True, BETA),
    "MultiKueueAllowInsecureKubeconfigs": Gate(False, DEPRECATED, locked=True),
    "MultiKueueClusterProfile": Gate(False, ALPHA),
    "MultiKueueIncrementalDispatcherConfig": Gate(True, BETA),
    "MultiKueueIncrementalDispatcherRespectConfigOrder": Gate(True, BETA),
    "MultiKueueKubeConfigPathValidation": Gate(False, ALPHA),
    "MultiKueueManagerQuotaAutomation": Gate(False, ALPHA),
    "MultiKueueOrchestratedPreemption": Gate(False, ALPHA),
    "MultiKueueRedoAdmissionOnEvictionInWorker": Gate(True, GA, locked=True),
    "MultiKueueRemoteSpecSync": Gate(True, BETA),
    "MultiKueueWaitForWorkloadAdmitted": Gate(True, GA, locked=True),
    "ObjectRetentionPolicies": Gate(True, GA, locked=True),
    "PartialAdmission": Gate(True, BETA),
    "PodIntegrationValidateGroupOwner": Gate(True, BETA),
    "PrioritizePreemptorWorkloads": Gate(False, ALPHA),
    "PriorityBoost": Gate(False, ALPHA),
    "PrioritySortingWithinCohort": Gate(True, BETA),
    "PropagateBatchJobLabelsToWorkload": Gate(True, GA, locked=True),
    "QuotaCheckStrategy": Gate(True, BETA),
    "ReclaimablePods": Gate(True, BETA),
    "RecomputeAssignmentUponPreemptionTargetsOverlap": Gate(False, ALPHA),
    "RejectUpdatesToCQWithInvalidOnFlavors": Gate(False, ALPHA),
    "RemoveFinalizersWithStrictPatch": Gate(True, BETA),
    "SchedulerLibraryIntegration": Gate(False, ALPHA),
    "SchedulerLongRequeueInterval": Gate(False, ALPHA),
    "SchedulerTimestampPreemptionBuffer": Gate(False, ALPHA),
    "SchedulingEquivalenceHashing": Gate(True, BETA),
    "ShortWorkloadNames": Gate(False, ALPHA),
    "SkipAncestorCheckForDeletedWorkloads": Gate(True, BETA),
    "SkipFinalizersForPodsSuspendedByParent": Gate(True, GA, locked=True),
    "SkipReassignmentForPodOwnedWorkloads": Gate(True, BETA),
    "SparkApplicationIntegration": Gate(False, ALPHA),
    "TASAssignmentsEncodingByHostnamePrefix": Gate(True, BETA),
    "TASBalancedPlacement": Gate(False, ALPHA),
    "TASCacheNodeMatchResults": Gate(True, BETA),
    "TASCacheTopologyTree": Gate(False, ALPHA),
    "TASCachingRemainingResources": Gate(True, BETA),
    "TASFailedNodeReplacement": Gate(True, BETA),
    "TASFailedNodeReplacementFailFast": Gate(True, BETA),
    "TASHandleOverlappingFlavors": Gate(True, BETA),
    "TASMultiLayerTopology": Gate(True, BETA),
    "TASProfileMixed": Gate(True, BETA),
    "TASRecomputeAssignmentWithinSchedulingCycle": Gate(True, BETA),
    "TASReplaceNodeDueToNotReadyOverFixedTime": Gate(False, DEPRECATED),
    "TASReplaceNodeOnNodeTaints": Gate(True, BETA),
    "TASReplaceNodeOnPodTermination": Gate(True, BETA),
    "TASRespectNodeAffinityPreferred": Gate(False, ALPHA),
    "TASValidateWorkloadSliceSize": Gate(True, BETA),
    "TLSOptions": Gate(True, BETA),
    "TopologyAwareScheduling": Gate(True, BETA),
    "UnadmittedWorkloadsExplicitStatus": Gate(False, BETA),
    "UnadmittedWorkloadsObservability": Gate(False, BETA),
    "ValidateRayAndSparkJobUpdates": Gate(True, BETA),
    "VectorizedResourceRequests": Gate(True, BETA),
    "VisibilityOnDemand": Gate(True, BETA),
    "WorkloadIdentifierAnnotations": Gate(True, BETA),
    "WorkloadPriorityClassDefaulting": Gate(False, ALPHA),
    "WorkloadRequestUseMergePatch": Gate(False, ALPHA),
    "WorkloadValidateResourcesAreNonNegative": Gate(True, BETA),
    "WorkloadValidationForPodSetMetadata": Gate(True, BETA),
}

# Gates that earlier minors knew and 0.19 no longer registers: to Kueue 0.19 they are
# unknown names, which stop the manager at start-up.
REMOVED_GATES: dict[str, str] = {
    "MultiKueueBatchJobWithManagedBy": "it went GA in 0.17 and was removed in 0.19",
    "ConfigurableResourceTransformations": "it went GA in 0.14 and was removed",
    "FlavorFungibilityImplicitPreferenceDefault": "it was deprecated and removed in 0.16",
    "LendingLimit": "it graduated and was removed before 0.19",
    "LocalQueueDefaulting": "it graduated and was removed before 0.19",
    "SanitizePodSets": "it graduated and was removed before 0.19",
    "TASProfileLeastFreeCapacity": "it was deprecated and removed before 0.19",
}

TAS = "TopologyAwareScheduling"
# gate -> gates that must be on while it is on, or Kueue refuses to start
# (v0.19.2 pkg/config/validation.go, LoadAndValidateFeatureGates). Only these TAS* gates
# need TopologyAwareScheduling; the TAS caching/encoding/validation gates do not.
REQUIRES: dict[str, tuple[str, ...]] = {
    # "cannot use a TAS profile with TAS disabled"
    "TASProfileMixed": (TAS,),
    "TASHandleOverlappingFlavors": (TAS,),
    "TASFailedNodeReplacement": (TAS,),
    "TASFailedNodeReplacementFailFast": (TAS, "TASFailedNodeReplacement"),
    "TASReplaceNodeOnPodTermination": (TAS, "TASFailedNodeReplacement"),
    "TASReplaceNodeDueToNotReadyOverFixedTime": (TAS, "TASFailedNodeReplacement"),
    "TASBalancedPlacement": (TAS,),
    "TASReplaceNodeOnNodeTaints": (TAS,),
    "TASMultiLayerTopology": (TAS,),
    "TASRespectNodeAffinityPreferred": (TAS,),
    "TASRecomputeAssignmentWithinSchedulingCycle": (TAS,),
    "UnadmittedWorkloadsExplicitStatus": ("UnadmittedWorkloadsObservability",),
    "ElasticJobsViaWorkloadSlicesWithTAS": ("ElasticJobsViaWorkloadSlices", TAS),
    # validateDRAFeatureGateDependencies
    "KueueDRAIntegrationExtendedResource": ("KueueDRAIntegration",),
    "KueueDRAIntegrationPartitionableDevices": ("KueueDRAIntegration",),
    "KueueDRAIntegrationConsumableCapacity": ("KueueDRAIntegration",),
}


def effective(gates: dict[str, bool], name: str) -> bool:
    if name in gates:
        return gates[name]
    gate = GATES.get(name)
    return bool(gate and gate.default)


def needs(dependency: str) -> list[str]:
    """Every gate that Kueue refuses to have on while `dependency` is off."""
    return sorted(g for g, deps in REQUIRES.items() if dependency in deps)


def gate_problems(gates: dict[str, bool], prefix: str) -> list[Problem]:
    """The start-up refusals of LoadAndValidateFeatureGates for these gates (on top of the
    defaults), each at the config path the user can change: a gate the user turned on that
    lacks a dependency is reported at that gate; gates that are on by default and lack one
    are reported together at the dependency the user turned off."""
    problems: list[Problem] = []
    by_default: dict[str, list[str]] = {}
    for name, deps in REQUIRES.items():
        if not effective(gates, name):
            continue
        for dep in deps:
            if effective(gates, dep):
                continue
            if name in gates:
                problems.append(
                    Problem(
                        f"{prefix}.{name}",
                        f"Kueue refuses to start: {name} requires {dep}, which is off",
                        f"turn {prefix}.{dep} on, or set {name} to false",
                    )
                )
            else:
                by_default.setdefault(dep, []).append(name)
    for dep, names in sorted(by_default.items()):
        problems.append(
            Problem(
                f"{prefix}.{dep}",
                f"Kueue refuses to start: {dep} is off while gates that require it are on "
                f"by default: {', '.join(sorted(names))}",
                f"set each of them to false too, or leave {dep} on",
            )
        )
    for name, value in gates.items():
        gate = GATES.get(name)
        if value and gate and gate.stage == DEPRECATED and not gate.locked:
            problems.append(
                Problem(
                    f"{prefix}.{name}",
                    f"feature gate '{name}' is deprecated in Kueue 0.19 and will be removed",
                    "delete it, or plan for the next Kueue minor to refuse it",
                    "warning",
                )
            )
    return problems
