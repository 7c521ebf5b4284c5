"""kind cluster configuration for one cluster of a fleet (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.model.spec import ClusterSpec, FleetSpec, MirrorSettings

KIND_API = "kind.x-k8s.io/v1alpha4"
# On the control-plane node of every kind cluster a stack creates, naming the stack: the
# next `up` of that stack adopts a cluster whose create it did not see finish, and refuses
# one that carries another owner or none.
OWNER_LABEL = "multikueue-fleet.x-k8s.io/stack"


# containerd reads a hosts.toml per registry from here (kind's local-registry page,
# site/content/docs/user/local-registry.md at v0.33.0); clusters.py writes them on each node.
# Every kind cluster gets the patch, mirrors or not: containerd reads config_path once, at
# start, but the hosts.toml files at each pull, so mirrors added, changed or removed later
# are files rewritten on the running nodes, not a cluster made again.
CERTS_DIR = "/etc/containerd/certs.d"
CONTAINERD_MIRRORS_PATCH = f"""[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = "{CERTS_DIR}"
"""
# kubelet 1.35+ refuses a cgroup v1 host unless told otherwise (KEP-5573,
# kubernetes/kubernetes#134298; pkg/kubelet/apis/config/types.go at v1.36.4 FailCgroupV1),
# and kind v0.33.0 only warns that v1 is deprecated, then times out waiting for the control
# plane ("client rate limiter Wait returned an error").
CGROUP_V1_KUBELET_PATCH = "kind: KubeletConfiguration\nfailCgroupV1: false\n"
FAIL_CGROUP_V1_FROM = (1, 35)


def mirror_props(mirrors: Mapping[str, str | MirrorSettings]) -> dict[str, Any]:
    """The mirrors as the kind cluster's provider gets them (plain data in Pulumi's state): a
    URL as the URL, as before options existed, so a stack that has none sees no change."""
    return {
        registry: mirror
        if isinstance(mirror, str)
        else {"url": mirror.url, **mirror.hosts_toml_options()}
        for registry, mirror in mirrors.items()
    }


def mirror_ca_path(registry: str) -> str:
    """Where a mirror's CA certificates go on each node, beside the registry's hosts.toml."""
    return f"{CERTS_DIR}/{registry}/mirror-ca.crt"


def hosts_toml(registry: str, mirror: str | Mapping[str, Any]) -> str:
    """containerd's hosts.toml for one registry: the mirror first, with the options given,
    the registry itself after it (containerd v2.3.4 docs/hosts.md: `ca` a path on the node,
    `skip_verify`, `override_path`)."""
    upstream = "https://registry-1.docker.io" if registry == "docker.io" else f"https://{registry}"
    options = {"url": mirror} if isinstance(mirror, str) else dict(mirror)
    lines = [f'[host."{options["url"]}"]', '  capabilities = ["pull", "resolve"]']
    if options.get("ca"):
        lines.append(f'  ca = "{mirror_ca_path(registry)}"')
    if options.get("skipVerify"):
        lines.append("  skip_verify = true")
    if options.get("overridePath"):
        lines.append("  override_path = true")
    return f'server = "{upstream}"\n\n' + "\n".join(lines) + "\n"


def kind_config(
    spec: FleetSpec, cluster: ClusterSpec, owner: str | None = None, cgroup_v1: bool = False
) -> dict[str, Any]:
    """A control plane plus `workerNodes` workers; the cluster's node labels go on every
    node that runs workloads (the workers, or the control plane when it runs alone), so
    flavors and topologies select them as they would on a real cluster. `owner` (the
    stack) is labelled on the control plane (kind v0.32.0 pkg/apis/config/v1alpha4/types.go
    Node.Labels). containerd reads registry mirrors from hosts.toml files (written on each
    node once it runs, rewritten when they change); on a cgroup v1 Docker host, kubelets of
    1.35 and later are told to accept it."""
    assert cluster.kind is not None
    labels = dict(cluster.node_labels)
    control_plane: dict[str, Any] = {"role": "control-plane", "image": cluster.kind.node_image}
    nodes = [control_plane]
    if cluster.kind.worker_nodes == 0 and labels:
        control_plane["labels"] = dict(labels)
    if owner:
        control_plane.setdefault("labels", {})[OWNER_LABEL] = owner
    for _ in range(cluster.kind.worker_nodes):
        node: dict[str, Any] = {"role": "worker", "image": cluster.kind.node_image}
        if labels:
            node["labels"] = labels
        nodes.append(node)
    config: dict[str, Any] = {
        "kind": "Cluster",
        "apiVersion": KIND_API,
        "name": cluster.physical_name(spec.fleet_name),
        "nodes": nodes,
    }
    config["containerdConfigPatches"] = [CONTAINERD_MIRRORS_PATCH]
    version = cluster.kubernetes_version
    if cgroup_v1 and version and tuple(map(int, version.split("."))) >= FAIL_CGROUP_V1_FROM:
        config["kubeadmConfigPatches"] = [CGROUP_V1_KUBELET_PATCH]
    return config


def reads_mirrors(config: dict[str, Any]) -> bool:
    """Whether a kind configuration gives containerd the hosts.toml folder (a cluster made
    before every one did has it only when it had mirrors)."""
    return CONTAINERD_MIRRORS_PATCH in (config.get("containerdConfigPatches") or [])


def apart_from_mirrors(config: dict[str, Any]) -> dict[str, Any]:
    """The configuration without the mirrors' patch: what fixes the cluster at creation."""
    patches = [
        p for p in config.get("containerdConfigPatches") or [] if p != CONTAINERD_MIRRORS_PATCH
    ]
    out = {k: v for k, v in config.items() if k != "containerdConfigPatches"}
    return {**out, "containerdConfigPatches": patches} if patches else out


