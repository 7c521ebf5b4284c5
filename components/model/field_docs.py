"""What each key of a stack file means, one sentence or two per field of the typed model
(spec.py), keyed `<Model>.<key as written>`. The stack file reference (docs/stack-reference.md)
is generated from the model and these words by `mkf reference`; the keys, types and
defaults come from the model itself, so they cannot drift.

A field of the model without an entry here, or an entry naming no field, fails
tests/unit/test_docs.py: a new key is documented when it is added."""

from __future__ import annotations

from components.model.versions import (
    DEFAULT_KUBERNETES_VERSION,
    KIND_NODE_IMAGES,
    KIND_VERSION,
)

_KIND_RANGE = f"{min(KIND_NODE_IMAGES, key=lambda v: tuple(map(int, v.split('.'))))} to " + max(
    KIND_NODE_IMAGES, key=lambda v: tuple(map(int, v.split(".")))
)

FIELD_DOCS: dict[str, str] = {
    # --- the fleet -------------------------------------------------------------------------
    "FleetSpec.fleetName": "Prefix of the clusters' names on their platform (kind, GKE, EKS) "
    "and of the MultiKueue origin; give each stack its own.",
    "FleetSpec.manager": "The manager cluster: where users submit jobs and Kueue's MultiKueue "
    "runs. Default: a kind cluster named `manager`.",
    "FleetSpec.workers": "The worker clusters (1 to 20: one MultiKueueConfig lists them all). "
    "An entry without `name` is named `worker<N>` by its position.",
    "FleetSpec.frameworks": "Job frameworks installed on every cluster that does not list its "
    "own: `batch`, `jobset`, `leaderworkerset`, `trainer` (needs `jobset`), "
    "`training-operator`, `mpi`, `kuberay`, `appwrapper`. `batch` (Kubernetes Jobs) is "
    "always there.",
    "FleetSpec.kueue": "Kueue's version, feature gates, integrations and settings, the same "
    "on every cluster unless said otherwise.",
    "FleetSpec.queues": "Flavors, topologies, ClusterQueues and LocalQueues: the same names on "
    "the manager and every worker. Left out entirely, the fleet gets one flavor "
    "`default-flavor`, one ClusterQueue `cluster-queue` (4 CPU and 8Gi per worker) and the "
    "LocalQueue `default/user-queue`; once `queues` is written, only what it lists exists.",
    "FleetSpec.credentials": "How the manager's MultiKueue reaches the workers.",
    "FleetSpec.dispatcher": "The dispatch controller that nominates a worker for each "
    "workload (controller/).",
    "FleetSpec.monitoring": "Scrape targets, alerts and the dashboard as Prometheus Operator "
    "objects (docs/operations.md, Dashboards and alerts).",
    "FleetSpec.workerKubeconfigs": "Secret: `<worker>: <kubeconfig>` for workers whose "
    "MultiKueue access you manage yourself (set with `pulumi config set --secret --path`). "
    "Others get a generated least-privilege kubeconfig.",
    # --- clusters --------------------------------------------------------------------------
    "ClusterSpec.name": "The cluster's name in the fleet: the MultiKueueCluster's "
    "name for a worker, and part of the platform's cluster name.",
    "ClusterSpec.provider": "Where the cluster comes from: `kind` (created on this machine's "
    "Docker), `existing` (a kubeconfig context), `gke` or `eks` (created in your cloud "
    "account). Its settings go in the block of the same name.",
    "ClusterSpec.kubernetesVersion": "Kubernetes `major.minor`, quoted (YAML reads 1.30 as "
    f"1.3). Unset: {DEFAULT_KUBERNETES_VERSION} for kind, GKE and EKS; what runs for "
    "`existing`.",
    "ClusterSpec.labels": "The cluster's labels: on a worker they are copied onto its "
    "MultiKueueCluster, where a dispatcher `clusterSelector` matches them.",
    "ClusterSpec.nodeLabels": "Labels put on the cluster's nodes (kind nodes, GKE and EKS node "
    "groups), for flavors and topologies that select nodes.",
    "ClusterSpec.frameworks": "This cluster's own frameworks instead of the fleet's "
    "`frameworks`. A worker needs every framework enabled on the manager.",
    "ClusterSpec.kind": "Settings when `provider: kind`.",
    "ClusterSpec.existing": "Settings when `provider: existing`.",
    "ClusterSpec.gke": "Settings when `provider: gke`.",
    "ClusterSpec.eks": "Settings when `provider: eks`.",
    "WorkerSpec.quotas": "This worker's nominal quotas, `<clusterQueue>: {<flavor>: "
    "{<resource>: quantity}}`, in place of the ClusterQueue's for the resources named.",
    "WorkerSpec.cordoned": "Take the worker out of service: the dispatcher nominates it for "
    "no new workload, and what it already admitted runs to the end. `mkf cordon` and "
    "`mkf uncordon` write it; `pulumi up` applies it.",
    "KindSettings.nodeImage": "The kind node image, pinned by `@sha256` digest. Unset: the "
    f"image kind {KIND_VERSION} publishes for `kubernetesVersion` ({_KIND_RANGE}).",
    "KindSettings.workerNodes": "Worker nodes besides the control plane (0 to 10).",
    "KindSettings.allowUnpinnedNodeImage": "Accept a `nodeImage` without a digest (a tag can "
    "move to an image this kind release does not support).",
    "KindSettings.registryMirrors": "Pull through mirrors: `<registry>: <url>`, for example "
    "`registry.k8s.io: http://mirror:5000`, or `<registry>: {url, ca, skipVerify, "
    "overridePath}` for containerd's host options; the nodes' containerd asks the mirror first and "
    "the registry after it. The key is the registry as the images name it (containerd looks "
    "mirrors up by that host as written): lower case, no `:443`, an IPv6 address in its short "
    "form (`[fd00::1]:5000`). A mirror that is a container on the same Docker is joined to the "
    "`kind` network. The fleet's objects keep their upstream image names. Changed later, the "
    "nodes' `hosts.toml` files are rewritten in place: the cluster is not made again.",
    "MirrorSettings.url": "The mirror, as the kind nodes reach it: `http://HOST[:PORT]` or "
    "`https://HOST[:PORT][/PATH]`; not a loopback address (`localhost`, `127.0.0.1`, `[::1]`, "
    "`0.0.0.0`), which inside a node is the node itself.",
    "MirrorSettings.ca": "CA certificates (PEM) the mirror's TLS certificate is checked "
    "against, where no public CA signs it: written beside hosts.toml on every node "
    "(`ca` in containerd's hosts.toml). https only.",
    "MirrorSettings.skipVerify": "Take the mirror's TLS certificate unchecked (containerd's "
    "`skip_verify`): insecure, for a test mirror. https only; not with `ca`.",
    "MirrorSettings.overridePath": "The URL's path is the registry API's root (containerd's "
    "`override_path`): containerd asks `<url>/<name>/manifests/...` rather than "
    "`<url>/v2/<name>/...`. Needs a path in the URL.",
    "ExistingSettings.context": "The kubeconfig context of the cluster; the stack keeps only "
    "that context, its cluster and its user.",
    "ExistingSettings.kubeconfigPath": "The kubeconfig file. Unset: `KUBECONFIG`, else "
    "`~/.kube/config`.",
    "ExistingSettings.server": "The API server's URL as the manager's pods reach it, when it "
    "differs from the kubeconfig's (a private endpoint).",
    "GkeSettings.project": "The Google Cloud project.",
    "GkeSettings.location": "The region or zone of the cluster.",
    "GkeSettings.machineType": "The machine type of the node pool.",
    "GkeSettings.nodeCount": "Nodes in the node pool (per zone for a regional cluster).",
    "EksSettings.region": "The AWS region.",
    "EksSettings.instanceType": "The EC2 instance type of the node group.",
    "EksSettings.nodeCount": "Nodes in the node group.",
    "GkeSettings.gpuPool": "A second node pool with NVIDIA GPUs (accelerators, the driver "
    "installed by GKE, the `nvidia.com/gpu=present:NoSchedule` taint). Unset: CPU nodes only.",
    "GkeGpuPool.accelerator": "The GPU type, such as `nvidia-tesla-t4`; GKE labels the nodes "
    "`cloud.google.com/gke-accelerator=<accelerator>`, which a flavor selects.",
    "GkeGpuPool.acceleratorCount": "GPUs per node.",
    "GkeGpuPool.machineType": "The machine type of the GPU nodes (T4 and V100 attach to N1 "
    "machines).",
    "GkeGpuPool.nodeCount": "GPU nodes (per zone for a regional cluster).",
    "GkeGpuPool.driverVersion": "The NVIDIA driver GKE installs: `LATEST`, `DEFAULT`, or "
    "`INSTALLATION_DISABLED` (you install it yourself).",
    "GkeGpuPool.nodeLabels": "More labels for the GPU nodes only.",
    "GkeGpuPool.zones": "The zones of the GPU nodes (where the accelerator is offered). "
    "Unset: every zone of the cluster's location, `nodeCount` in each.",
    "EksSettings.gpuPool": "A managed node group of GPU instances on the NVIDIA Bottlerocket "
    "AMI (drivers and device plugin in the image), tainted "
    "`nvidia.com/gpu=present:NoSchedule`. Unset: CPU nodes only.",
    "EksGpuPool.instanceType": "The GPU instance type, such as `g4dn.xlarge`; EKS labels the "
    "nodes `node.kubernetes.io/instance-type=<type>`, which a flavor can select.",
    "EksGpuPool.nodeCount": "GPU nodes in the node group.",
    "EksGpuPool.amiType": "`BOTTLEROCKET_x86_64_NVIDIA` or `BOTTLEROCKET_ARM_64_NVIDIA` (for "
    "Graviton GPU instances).",
    "EksGpuPool.nodeLabels": "More labels for the GPU nodes only, such as the one a flavor "
    "selects.",
    # --- Kueue -----------------------------------------------------------------------------
    "KueueSpec.install": "`managed`: the fleet installs Kueue from its pinned release; "
    "`existing`: Kueue is already on every cluster and the fleet only checks its API "
    "(docs/architecture.md, Bring your own Kueue).",
    "KueueSpec.version": "The Kueue release; only those this project pins "
    "(components/model/versions.py).",
    "KueueSpec.featureGates": "Feature gates written into Kueue's configuration file, "
    "`<Gate>: true|false`; unknown, removed and locked gates are refused (docs/kueue-rules.md).",
    "KueueSpec.featureGateFlags": "The same as `featureGates`, passed as `--feature-gates` "
    "flags instead; never both.",
    "KueueSpec.integrations": "Kueue integrations beyond those of the frameworks (`pod`, "
    "`deployment`, `statefulset`, ...).",
    "KueueSpec.externalFrameworks": "Job kinds run by controllers the fleet does not install, "
    "as `Kind.version.group` (or `{name, resource}`); MultiKueue's identity may reach them on "
    "the workers.",
    "KueueSpec.waitForPodsReady": "Kueue's waitForPodsReady (on by default since Kueue 0.19).",
    "KueueSpec.multiKueue": "MultiKueue's settings on the manager.",
    "ExternalFramework.name": "The kind as `Kind.version.group`, as Kueue parses it.",
    "ExternalFramework.resource": "Its plural resource name for RBAC. Unset: the kind in "
    "lower case made plural as CRD generators do (`Policy` -> `policies`, `Index` -> "
    "`indexes`, `Gateway` -> `gateways`); set it for an irregular plural.",
    "WaitForPodsReady.enabled": "Wait until a workload's pods are ready, evicting it after "
    "`timeout`.",
    "WaitForPodsReady.timeout": "How long a workload may take to get its pods ready (a Go "
    "duration).",
    "WaitForPodsReady.blockAdmission": "Admit nothing else while a workload waits for its pods.",
    "WaitForPodsReady.recoveryTimeout": "How long a running workload may have pods not ready "
    "before it is evicted. Unset: Kueue's default (none).",
    "WaitForPodsReady.requeuingStrategy": "When and how often an evicted workload is queued again.",
    "WaitForPodsReady.onManager": "Whether the manager waits too. Unset: it does, unless it "
    "runs LeaderWorkerSets or StatefulSets (their status is not mirrored back, so Kueue would "
    "evict them); `false` acknowledges that note, `true` there is refused.",
    "RequeuingStrategy.timestamp": "Which time orders requeued workloads: `Eviction` or "
    "`Creation`.",
    "RequeuingStrategy.backoffLimitCount": "Requeues before a workload is deactivated. "
    "Unset: no limit.",
    "RequeuingStrategy.backoffBaseSeconds": "The first backoff before a requeue, doubled "
    "each time.",
    "RequeuingStrategy.backoffMaxSeconds": "The longest backoff.",
    "MultiKueueSettings.origin": "The label value marking this manager's copies on the "
    "workers; two managers sharing a worker need two origins. Unset: `mkf-<fleetName>`.",
    "MultiKueueSettings.gcInterval": "How often MultiKueue removes orphaned copies on the workers.",
    "MultiKueueSettings.workerLostTimeout": "How long a workload admitted on a worker that "
    "stopped answering stays there before it is queued again.",
    # --- queues ----------------------------------------------------------------------------
    "QueuesSpec.flavors": "ResourceFlavors. Empty unless `queues` is left out entirely.",
    "QueuesSpec.topologies": "Topologies for topology-aware scheduling.",
    "QueuesSpec.clusterQueues": "ClusterQueues, on the manager and every worker.",
    "QueuesSpec.localQueues": "LocalQueues; their namespaces are created on every cluster.",
    "FlavorSpec.name": "The ResourceFlavor's name.",
    "FlavorSpec.nodeLabels": "Node labels the flavor's pods are placed on.",
    "FlavorSpec.nodeTaints": "Taints of the flavor's nodes (Kueue admits only workloads that "
    "tolerate them).",
    "FlavorSpec.tolerations": "Tolerations added to the pods admitted on this flavor.",
    "FlavorSpec.topology": "The name of a topology in `queues.topologies`: this flavor is "
    "topology-aware (then `nodeLabels` is needed, and it cannot change later).",
    "Taint.key": "The taint's key.",
    "Taint.value": "The taint's value.",
    "Taint.effect": "`NoSchedule`, `PreferNoSchedule` or `NoExecute`.",
    "Toleration.key": "The taint key tolerated; unset with `operator: Exists` tolerates all.",
    "Toleration.operator": "`Equal` (the value must match) or `Exists`.",
    "Toleration.value": "The value, with `operator: Equal`.",
    "Toleration.effect": "The effect tolerated; unset: all.",
    "Toleration.tolerationSeconds": "How long a `NoExecute` taint is tolerated.",
    "TopologySpec.name": "The Topology's name.",
    "TopologySpec.levels": "Node labels from the widest level to the narrowest, hostname "
    "last; they cannot change later.",
    "ClusterQueueSpec.name": "The ClusterQueue's name.",
    "ClusterQueueSpec.resourceGroups": "At least one: resources covered together, and the "
    "flavors that offer them.",
    "ClusterQueueSpec.cohort": "The cohort it lends to and borrows from.",
    "ClusterQueueSpec.queueingStrategy": "`BestEffortFIFO` or `StrictFIFO` (nothing behind a "
    "head that does not fit is admitted).",
    "ClusterQueueSpec.namespaceSelector": "Namespaces whose LocalQueues may use it; `{}` is "
    "every namespace.",
    "ClusterQueueSpec.preemption": "Kueue's preemption settings, as in the ClusterQueue API.",
    "ClusterQueueSpec.flavorFungibility": "Kueue's flavor fungibility, as in the ClusterQueue API.",
    "ClusterQueueSpec.managerQuota": "The manager's quota, `<flavor>: {<resource>: "
    "quantity}`. Unset: the sum of the workers' quotas; otherwise a warning shows the "
    "difference.",
    "ResourceGroup.coveredResources": "The resources of this group (`cpu`, `memory`, "
    "`nvidia.com/gpu`, ...). Unset: those of the first flavor.",
    "ResourceGroup.flavors": "The flavors of the group, in the order Kueue tries them, each "
    "with a quota per covered resource.",
    "FlavorQuotas.name": "A flavor from `queues.flavors`.",
    "FlavorQuotas.resources": "`<resource>: quantity` (memory with a unit: `8Gi`; devices "
    "as whole numbers), or `<resource>: {nominalQuota, borrowingLimit, lendingLimit}`; "
    "the quota of each worker unless its `quotas` says otherwise.",
    "ResourceQuota.nominalQuota": "The quota of this resource in this flavor.",
    "ResourceQuota.borrowingLimit": "How much more it may borrow from its cohort.",
    "ResourceQuota.lendingLimit": "How much of its quota it may lend to its cohort.",
    "LabelSelector.matchLabels": "Labels that must all match.",
    "LabelSelector.matchExpressions": "Expressions that must all hold.",
    "LabelSelectorRequirement.key": "The label key.",
    "LabelSelectorRequirement.operator": "`In`, `NotIn`, `Exists` or `DoesNotExist`.",
    "LabelSelectorRequirement.values": "The values, for `In` and `NotIn`.",
    "Preemption.reclaimWithinCohort": "`Never`, `LowerPriority` or `Any`.",
    "Preemption.withinClusterQueue": "`Never`, `LowerPriority` or `LowerOrNewerEqualPriority`.",
    "Preemption.borrowWithinCohort": "Preemption while borrowing (needs "
    "`reclaimWithinCohort` other than `Never`).",
    "BorrowWithinCohort.policy": "`Never` or `LowerPriority`.",
    "BorrowWithinCohort.maxPriorityThreshold": "Only workloads at or below this priority "
    "may be preempted.",
    "FlavorFungibility.whenCanBorrow": "`MayStopSearch` or `TryNextFlavor`.",
    "FlavorFungibility.whenCanPreempt": "`MayStopSearch` or `TryNextFlavor`.",
    "FlavorFungibility.preference": "`BorrowingOverPreemption` or `PreemptionOverBorrowing`.",
    "LocalQueueSpec.namespace": "Its namespace (created on every cluster).",
    "LocalQueueSpec.name": "The LocalQueue's name: users submit to it; MultiKueue uses the "
    "same name on the workers.",
    "LocalQueueSpec.clusterQueue": "The ClusterQueue it feeds; changing it replaces the "
    "LocalQueue (`render --diff` marks it).",
    # --- credentials and dispatcher ----------------------------------------------------------
    "CredentialsSpec.mode": "`kubeconfigSecret`: a kubeconfig Secret per worker on the "
    "manager. `clusterProfile`: a ClusterProfile per worker and a token Secret read by an "
    "access-provider plugin inside Kueue.",
    "CredentialsSpec.clusterProfile": "Settings of `clusterProfile` mode.",
    "ClusterProfileSettings.pluginMount": "How the plugin gets into Kueue's pod: `auto` "
    "(image volume on Kubernetes 1.35+, else an init container), `initContainer`, "
    "`imageVolume` or `customImage`.",
    "ClusterProfileSettings.pluginImage": "The access-provider plugin's image. With "
    "`initContainer` it needs `sh` and `cp`; the copy runs as Kueue's user (65532), so "
    "the plugin file must be readable by others.",
    "ClusterProfileSettings.pluginPath": "Where the plugin binary is inside Kueue's pod: "
    "under `/plugins` with `imageVolume` and `initContainer` (the image's `/bin/NAME` is "
    "`/plugins/bin/NAME`).",
    "ClusterProfileSettings.accessProvider": "The access provider's name in Kueue's config "
    "and the ClusterProfiles.",
    "ClusterProfileSettings.kueueImage": "With `pluginMount: customImage`: a Kueue image "
    "that already holds the plugin at `pluginPath`.",
    "DispatcherSpec.enabled": "Run the dispatcher (Kueue's `dispatcherName` set to it); off: "
    "Kueue's own dispatching.",
    "DispatcherSpec.name": "The dispatcher name Kueue is given.",
    "DispatcherSpec.run": "`cluster`: a Deployment on the manager. `local`: no Deployment "
    "and no image; the stack outputs `dispatcherSettings` and `dispatcherKubeconfig` (a "
    "secret with the dispatcher ServiceAccount's token) for `python -m controller run` "
    "(docs/dispatcher.md).",
    "DispatcherSpec.image": "A dispatcher image to run. Unset: built from controller/ at "
    "deploy time (needs Docker) and pinned by digest.",
    "DispatcherSpec.registry": "Where that build is pushed when the manager is not on kind.",
    "DispatcherSpec.baseImage": "The image that build starts FROM (controller/Dockerfile's "
    "`BASE` build argument). Unset: `python:3.11-slim-bookworm`. For a host that cannot pull "
    "it: a copy in a registry it can reach, or the stand-in `python -m kindnode build "
    "--for-stack STACK` builds (it sets this in stacks/local/STACK.yaml).",
    "DispatcherSpec.platform": "The platform of the manager's nodes the image is built for: "
    "`linux/amd64` or `linux/arm64`.",
    "DispatcherSpec.inventory": "Grant the rights for inventory automation: ClusterProfiles "
    "joining MultiKueue by themselves (docs/dispatcher.md).",
    "DispatcherSpec.replicas": "Replicas (1 to 5); one leader writes.",
    "DispatcherSpec.policy": "The default DispatchPolicy: for every ClusterQueue no other "
    "policy names.",
    "MonitoringSpec.prometheusOperator": "Install, on every cluster, a ServiceMonitor for "
    "Kueue's metrics, and on the manager one for the dispatcher's (when it runs in the "
    "cluster), monitoring/alerts.yaml as a PrometheusRule and monitoring/"
    "fleet-dashboard.json as a ConfigMap for Grafana's dashboard sidecar. Each cluster must "
    "serve the Prometheus Operator's CRDs: `up` stops, naming the cluster, where it does not.",
    "MonitoringSpec.labels": "Labels on those objects, for the Prometheus's "
    "`serviceMonitorSelector` and `ruleSelector` (kube-prometheus-stack: `{release: NAME}`).",
    "MonitoringSpec.dashboardNamespace": "Where the dashboard ConfigMap goes on the manager: a "
    "namespace Grafana's sidecar searches. Unset: the fleet's namespace.",
    "DispatchPolicyDefaults.strategy": "`BestFit` (pack, the default: whole workers stay "
    "free for the jobs that need one), `MostFreeQuota` (spread) or `OrderedSpillover` "
    "(config order).",
    "DispatchPolicyDefaults.clustersToNominate": "Workers nominated at once (1 to 20).",
    "DispatchPolicyDefaults.widenAfter": "Nominate that many more workers each time this "
    "passes without admission.",
    "DispatchPolicyDefaults.whenNothingFits": "`WaitOnBest` (where the shortfall is "
    "smallest) or `LeastLoaded`.",
    "DispatchPolicyDefaults.hedgeClusters": "A workload that fits on no worker now and needs "
    "`hedgeSharePercent` or more of every queue that could hold it is nominated to this "
    "many workers at once (1 to 20; 1 is off; 5 by default: see docs/dispatcher.md).",
    "DispatchPolicyDefaults.hedgeSharePercent": "The share of each queue (1 to 100) that "
    "makes a workload one to hedge.",
    "DispatchPolicyDefaults.clusterSelector": "A flat map of worker labels a worker must "
    "all have, `{accelerator: nvidia-tesla-t4}` (in a DispatchPolicy object it is "
    "`clusterSelector.matchLabels`).",
}

# Defaults the model fills in from other values, in words (the default column shows these
# instead of the model's own, which for these fields says nothing a person can use).
FIELD_DEFAULTS: dict[str, str] = {
    "FleetSpec.fleetName": "the stack's name",
    "MonitoringSpec.dashboardNamespace": "multikueue-fleet-system",
}
