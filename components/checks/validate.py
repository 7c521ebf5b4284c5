"""Fleet-wide checks on a FleetSpec, run before any resource is registered.

The typed model (spec.py) has already refused every value of the wrong shape; the rules
here look across values: references between queues, uniqueness, what the manager and the
workers must agree on. Each rule is a plain function of the spec that yields Problems
naming the config path at fault and how to fix it; RULES lists them all, and every
problem is reported at once. The rules come from what Kueue 0.19 refuses at start-up or
silently breaks on (research/kueue-api.md), and from what MultiKueue needs across manager
and workers.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Callable, Iterable, Iterator

import yaml

from components.checks import cloud, consumers, kueue_rules
from components.checks.existing_kueue import existing_kueue
from components.checks.quantities import manager_quota_sums_fit, quota_quantities
from components.model import kueue_gates, quantity
from components.model.fieldtypes import is_label_value, minor_tuple
from components.model.frameworks import (
    FRAMEWORKS,
    REMOVED_FRAMEWORKS,
    framework_of_integration,
    known_integrations,
)
from components.model.problems import Problem, did_you_mean, key_path
from components.model.spec import GPU_TAINT, ClusterSpec, FleetSpec, Taint, Toleration
from components.model.versions import IMAGE_VOLUME_MIN_KUBERNETES
from components.objects.kubeconfig import (
    KUBECONFIG_FIX,
    context_cluster,
    existing_kubeconfig_path,
    kueue_rejections,
)
from components.objects.kueue_config import (
    plugin_image_problems,
    plugin_path_problems,
    pods_ready_problems,
)
from components.objects.kueue_install import plugin_mount
from controller.model import CORDONED_LABEL
from controller.policy_api import MAX_SELECTOR_LABELS

MAX_WORKERS = 20  # MultiKueueConfig.spec.clusters holds at most 20 names
BUILTIN_DISPATCHERS = (
    "kueue.x-k8s.io/multikueue-dispatcher-all-at-once",
    "kueue.x-k8s.io/multikueue-dispatcher-incremental",
)
RESERVED_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease", "kueue-system")
KIND_VERSION_GROUP = re.compile(r"^[A-Z][A-Za-z0-9]*\.v[0-9][a-z0-9]*\.[a-z0-9.-]+$")
# kind names the node container <cluster>-control-plane, a hostname (<= 63 characters).
KIND_NAME_MAX = 63 - len("-control-plane")


Rule = Callable[[FleetSpec], Iterable[Problem]]


def _error(path: str, message: str, hint: str = "") -> Problem:
    return Problem(path, message, hint)


def _warn(path: str, message: str, hint: str = "") -> Problem:
    return Problem(path, message, hint, "warning")


def _unique(names: Iterable[tuple[str, str]], what: str, hint: str = "") -> Iterator[Problem]:
    seen: dict[str, str] = {}
    for name, path in names:
        if name in seen:
            yield _error(
                path,
                f"duplicate {what} '{name}' (also at {seen[name]})",
                hint or f"give each {what} its own name",
            )
        else:
            seen[name] = path


def _gates(spec: FleetSpec) -> dict[str, bool]:
    return {**spec.kueue.feature_gates, **spec.kueue.feature_gate_flags}


# --- clusters ------------------------------------------------------------------------------


def worker_count(spec: FleetSpec) -> Iterator[Problem]:
    """One to MAX_WORKERS workers: one MultiKueueConfig lists them all."""
    if not spec.workers:
        yield _error("workers", "a fleet needs at least one worker", "add an entry to workers")
    if len(spec.workers) > MAX_WORKERS:
        yield _error(
            "workers",
            f"{len(spec.workers)} workers, but one MultiKueueConfig holds at most "
            f"{MAX_WORKERS} clusters",
            "split the fleet into several stacks (one manager each), or drop workers",
        )


def cluster_names_unique(spec: FleetSpec) -> Iterator[Problem]:
    yield from _unique(
        ((c.name, key_path(c.path, "name")) for c in spec.clusters),
        "cluster name",
        "give each cluster its own name",
    )


def kind_name_length(spec: FleetSpec) -> Iterator[Problem]:
    """kind names the node container <cluster>-control-plane, a hostname."""
    for c in spec.clusters:
        physical = c.physical_name(spec.fleet_name)
        if c.provider == "kind" and len(physical) > KIND_NAME_MAX:
            yield _error(
                key_path(c.path, "name"),
                f"kind cluster name '{physical}' is longer than {KIND_NAME_MAX} characters",
                "shorten fleetName or the cluster name",
            )


def kind_workers_need_a_kind_manager(spec: FleetSpec) -> Iterator[Problem]:
    for c in spec.workers:
        if c.provider == "kind" and spec.manager.provider != "kind":
            yield _error(
                key_path(c.path, "provider"),
                f"kind worker '{c.name}' cannot be reached by a {spec.manager.provider} manager",
                "a kind worker is reachable only from a kind manager on the same Docker "
                "host; use kind for the manager too, or another provider here",
            )


# The node labels a kubelet may set on its own Node in the kubernetes.io and k8s.io
# namespaces (kubernetes v1.35 staging/src/k8s.io/kubelet/pkg/apis/well_known_labels.go,
# kubeletLabels and kubeletLabelNamespaces, from k8s.io/api/core/v1 well_known_labels.go).
# Any other key there makes the kubelet refuse to start (cmd/kubelet/app/options/options.go
# ValidateKubeletFlags: "unknown 'kubernetes.io' or 'k8s.io' labels specified with
# --node-labels"), which is how kind (kubeadm's node-labels) and a cloud node pool pass them.
KUBELET_LABELS = (
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
)
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")


def _in_namespace(prefix: str, namespace: str) -> bool:
    return prefix == namespace or prefix.endswith("." + namespace)


def kubelet_refuses_label(key: str) -> bool:
    """kubelet's own rule: a key under kubernetes.io or k8s.io that is neither in its
    allowed set nor under one of its allowed namespaces."""
    prefix = key.split("/", 1)[0] if "/" in key else ""
    if not any(_in_namespace(prefix, ns) for ns in ("kubernetes.io", "k8s.io")):
        return False
    if key in KUBELET_LABELS:
        return False
    return not any(_in_namespace(prefix, ns) for ns in KUBELET_LABEL_NAMESPACES)


def node_labels_kubelet_accepts(spec: FleetSpec) -> Iterator[Problem]:
    """nodeLabels of a cluster the stack creates reach the kubelet's --node-labels."""
    for c in spec.clusters:
        if c.provider == "existing":
            continue
        labelled = [(key_path(c.path, "nodeLabels"), c.node_labels)]
        settings = c.gke if c.provider == "gke" else c.eks if c.provider == "eks" else None
        if settings is not None and settings.gpu_pool is not None:
            pool_path = key_path(key_path(c.path, c.provider), "gpuPool.nodeLabels")
            labelled.append((pool_path, settings.gpu_pool.node_labels))
        for where, key in ((w, k) for w, labels in labelled for k in labels):
            if kubelet_refuses_label(key):
                yield _error(
                    key_path(where, key),
                    f"the kubelet refuses to start with node label '{key}': under "
                    "kubernetes.io and k8s.io it sets only its own labels",
                    "use a key under your own domain (example.com/...), or one kubelet "
                    f"allows: {', '.join(KUBELET_LABELS)}, or a *.{KUBELET_LABEL_NAMESPACES[0]} "
                    f"or *.{KUBELET_LABEL_NAMESPACES[1]} key",
                )


GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
# Label domains set on nodes by a cloud provider (or by add-ons such as NVIDIA's feature
# discovery) whose keys the stack cannot list: a flavor selecting one is not second-guessed,
# except the other cloud's (a GKE label never appears on an EKS node, nor the reverse).
_PROVIDER_LABEL_DOMAINS = {
    "gke": ("cloud.google.com", "gke.io"),
    "eks": ("amazonaws.com",),
}
_OTHER_SET_LABEL_DOMAINS = ("kubernetes.io", "k8s.io", "nvidia.com", "x-k8s.io")


def gpu_node_labels(cluster: ClusterSpec) -> dict[str, str]:
    """The labels, with their values, that the nodes of a cluster's GPU pool carry as far as
    the stack knows them: the cluster's and the pool's nodeLabels, and what the provider sets
    itself. GKE labels GPU nodes cloud.google.com/gke-accelerator=<accelerator>
    (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus, "Run GPUs in GKE Standard
    node pools"); the cloud provider sets node.kubernetes.io/instance-type=<machine or
    instance type> on both (a kubelet well-known label, https://kubernetes.io/docs/reference/
    labels-annotations-taints/#nodekubernetesioinstance-type). EKS sets no accelerator label:
    there a flavor selects the instance type or a nodeLabel of the pool."""
    settings = cluster.gke if cluster.provider == "gke" else cluster.eks
    assert settings is not None and settings.gpu_pool is not None
    pool = settings.gpu_pool
    labels = {**cluster.node_labels, **pool.node_labels}
    if cluster.provider == "gke":
        labels[GKE_ACCELERATOR_LABEL] = pool.accelerator
        labels[INSTANCE_TYPE_LABEL] = pool.machine_type
    else:
        labels[INSTANCE_TYPE_LABEL] = pool.instance_type
    return labels


def _tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Kubernetes' Toleration.ToleratesTaint (k8s.io/api core/v1 toleration.go)."""
    if toleration.effect is not None and toleration.effect != taint.effect:
        return False
    if toleration.key is None:
        return toleration.operator == "Exists"
    if toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    return (toleration.value or "") == (taint.value or "")


def _label_set_elsewhere(provider: str, key: str) -> bool:
    """A key someone other than the stack may set on the node (not second-guessed)."""
    prefix = key.split("/", 1)[0] if "/" in key else ""
    domains = _PROVIDER_LABEL_DOMAINS[provider] + _OTHER_SET_LABEL_DOMAINS
    return any(_in_namespace(prefix, d) for d in domains)


