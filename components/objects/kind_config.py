"""kind cluster configuration for one cluster of a fleet (pure)."""

from __future__ import annotations

from typing import Any

from components.model.spec import ClusterSpec, FleetSpec

KIND_API = "kind.x-k8s.io/v1alpha4"
# On the control-plane node of every kind cluster a stack creates, naming the stack: the
# next `up` of that stack adopts a cluster whose create it did not see finish, and refuses
# one that carries another owner or none.
OWNER_LABEL = "multikueue-fleet.x-k8s.io/stack"


def kind_config(spec: FleetSpec, cluster: ClusterSpec, owner: str | None = None) -> dict[str, Any]:
    """A control plane plus `workerNodes` workers; the cluster's node labels go on every
    node that runs workloads (the workers, or the control plane when it runs alone), so
    flavors and topologies select them as they would on a real cluster. `owner` (the
    stack) is labelled on the control plane (kind v0.32.0 pkg/apis/config/v1alpha4/types.go
    Node.Labels)."""
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
    return {
        "kind": "Cluster",
        "apiVersion": KIND_API,
        "name": cluster.physical_name(spec.fleet_name),
        "nodes": nodes,
    }


def internal_server(spec: FleetSpec, cluster: ClusterSpec) -> str:
    """How pods in another kind cluster on the same Docker network reach this one: the
    control-plane container's name, which kind's API server certificate includes."""
    return f"https://{cluster.physical_name(spec.fleet_name)}-control-plane:6443"
