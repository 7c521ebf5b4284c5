"""The API kinds the controller and mkf's commands address, as paths on an API server: plain
values, apart from the client (controller/kube.py) so that naming a kind loads no client."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    group: str  # "" for the core API
    version: str
    plural: str
    namespaced: bool

    def path(
        self, namespace: str | None = None, name: str | None = None, sub: str | None = None
    ) -> str:
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
        if sub:
            base += f"/{sub}"
        return base


WORKLOADS = Kind("kueue.x-k8s.io", "v1beta2", "workloads", True)
ADMISSION_CHECKS = Kind("kueue.x-k8s.io", "v1beta2", "admissionchecks", False)
MULTIKUEUE_CONFIGS = Kind("kueue.x-k8s.io", "v1beta2", "multikueueconfigs", False)
MULTIKUEUE_CLUSTERS = Kind("kueue.x-k8s.io", "v1beta2", "multikueueclusters", False)
CLUSTER_QUEUES = Kind("kueue.x-k8s.io", "v1beta2", "clusterqueues", False)
LOCAL_QUEUES = Kind("kueue.x-k8s.io", "v1beta2", "localqueues", True)
CLUSTER_PROFILES = Kind("multicluster.x-k8s.io", "v1alpha1", "clusterprofiles", True)
SECRETS = Kind("", "v1", "secrets", True)
EVENTS = Kind("", "v1", "events", True)
LEASES = Kind("coordination.k8s.io", "v1", "leases", True)