def gpu_quota_has_gpu_nodes(spec: FleetSpec) -> Iterator[Problem]:
    """A GKE or EKS worker the stack creates that offers NVIDIA GPUs in its quota needs a
    GPU node pool (gke.gpuPool, eks.gpuPool), and every node label a GPU flavor selects
    (Kueue puts a flavor's nodeLabels in the pods' nodeSelector) must be on that pool's
    nodes with that value: on GKE the accelerator (cloud.google.com/gke-accelerator), on
    both the instance type, or a nodeLabel the stack gives them. Otherwise the workloads
    sent there wait for nodes that never come. Said once per worker and flavor."""
    from components.objects.queues import worker_quotas

    flavors = {f.name: f for f in spec.queues.flavors}
    for w in spec.workers:
        settings = w.gke if w.provider == "gke" else w.eks if w.provider == "eks" else None
        if settings is None:
            continue
        pool = settings.gpu_pool
        offered: dict[str, tuple[str, str]] = {}  # flavor -> (ClusterQueue, resource)
        for cq in spec.queues.cluster_queues:
            for flavor, resources in worker_quotas(cq, w).items():
                for res, q in resources.items():
                    if res.startswith("nvidia.com/") and quantity.parse(q.nominal) > 0:
                        offered.setdefault(flavor, (cq.name, res))
        if not offered:
            continue
        where = key_path(key_path(w.path, w.provider), "gpuPool")
        if pool is None:
            flavor, (cq_name, res) = next(iter(offered.items()))
            yield _warn(
                where,
                f"worker '{w.name}' offers {res} (flavor '{flavor}' of ClusterQueue "
                f"'{cq_name}') but the stack gives it no GPU nodes",
                f"add {w.provider}.gpuPool, or set that quota to 0 in {key_path(w.path, 'quotas')}",
            )
            continue
        on_nodes = gpu_node_labels(w)
        for flavor in offered:
            spec_flavor = flavors.get(flavor)
            untolerated = [
                t
                for t in (spec_flavor.node_taints if spec_flavor else ())
                if t.key == GPU_TAINT[0]
                and t.effect != "PreferNoSchedule"
                and not any(_tolerates(tol, t) for tol in spec_flavor.tolerations)
            ]
            if untolerated and spec_flavor is not None:
                # Kueue admits on a flavor only a workload whose pod template tolerates its
                # nodeTaints, the flavor's own tolerations included (kueue v0.19.2
                # pkg/scheduler/flavorassigner/flavorassigner.go:1239,
                # FindMatchingUntoleratedTaint(flavor.Spec.NodeTaints, podSpec.Tolerations +
                # flavor.Spec.Tolerations)); the ExtendedResourceToleration admission plugin
                # tolerates the GPU taint on the pods only, after admission.
                yield _warn(
                    key_path(spec_flavor.path, "nodeTaints"),
                    f"flavor '{flavor}' declares the GPU nodes' taint {GPU_TAINT[0]} but does "
                    "not tolerate it: Kueue admits there only workloads whose pod templates "
                    "tolerate it themselves",
                    f"add a toleration of {GPU_TAINT[0]} to the flavor's tolerations (Kueue "
                    "adds it to the pods it admits there), or remove the taint from nodeTaints "
                    "(pods asking for GPUs are given the toleration by the API server)",
                )
            selected = spec_flavor.node_labels if spec_flavor else {}
            for key, wanted in selected.items():
                has = on_nodes.get(key)
                if key == GKE_ACCELERATOR_LABEL and w.provider == "gke" and has != wanted:
                    yield _warn(
                        key_path(where, "accelerator"),
                        f"flavor '{flavor}' selects {GKE_ACCELERATOR_LABEL}={wanted} but the "
                        f"GPU pool of worker '{w.name}' has {pool.accelerator}",
                        "make the flavor's node label and the pool's accelerator the same",
                    )
                elif has is not None and has != wanted:
                    yield _warn(
                        where,
                        f"flavor '{flavor}' selects {key}={wanted} but the GPU nodes of worker "
                        f"'{w.name}' carry {key}={has}",
                        "make the flavor's node label and the GPU pool's the same",
                    )
                elif has is None and not _label_set_elsewhere(w.provider, key):
                    yield _warn(
                        where,
                        f"flavor '{flavor}' selects node label {key}={wanted}, which the GPU "
                        f"nodes of worker '{w.name}' do not carry"
                        + (" (EKS sets no accelerator label)" if w.provider == "eks" else ""),
                        f"select {INSTANCE_TYPE_LABEL}"
                        + (f" or {GKE_ACCELERATOR_LABEL}" if w.provider == "gke" else "")
                        + f", or add the label to {w.provider}.gpuPool.nodeLabels",
                    )


# --- frameworks and integrations -----------------------------------------------------------


def _framework_name_problem(name: str, path: str, list_path: str) -> Problem | None:
    if name in REMOVED_FRAMEWORKS:
        return _error(path, REMOVED_FRAMEWORKS[name], f"remove '{name}' from {list_path}")
    if name not in FRAMEWORKS:
        return _error(
            path,
            f"unknown framework '{name}'",
            f"{did_you_mean(name, FRAMEWORKS)}known frameworks: {', '.join(FRAMEWORKS)}",
        )
    return None


