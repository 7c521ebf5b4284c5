"""What the nodes of a cluster the stack creates carry: the node labels a kubelet accepts on
its own Node, and, on a GKE or EKS worker offering GPUs, the GPU pool's labels and taint as
the flavors that select those nodes expect them."""

from __future__ import annotations

from collections.abc import Iterator

from components.checks.rule import error, warn
from components.model import quantity
from components.model.problems import Problem, key_path
from components.model.spec import GPU_TAINT, ClusterSpec, FleetSpec, Taint, Toleration

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
                yield error(
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
            yield warn(
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
                yield warn(
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
                    yield warn(
                        key_path(where, "accelerator"),
                        f"flavor '{flavor}' selects {GKE_ACCELERATOR_LABEL}={wanted} but the "
                        f"GPU pool of worker '{w.name}' has {pool.accelerator}",
                        "make the flavor's node label and the pool's accelerator the same",
                    )
                elif has is not None and has != wanted:
                    yield warn(
                        where,
                        f"flavor '{flavor}' selects {key}={wanted} but the GPU nodes of worker "
                        f"'{w.name}' carry {key}={has}",
                        "make the flavor's node label and the GPU pool's the same",
                    )
                elif has is None and not _label_set_elsewhere(w.provider, key):
                    yield warn(
                        where,
                        f"flavor '{flavor}' selects node label {key}={wanted}, which the GPU "
                        f"nodes of worker '{w.name}' do not carry"
                        + (" (EKS sets no accelerator label)" if w.provider == "eks" else ""),
                        f"select {INSTANCE_TYPE_LABEL}"
                        + (f" or {GKE_ACCELERATOR_LABEL}" if w.provider == "gke" else "")
                        + f", or add the label to {w.provider}.gpuPool.nodeLabels",
                    )