def internal_server(spec: FleetSpec, cluster: ClusterSpec) -> str:
    """How pods in another kind cluster on the same Docker network reach this one: the
    control-plane container's name, which kind's API server certificate includes."""
    return f"https://{cluster.physical_name(spec.fleet_name)}-control-plane:6443"


# On kind every upstream controller runs one replica and requests at most this much CPU: all
# clusters' nodes share one machine, and each node reports all of its cores, so upstream's
# requests (LeaderWorkerSet v0.9.0: 2 replicas of 1 CPU, config/manager/manager.yaml; JobSet
# v0.12.0 and Kueue v0.19.2: 500m) leave the dev stack's LeaderWorkerSet controller
# unschedulable on a 2-core machine, and `up` waiting on it. Requests only: limits stay.
KIND_CONTROLLER_CPU_MILLI = 100


def _milli(cpu: Any) -> int | None:
    text = str(cpu)
    try:
        return int(text[:-1]) if text.endswith("m") else int(float(text) * 1000)
    except ValueError:
        return None


def fit_kind_node(obj: dict[str, Any]) -> dict[str, Any]:
    """A Deployment of an upstream install as it runs on a kind cluster (the same object
    otherwise): one replica, CPU requests of at most KIND_CONTROLLER_CPU_MILLI."""
    if obj.get("kind") != "Deployment" or not isinstance(obj.get("spec"), dict):
        return obj
    spec = dict(obj["spec"])
    # A number from the engine arrives as a float (protobuf Struct).
    if isinstance(spec.get("replicas"), int | float) and spec["replicas"] > 1:
        spec["replicas"] = 1
    template = spec.get("template")
    pod = template.get("spec") if isinstance(template, dict) else None
    if isinstance(pod, dict):
        containers = []
        for container in pod.get("containers") or []:
            requests = (
                ((container.get("resources") or {}).get("requests") or {})
                if isinstance(container, dict)
                else {}
            )
            milli = _milli(requests.get("cpu")) if "cpu" in requests else None
            if milli is not None and milli > KIND_CONTROLLER_CPU_MILLI:
                resources = dict(container["resources"])
                resources["requests"] = {**requests, "cpu": f"{KIND_CONTROLLER_CPU_MILLI}m"}
                container = {**container, "resources": resources}
            containers.append(container)
        spec["template"] = {**template, "spec": {**pod, "containers": containers}}
    return {**obj, "spec": spec}