def _framework_list(
    written: tuple[str, ...], names: tuple[str, ...], path: str, where: str
) -> Iterator[Problem]:
    """`written`: the list as the file has it; `names`: what the cluster gets (batch added)."""
    for i, name in enumerate(written):
        problem = _framework_name_problem(name, key_path(path, i), path)
        if problem is not None:
            yield problem
            continue
        for needed in FRAMEWORKS[name].requires:
            if needed not in names:
                yield _error(
                    path, f"'{name}' needs '{needed}' {where}", f"add '{needed}' to {path}"
                )


def known_frameworks(spec: FleetSpec) -> Iterator[Problem]:
    """A wrong name once, where it is written: the fleet's `frameworks` (which every
    cluster without a list of its own takes), or a cluster's own list."""
    if any(c.written_frameworks is None for c in spec.clusters):
        yield from _framework_list(
            spec.frameworks,
            spec.frameworks,
            "frameworks",
            "(the frameworks of every cluster without its own)",
        )
    for c in spec.clusters:
        if c.written_frameworks is not None:
            path = key_path(c.path, "frameworks")
            yield from _framework_list(
                c.written_frameworks, c.frameworks, path, f"on cluster '{c.name}'"
            )


def workers_run_the_managers_frameworks(spec: FleetSpec) -> Iterator[Problem]:
    for w in spec.workers:
        missing = [f for f in spec.manager.frameworks if f in FRAMEWORKS and f not in w.frameworks]
        for name in missing:
            yield _error(
                key_path(w.path, "frameworks"),
                f"'{name}' is enabled on the manager but not installed on worker '{w.name}'",
                f"add '{name}' to {key_path(w.path, 'frameworks')}: MultiKueue watches "
                "every enabled kind on every worker and marks the whole worker inactive "
                "when one is missing",
            )


def integrations_are_known_and_installed(spec: FleetSpec) -> Iterator[Problem]:
    known = known_integrations()
    for i, name in enumerate(spec.kueue.integrations):
        path = key_path("kueue.integrations", i)
        if name not in known:
            yield _error(
                path,
                f"'{name}' is not a Kueue integration",
                f"{did_you_mean(name, known)}known: {', '.join(known)}",
            )
            continue
        fw = framework_of_integration(name)
        if fw is None:
            continue
        for c in spec.clusters:
            if fw.key not in c.frameworks:
                yield _error(
                    path,
                    f"'{name}' needs framework '{fw.key}' on cluster '{c.name}'",
                    f"add '{fw.key}' to {key_path(c.path, 'frameworks')}, or drop the integration",
                )


def external_frameworks(spec: FleetSpec) -> Iterator[Problem]:
    builtin_kinds = {fw_name.split("/")[-1] for fw_name in known_integrations()}
    seen: set[str] = set()
    for ext in spec.kueue.external_frameworks:
        path = key_path(ext.path, "name")
        if not KIND_VERSION_GROUP.match(ext.name):
            yield _error(
                path,
                f"'{ext.name}' is not Kind.version.group",
                "write it like PipelineRun.v1.tekton.dev (Kind is case-sensitive)",
            )
            continue
        if ext.name in seen:
            yield _error(path, f"'{ext.name}' is listed twice", "list each kind once")
        seen.add(ext.name)
        if ext.parts[0].lower() in builtin_kinds:
            yield _error(
                path,
                f"'{ext.name}' has a built-in Kueue integration",
                "enable it under kueue.integrations or a cluster's frameworks instead",
            )


# --- Kueue ---------------------------------------------------------------------------------


def gates_in_one_place(spec: FleetSpec) -> Iterator[Problem]:
    if spec.kueue.feature_gates and spec.kueue.feature_gate_flags:
        yield _error(
            "kueue.featureGateFlags",
            "feature gates are set both in the config and as --feature-gates flags",
            "Kueue refuses to start with both; move every gate to kueue.featureGates",
        )


def known_feature_gates(spec: FleetSpec) -> Iterator[Problem]:
    """Kueue stops at start-up on an unknown gate or a locked one set to another value."""
    for key in ("featureGates", "featureGateFlags"):
        gates = spec.kueue.feature_gates if key == "featureGates" else spec.kueue.feature_gate_flags
        for name, value in gates.items():
            path = key_path(key_path("kueue", key), name)
            if name in kueue_gates.REMOVED_GATES:
                yield _error(
                    path,
                    f"feature gate '{name}' does not exist in Kueue 0.19 "
                    f"({kueue_gates.REMOVED_GATES[name]})",
                    "delete it: Kueue stops at start-up on an unknown gate",
                )
                continue
            gate = kueue_gates.GATES.get(name)
            if gate is None:
                yield _error(
                    path,
                    f"unknown feature gate '{name}'",
                    f"{did_you_mean(name, kueue_gates.GATES)}Kueue stops at start-up on an "
                    "unknown gate",
                )
            elif gate.locked and value != gate.default:
                yield _error(
                    path,
                    f"feature gate '{name}' is locked to {str(gate.default).lower()} in Kueue 0.19",
                    "delete it: Kueue refuses to change a locked gate",
                )
            elif gate.locked:
                yield _warn(
                    path,
                    f"feature gate '{name}' is locked in 0.19 and will be removed",
                    "delete it now, or the next Kueue minor will refuse to start",
                )


