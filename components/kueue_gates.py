"""Kueue 0.19 feature gates: which exist, their defaults, which are locked or removed.

Kueue fails to start on an unknown gate name or on a locked gate set to a value other
than its default (component-base featuregate.SetFromMap), so these are checked before
anything is applied. Source: kueue pkg/features/kube_features.go at v0.19.x.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Gate:
    default: bool
    locked: bool = False


GATES: dict[str, Gate] = {
    "AdmissionFairSharing": Gate(True),
    "AdmissionGatedBy": Gate(True),
    "AssignQueueLabelsForPods": Gate(True),
    "CleanupProvisioningRequestsOnEviction": Gate(True),
    "ConcurrentAdmission": Gate(False),
    "CustomMetricLabels": Gate(False),
    "DeferRayServiceFinalizationForRedisCleanup": Gate(True),
    "DisableWaitForPodsReady": Gate(False),
    "ElasticJobsViaWorkloadSlices": Gate(True),
    "ElasticJobsViaWorkloadSlicesWithTAS": Gate(False),
    "FailureRecoveryPolicy": Gate(False),
    "FairSharingPreemptWithinNominal": Gate(True),
    "FairSharingPrioritizeNonBorrowing": Gate(True),
    "FastQuotaReleaseInPodIntegration": Gate(False),
    "FinishOrphanedWorkloads": Gate(True),
    "FlavorFungibility": Gate(True),
    "HierarchicalCohorts": Gate(True, locked=True),
    "KueueDRAIntegration": Gate(True),
    "KueueDRAIntegrationConsumableCapacity": Gate(False),
    "KueueDRAIntegrationExtendedResource": Gate(True),
    "KueueDRAIntegrationPartitionableDevices": Gate(True),
    "KueueDRARejectWorkloadsWhenDRADisabled": Gate(True),
    "LWSImmutableGroupSize": Gate(True),
    "LocalQueueMetrics": Gate(True),
    "ManagedJobsNamespaceSelectorAlwaysRespected": Gate(True, locked=True),
    "MetricForWorkloadCreationLatency": Gate(True),
    "MetricsForCohorts": Gate(True),
    "MultiKueue": Gate(True),
    "MultiKueueAdaptersForCustomJobs": Gate(True),
    "MultiKueueAllowInsecureKubeconfigs": Gate(False, locked=True),
    "MultiKueueClusterProfile": Gate(False),
    "MultiKueueIncrementalDispatcherConfig": Gate(True),
    "MultiKueueIncrementalDispatcherRespectConfigOrder": Gate(True),
    "MultiKueueKubeConfigPathValidation": Gate(False),
    "MultiKueueManagerQuotaAutomation": Gate(False),
    "MultiKueueOrchestratedPreemption": Gate(False),
    "MultiKueueRedoAdmissionOnEvictionInWorker": Gate(True, locked=True),
    "MultiKueueRemoteSpecSync": Gate(True),
    "MultiKueueWaitForWorkloadAdmitted": Gate(True, locked=True),
    "ObjectRetentionPolicies": Gate(True, locked=True),
    "PartialAdmission": Gate(True),
    "PriorityBoost": Gate(False),
    "PrioritySortingWithinCohort": Gate(True),
    "PropagateBatchJobLabelsToWorkload": Gate(True, locked=True),
    "QuotaCheckStrategy": Gate(True),
    "ReclaimablePods": Gate(True),
    "RejectUpdatesToCQWithInvalidOnFlavors": Gate(False),
    "RemoveFinalizersWithStrictPatch": Gate(True),
    "SchedulerLibraryIntegration": Gate(False),
    "SchedulerLongRequeueInterval": Gate(False),
    "SchedulerTimestampPreemptionBuffer": Gate(False),
    "SchedulingEquivalenceHashing": Gate(True),
    "ShortWorkloadNames": Gate(False),
    "SkipFinalizersForPodsSuspendedByParent": Gate(True, locked=True),
    "SkipReassignmentForPodOwnedWorkloads": Gate(True),
    "SparkApplicationIntegration": Gate(False),
    "TASAssignmentsEncodingByHostnamePrefix": Gate(True),
    "TASBalancedPlacement": Gate(False),
    "TASCacheNodeMatchResults": Gate(True),
    "TASCachingRemainingResources": Gate(True),
    "TASFailedNodeReplacement": Gate(True),
    "TASFailedNodeReplacementFailFast": Gate(True),
    "TASHandleOverlappingFlavors": Gate(True),
    "TASMultiLayerTopology": Gate(True),
    "TASProfileMixed": Gate(True),
    "TASRecomputeAssignmentWithinSchedulingCycle": Gate(True),
    "TASReplaceNodeDueToNotReadyOverFixedTime": Gate(False),
    "TASReplaceNodeOnNodeTaints": Gate(True),
    "TASReplaceNodeOnPodTermination": Gate(True),
    "TASRespectNodeAffinityPreferred": Gate(False),
    "TLSOptions": Gate(True),
    "TopologyAwareScheduling": Gate(True),
    "UnadmittedWorkloadsExplicitStatus": Gate(False),
    "UnadmittedWorkloadsObservability": Gate(False),
    "VectorizedResourceRequests": Gate(True),
    "VisibilityOnDemand": Gate(True),
    "WorkloadIdentifierAnnotations": Gate(True),
    "WorkloadPriorityClassDefaulting": Gate(False),
    "WorkloadRequestUseMergePatch": Gate(False),
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


def depends_on_tas(name: str) -> bool:
    """Gates that Kueue refuses to have on while TopologyAwareScheduling is off."""
    return name.startswith("TAS") or name == "ElasticJobsViaWorkloadSlicesWithTAS"


def effective(gates: dict[str, bool], name: str) -> bool:
    if name in gates:
        return gates[name]
    gate = GATES.get(name)
    return bool(gate and gate.default)
