"""What each key of a DispatchPolicy's spec and of the controller's settings file means,
keyed `<Model>.<key as written>` (policy_api.py, settings.py). docs/dispatcher.md shows
them beside the types and defaults read from the models themselves (`mkf reference`); a
field without an entry here, or an entry naming no field, fails tests/unit/test_docs.py."""

from __future__ import annotations

from controller.policy_api import MAX_NOMINATIONS, STRATEGIES, WHEN_NOTHING_FITS

CONTROLLER_DOCS: dict[str, str] = {
    # --- a DispatchPolicy's spec (and the settings' defaultPolicy) ---------------------------
    "PolicySpec.clusterQueues": "The ClusterQueues this policy governs. Unset: it is the "
    "default policy, for every ClusterQueue no other policy names.",
    "PolicySpec.clusterSelector": "Only workers whose MultiKueueCluster carries all these "
    "labels (the stack copies a worker's `labels` there).",
    "PolicySpec.strategy": f"One of {', '.join(STRATEGIES)}: spread to the most free quota, "
    "pack into the tightest fit (the default: whole workers stay free for the jobs that need "
    "one), or fill workers in the MultiKueueConfig's order.",
    "PolicySpec.clustersToNominate": f"Workers nominated at once, 1 to {MAX_NOMINATIONS} "
    "(Kueue's limit).",
    "PolicySpec.widenAfter": "Nominate `clustersToNominate` more workers each time this "
    "passes without admission, counted from the workload's QuotaReserved on the manager.",
    "PolicySpec.whenNothingFits": f"One of {', '.join(WHEN_NOTHING_FITS)}: wait where the "
    "shortfall is smallest, or on the least loaded worker. Either way a worker whose queue "
    "can preempt for it (its work of lower priority holds what the workload is short of) "
    "comes first, then one whose queue preempts, and a stuck StrictFIFO queue last.",
    "PolicySpec.hedgeClusters": f"1 (off) to {MAX_NOMINATIONS}: a workload that fits on no "
    "worker now and needs `hedgeSharePercent` or more of every queue that could hold it (a "
    "whole-worker job, waiting for a worker to drain) is nominated to this many at once, the "
    "first to admit it winning, as Kueue's AllAtOnce races its copies. 5 by default, with "
    "BestFit: BENCHMARKS.md section 4 chose both by the tail they give.",
    "PolicySpec.hedgeSharePercent": "The share of each queue, 1 to 100, a workload needs "
    "before `hedgeClusters` applies to it.",
    "PolicySpec.inventory": "Inventory automation: ClusterProfiles that match join a "
    "MultiKueueConfig of the dispatcher's own (needs `dispatcher.inventory` in the stack).",
    "LabelSelector.matchLabels": "Labels that must all match.",
    "InventoryFields.multiKueueConfig": "The MultiKueueConfig the dispatcher creates and fills "
    "(an admission check and ClusterQueue of your own point at it).",
    "InventoryFields.selector": "The ClusterProfiles in `kueue-system` that join.",
    "InventoryFields.accessProvider": "Join only profiles that offer this access provider.",
    "InventoryFields.requiredProperties": "Join only profiles with these `status.properties`.",
    "InventoryFields.orderBy": "The order in the config: `name`, `created` or "
    "`label:<key>` (name breaks ties; what is there keeps its place).",
    "InventoryFields.drainTimeout": "How long a profile that left waits for the work "
    "admitted on it before its cluster leaves the config.",
    # --- the settings file (--config) -----------------------------------------------------------
    "SettingsFile.namespace": "The dispatcher's namespace: reader Secrets, Events, its Lease.",
    "SettingsFile.kueueNamespace": "Kueue's namespace (ClusterProfiles and credentials).",
    "SettingsFile.leaseName": "The Lease replicas elect a leader through.",
    "SettingsFile.workerSecretLabel": "The label on a reader Secret naming its worker.",
    "SettingsFile.defaultPolicy": "The policy for ClusterQueues no DispatchPolicy names, "
    "when no default DispatchPolicy exists (the stack writes `dispatcher.policy` here).",
    "SettingsFile.clusterProfiles": "ClusterProfile mode: the workers whose profile status "
    "the controller keeps (written by the stack).",
    "SettingsFile.inventory": "Watch ClusterProfiles for inventory automation.",
    "SettingsFile.staleAfterSeconds": "How long a worker's probes may go unanswered before it "
    "is unhealthy.",
    "SettingsFile.workerLostTimeoutSeconds": "How long a nomination on a worker the "
    "dispatcher cannot reach is kept (Kueue keeps a lost worker for its `workerLostTimeout`; "
    "the stack writes that value). No new nomination goes there meanwhile.",
    "SettingsFile.resyncSeconds": "How often pending workloads are decided again.",
    "SettingsFile.leaseDurationSeconds": "How long a leader's Lease lasts without renewal.",
    "SettingsFile.leaseRenewSeconds": "How often the leader renews it (below the duration).",
    "SettingsFile.leaseRenewDeadlineSeconds": "A leader that has not renewed for this long "
    "stops writing (below the duration, above 1.2 x leaseRenewSeconds; unset: two thirds of "
    "the duration).",
    "SettingsFile.metricsPort": "The port of `/metrics`, `/healthz` and `/readyz`.",
    "SettingsFile.concurrentWrites": "Status patches under way at once.",
    "ProfileEntry.name": "The worker's ClusterProfile (and MultiKueueCluster) name.",
    "ProfileEntry.server": "The worker's API server URL, `https://hostname:port`: a host "
    "Kueue trusts (a DNS name or an IP address, IPv6 in brackets with a port), no `user@`, "
    "query, fragment or spaces.",
    "ProfileEntry.tokenSecret": "The Secret holding its token, in Kueue's namespace.",
    "ProfileEntry.certificateAuthorityData": "The worker's CA bundle, base64.",
    "ProfileEntry.accessProvider": "The access provider the profile offers.",
}