def gate_dependencies(spec: FleetSpec) -> Iterator[Problem]:
    """Gates Kueue refuses to start with unless the gates they need are on
    (kueue_gates.gate_problems)."""
    prefix = "kueue.featureGateFlags" if spec.kueue.feature_gate_flags else "kueue.featureGates"
    yield from kueue_gates.gate_problems(_gates(spec), prefix)


def topology_flavors_need_tas(spec: FleetSpec) -> Iterator[Problem]:
    if not kueue_gates.effective(_gates(spec), "TopologyAwareScheduling") and any(
        f.topology for f in spec.queues.flavors
    ):
        yield _error(
            "kueue.featureGates.TopologyAwareScheduling",
            "TopologyAwareScheduling is off but a flavor uses a topology",
            "turn the gate on or remove `topology` from the flavors",
        )


def pods_ready(spec: FleetSpec) -> Iterator[Problem]:
    """waitForPodsReady on a manager whose jobs' status MultiKueue does not mirror
    (kueue_config.pods_ready_problems)."""
    yield from pods_ready_problems(spec)


def multikueue_origin(spec: FleetSpec) -> Iterator[Problem]:
    """The origin (mkf-<fleetName> by default) is stamped as a label value."""
    origin = spec.kueue.multikueue.origin or ""
    if not is_label_value(origin) or not origin:
        yield _error(
            "kueue.multiKueue.origin",
            f"'{origin}' is not a valid label value",
            "Kueue stamps the origin as a label on remote objects: use at most 63 letters, "
            "digits, '-', '_', '.'",
        )


# --- credentials and dispatcher ------------------------------------------------------------


def cluster_profile_mode(spec: FleetSpec) -> Iterator[Problem]:
    if spec.credentials.mode != "clusterProfile":
        return
    cp = spec.credentials.cluster_profile
    if _gates(spec).get("MultiKueueClusterProfile") is False:
        yield _error(
            "kueue.featureGates.MultiKueueClusterProfile",
            "ClusterProfile mode needs the MultiKueueClusterProfile gate, which is set to false",
            "remove the entry (the stack turns the gate on) or use "
            "credentials.mode: kubeconfigSecret",
        )
    if not spec.dispatcher.enabled:
        yield _error(
            "dispatcher.enabled",
            "ClusterProfile mode needs the dispatcher: it writes the profiles' "
            "status.accessProviders, without which Kueue cannot reach a worker",
            "set dispatcher.enabled: true, or use credentials.mode: kubeconfigSecret",
        )
    version = spec.manager.kubernetes_version
    # An existing Kueue gets the plugin from whoever installed it (existing_kueue).
    mounts = spec.kueue.install == "managed"
    if mounts and cp.plugin_mount in ("imageVolume", "auto") and version is None:
        yield _error(
            "manager.kubernetesVersion",
            "the manager's Kubernetes version is unknown, so the access-provider plugin "
            "mount cannot be chosen",
            "set manager.kubernetesVersion, or credentials.clusterProfile.pluginMount to "
            "initContainer or customImage",
        )
    elif (
        mounts
        and cp.plugin_mount == "imageVolume"
        and minor_tuple(version or "0.0") < IMAGE_VOLUME_MIN_KUBERNETES
    ):
        yield _error(
            "credentials.clusterProfile.pluginMount",
            f"image volumes need Kubernetes 1.35 or newer; the manager runs {version}",
            "use pluginMount: initContainer (or auto, which picks it)",
        )
    yield from plugin_image_problems(spec, plugin_mount(spec, spec.manager))
    yield from plugin_path_problems(spec, plugin_mount(spec, spec.manager))
    if mounts and cp.plugin_mount == "customImage" and not cp.kueue_image:
        yield _error(
            "credentials.clusterProfile.kueueImage",
            "pluginMount customImage needs the Kueue image that holds the plugin",
            "set credentials.clusterProfile.kueueImage",
        )
    for name in spec.worker_kubeconfigs:
        yield _error(
            key_path("workerKubeconfigs", name),
            "worker kubeconfigs are not used in ClusterProfile mode",
            "remove workerKubeconfigs or use credentials.mode: kubeconfigSecret",
        )


def kueue_image_needs_custom_mount(spec: FleetSpec) -> Iterator[Problem]:
    cp = spec.credentials.cluster_profile
    managed = spec.kueue.install == "managed"  # else existing_kueue refuses kueueImage
    if managed and cp.kueue_image and cp.plugin_mount != "customImage":
        yield _error(
            "credentials.clusterProfile.kueueImage",
            "kueueImage is used only with pluginMount: customImage",
            "remove it, or set pluginMount: customImage",
        )


def worker_kubeconfigs(spec: FleetSpec) -> Iterator[Problem]:
    workers = {w.name for w in spec.workers}
    for name, secret in spec.worker_kubeconfigs.items():
        path = key_path("workerKubeconfigs", name)
        if name not in workers:
            yield _error(
                path,
                f"no worker is named '{name}'",
                f"{did_you_mean(name, workers)}use a name from workers[].name",
            )
        if secret.value is not None:
            for reason in kueue_rejections(secret.value):
                yield _error(path, f"Kueue would reject this kubeconfig: {reason}", KUBECONFIG_FIX)


def dispatcher(spec: FleetSpec) -> Iterator[Problem]:
    d = spec.dispatcher
    if not d.enabled:
        return
    if d.name in BUILTIN_DISPATCHERS:
        yield _error(
            "dispatcher.name",
            f"'{d.name}' is a built-in Kueue dispatcher",
            "choose another name: Kueue would run its own dispatcher and ignore ours",
        )
    if _gates(spec).get("WorkloadRequestUseMergePatch") is False:
        yield _error(
            "kueue.featureGates.WorkloadRequestUseMergePatch",
            "the dispatcher needs WorkloadRequestUseMergePatch, which is set to false",
            "remove the entry (the stack turns it on): without it Kueue's server-side "
            "apply keeps our nominations and never admits the workload",
        )
    if d.inventory and spec.credentials.mode != "clusterProfile":
        # An inventory MultiKueueCluster points at a ClusterProfile; Kueue v0.19.2 marks it
        # inactive unless MultiKueueClusterProfile is on (pkg/controller/admissionchecks/
        # multikueue/multikueuecluster.go:927-930), which only ClusterProfile mode turns on,
        # with the access-provider plugin it reads the profile's credentials through.
        yield _error(
            "dispatcher.inventory",
            "inventory adds ClusterProfiles to MultiKueue, which Kueue connects to only in "
            f"ClusterProfile mode; with credentials.mode {spec.credentials.mode} every "
            "inventory MultiKueueCluster stays inactive",
            "set credentials.mode: clusterProfile, or remove dispatcher.inventory",
        )
    if d.run == "local":
        # Nothing is built or pulled: a value here would be silently ignored.
        for key in ("image", "registry", "platform"):
            if getattr(d, key) is not None:
                yield _error(
                    f"dispatcher.{key}",
                    "is set, but with dispatcher.run: local no image is built or run",
                    f"remove dispatcher.{key}, or set dispatcher.run: cluster",
                )
    elif spec.manager.provider != "kind" and not d.image and not d.registry:
        yield _error(
            "dispatcher.registry",
            "the dispatcher image must be pushed somewhere the manager can pull from",
            "set dispatcher.registry (for example europe-docker.pkg.dev/PROJECT/REPO) or "
            "dispatcher.image to a built image",
        )
    selector = d.policy.cluster_selector
    if len(selector) > MAX_SELECTOR_LABELS:
        yield _error(
            "dispatcher.policy.clusterSelector",
            f"{len(selector)} labels, but a DispatchPolicy's selector holds at most "
            f"{MAX_SELECTOR_LABELS}",
            "select workers by fewer labels (give the workers one label that says it)",
        )
    if selector and not any(
        all(w.labels.get(k) == v for k, v in selector.items()) for w in spec.workers
    ):
        yield _warn(
            "dispatcher.policy.clusterSelector",
            "no worker has all these labels, so no workload would be dispatched",
            "add the labels to workers[].labels, or change the selector",
        )


# --- queues --------------------------------------------------------------------------------


def queue_names_unique(spec: FleetSpec) -> Iterator[Problem]:
    q = spec.queues
    yield from _unique(((f.name, f.path) for f in q.flavors), "ResourceFlavor")
    yield from _unique(((t.name, t.path) for t in q.topologies), "Topology")
    yield from _unique(((c.name, c.path) for c in q.cluster_queues), "ClusterQueue")
    yield from _unique(
        ((f"{lq.namespace}/{lq.name}", lq.path) for lq in q.local_queues), "LocalQueue"
    )


def topologies(spec: FleetSpec) -> Iterator[Problem]:
    for t in spec.queues.topologies:
        path = key_path(t.path, "levels")
        if not t.levels or len(t.levels) > 16:
            yield _error(
                path,
                "a Topology needs 1 to 16 levels",
                "list node label keys from the widest domain to the narrowest",
            )
        elif len(set(t.levels)) != len(t.levels):
            yield _error(path, "a level is listed twice", "list each node label once")
        if "kubernetes.io/hostname" in t.levels[:-1]:
            yield _error(
                path,
                "kubernetes.io/hostname may only be the last level",
                "move it to the end of the list",
            )


def flavor_topologies(spec: FleetSpec) -> Iterator[Problem]:
    names = {t.name for t in spec.queues.topologies}
    for f in spec.queues.flavors:
        if f.topology is None:
            continue
        if f.topology not in names:
            yield _error(
                key_path(f.path, "topology"),
                f"no Topology named '{f.topology}'",
                f"{did_you_mean(f.topology, names)}define it under queues.topologies",
            )
        if not f.node_labels:
            yield _error(
                key_path(f.path, "nodeLabels"),
                "a flavor with a topology needs at least one node label",
                "add the node label that selects this flavor's nodes",
            )


def resource_groups(spec: FleetSpec) -> Iterator[Problem]:
    """Each resource covered once, each flavor defined and used once, with exactly the
    covered resources (clusterqueue_webhook.go v0.19.2:313, :322; clusterqueue_types.go
    :254). How many of each there may be: kueue_rules.py."""
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
                    yield _error(
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
                    yield _error(
                        key_path(fq.path, "name"), f"no ResourceFlavor named '{fq.flavor}'", hint
                    )
                if fq.flavor in flavor_seen:
                    yield _error(
                        key_path(fq.path, "name"),
                        f"flavor '{fq.flavor}' is used twice in this ClusterQueue",
                        "use a flavor in one resource group only",
                    )
                flavor_seen[fq.flavor] = fq.path
                if set(fq.resources) != set(g.covered):
                    yield _error(
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
                        yield _error(
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
            yield _error(
                key_path(cq.path, "preemption.borrowWithinCohort"),
                "borrowWithinCohort needs reclaimWithinCohort other than Never",
                "set preemption.reclaimWithinCohort to LowerPriority or Any",
            )


def _quota_refs(
    spec: FleetSpec, cq_name: str, overrides: dict[str, dict[str, str]], path: str
) -> Iterator[Problem]:
    cq = next((c for c in spec.queues.cluster_queues if c.name == cq_name), None)
    if cq is None:
        names = [c.name for c in spec.queues.cluster_queues]
        yield _error(
            path,
            f"no ClusterQueue named '{cq_name}'",
            f"{did_you_mean(cq_name, names)}use a name from queues.clusterQueues",
        )
        return
    covered = {fq.flavor: set(g.covered) for g in cq.resource_groups for fq in g.flavors}
    for flavor, resources in overrides.items():
        fpath = key_path(path, flavor)
        if flavor not in covered:
            yield _error(
                fpath,
                f"ClusterQueue '{cq_name}' has no flavor '{flavor}'",
                f"use one of {', '.join(covered) or '(none)'}",
            )
            continue
        for res in resources:
            if res not in covered[flavor]:
                yield _error(
                    key_path(fpath, res),
                    f"flavor '{flavor}' of '{cq_name}' does not cover '{res}'",
                    f"use one of {', '.join(sorted(covered[flavor]))}",
                )


def cordon_is_a_setting(spec: FleetSpec) -> Iterator[Problem]:
    """The cordon label on a worker's MultiKueueCluster is the stack's to write, from
    `cordoned`: written as a label it would be a cordon no command shows or undoes, and a
    selector on it would dispatch only to what is out of service."""
    for w in spec.workers:
        if CORDONED_LABEL in w.labels:
            yield _error(
                key_path(key_path(w.path, "labels"), CORDONED_LABEL),
                "is the label the stack sets on a cordoned worker's MultiKueueCluster",
                f"remove it and set {key_path(w.path, 'cordoned')}: true (or run "
                f"`mkf cordon {w.name}`)",
            )
    if CORDONED_LABEL in spec.dispatcher.policy.cluster_selector:
        yield _error(
            key_path("dispatcher.policy.clusterSelector", CORDONED_LABEL),
            "selects by the cordon label, and a cordoned worker is never nominated",
            "remove it from the selector",
        )
    if spec.workers and all(w.cordoned for w in spec.workers):
        yield _warn(
            "workers",
            "every worker is cordoned, so no new workload is dispatched anywhere",
            "uncordon one (`mkf uncordon NAME`, then `pulumi up`)",
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
                    yield _warn(
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
            yield _warn(
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
                yield _warn(
                    key_path(key_path(w.path, "quotas"), cq.name),
                    f"worker '{w.name}' offers nothing to ClusterQueue '{cq.name}' (every "
                    "quota is zero), so no workload of it is ever sent there",
                    "fine if intended; otherwise give this worker a quota above zero",
                )


def local_queues(spec: FleetSpec) -> Iterator[Problem]:
    cqs = {c.name for c in spec.queues.cluster_queues}
    for lq in spec.queues.local_queues:
        npath = key_path(lq.path, "namespace")
        if lq.namespace in RESERVED_NAMESPACES or lq.namespace == "multikueue-fleet-system":
            yield _error(
                npath,
                f"namespace '{lq.namespace}' is reserved and is not mirrored to workers "
                "(Kueue does not manage jobs there)",
                "put the LocalQueue in a namespace of your own",
            )
        if lq.cluster_queue not in cqs:
            yield _error(
                key_path(lq.path, "clusterQueue"),
                f"no ClusterQueue named '{lq.cluster_queue}'",
                f"{did_you_mean(lq.cluster_queue, cqs)}use a name from queues.clusterQueues",
            )


# Every rule, in the order problems are reported. A rule is a function of the spec that
# yields Problems; add new ones here (Kueue gate rules live in kueue_gates.py and are
# registered here too).
def _existing_identity(c: ClusterSpec) -> tuple[str, str]:
    """An existing cluster is what its kubeconfig context points at: the API server and its
    CA, whatever the context or file is called (kubeadm names every context
    kubernetes-admin@kubernetes) and whatever `server` the manager's pods use. When the file
    cannot be read here (a CI runner), only the same context of the same file is known to
    be the same cluster."""
    assert c.existing is not None
    path = existing_kubeconfig_path(c.existing)
    context = c.existing.context
    try:
        server, ca = context_cluster(path.read_text(), context)
    except (OSError, ValueError, yaml.YAMLError):
        return f"existing:{path}#{context}", f"context '{context}' of {path}"
    digest = hashlib.sha256(ca.encode()).hexdigest()[:16]
    return f"existing:{server}#{digest}", f"at {server} (its API server and CA)"


def _identity(spec: FleetSpec, c: ClusterSpec) -> tuple[str, str]:
    """What makes two stacks' clusters the same real cluster, and how to name it."""
    if c.existing is not None:
        return _existing_identity(c)
    if c.gke is not None:
        where = f"{c.gke.project}/{c.gke.location}/{c.physical_name(spec.fleet_name)}"
        return f"gke:{where}", f"gke:{where}"
    if c.eks is not None:
        where = f"{c.eks.region}/{c.physical_name(spec.fleet_name)}"
        return f"eks:{where}", f"eks:{where}"
    where = f"kind:{c.physical_name(spec.fleet_name)}"
    return where, where


def _shared_cluster_problem(
    ident: tuple[str, str], users: list[tuple[str, ClusterSpec]]
) -> Problem:
    names = ", ".join(f"{src} ({c.path})" if src else c.path for src, c in users)
    key, where = ident
    if key.startswith("existing:"):
        # The objects a fleet installs on a cluster (Kueue's install, the multikueue
        # ServiceAccount and ClusterRole, the queues) have the same names for every fleet,
        # and the Kubernetes provider refuses to create what already exists.
        return Problem(
            users[1][1].path,
            f"the existing cluster {where} is used by {names}; one cluster serves one fleet, "
            "whose objects there have the same names as another fleet's",
            "give each fleet its own cluster (another API server)",
            "error",
        )
    return Problem(
        users[1][1].path,
        f"{where} would be created by {names}",
        "give the stacks different fleetName values",
        "error",
    )


def clusters_distinct(spec: FleetSpec) -> list[Problem]:
    """Two entries of one stack that are the same real cluster. Only `existing` ones: a
    cluster the stack creates is named <fleetName>-<name>, so two of one stack collide
    only when their names do (cluster_names_unique says so, with the right fix)."""
    owners: dict[tuple[str, str], list[tuple[str, ClusterSpec]]] = {}
    for c in spec.clusters:
        if c.existing is not None:
            owners.setdefault(_identity(spec, c), []).append(("", c))
    return [_shared_cluster_problem(i, users) for i, users in owners.items() if len(users) > 1]


def validate_together(specs: list[tuple[str, FleetSpec]]) -> list[Problem]:
    """Problems only visible across stacks: two stacks that would create, or share, the
    same cluster."""
    owners: dict[tuple[str, str], list[tuple[str, ClusterSpec]]] = {}
    for source, spec in specs:
        for c in spec.clusters:
            owners.setdefault(_identity(spec, c), []).append((source, c))
    return [_shared_cluster_problem(i, users) for i, users in owners.items() if len(users) > 1]


RULES: list[Rule] = [
    worker_count,
    cluster_names_unique,
    clusters_distinct,
    kind_name_length,
    kind_workers_need_a_kind_manager,
    node_labels_kubelet_accepts,
    gpu_quota_has_gpu_nodes,
    known_frameworks,
    workers_run_the_managers_frameworks,
    integrations_are_known_and_installed,
    external_frameworks,
    gates_in_one_place,
    known_feature_gates,
    gate_dependencies,
    topology_flavors_need_tas,
    pods_ready,
    multikueue_origin,
    cluster_profile_mode,
    kueue_image_needs_custom_mount,
    existing_kueue,
    worker_kubeconfigs,
    dispatcher,
    queue_names_unique,
    topologies,
    flavor_topologies,
    resource_groups,
    limits_need_a_cohort,
    borrowing_needs_reclaim,
    cordon_is_a_setting,
    worker_quotas_refer_to_queues,
    manager_quota,
    quotas_admit_something,
    quota_quantities,
    manager_quota_sums_fit,
    local_queues,
    # Values checked against the component that consumes them (consumers.py).
    *consumers.RULES,
    *cloud.RULES,
    # Kueue's own limits and rules for the objects the fleet writes, with their upstream
    # references (kueue_rules.RULE_INVENTORY).
    *kueue_rules.RULES,
]


def validate(spec: FleetSpec) -> list[Problem]:
    """Every fleet-wide problem of one stack, errors and warnings together."""
    return [problem for rule in RULES for problem in rule(spec)]
