"""Manager-side MultiKueue objects: the admission check, the config listing the workers,
one MultiKueueCluster per worker, and the credentials it connects with (a kubeconfig
Secret, or a ClusterProfile read through an access-provider plugin)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.model.spec import ClusterSpec, FleetSpec, WorkerSpec
from components.objects.labels import (
    KUEUE_API,
    KUEUE_NAMESPACE,
    KUEUE_SERVICE_ACCOUNT,
    OWNER,
    metadata,
)
from components.objects.queues import MULTIKUEUE_CHECK
from controller.api import CORDONED_LABEL  # the stack writes it, the dispatcher reads it

MULTIKUEUE_CONFIG = "multikueue"
KUBECONFIG_KEY = "kubeconfig"  # the key Kueue reads from a MultiKueueCluster's Secret
CLUSTER_PROFILE_API = "multicluster.x-k8s.io/v1alpha1"
CLUSTER_MANAGER_LABEL = "x-k8s.io/cluster-manager"
PROFILE_SECRETS_ROLE = "multikueue-fleet-clusterprofile-tokens"


def kubeconfig_secret_name(worker: ClusterSpec) -> str:
    return f"{worker.name}-kubeconfig"


def profile_token_secret_name(worker: ClusterSpec) -> str:
    return f"{worker.name}-token"


def placeholder(worker: ClusterSpec, what: str) -> str:
    return f"<secret: {what} of worker '{worker.name}', assembled by pulumi up>"


def admission_check() -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_API,
        "kind": "AdmissionCheck",
        "metadata": metadata(MULTIKUEUE_CHECK),
        "spec": {
            "controllerName": "kueue.x-k8s.io/multikueue",
            "parameters": {
                "apiGroup": "kueue.x-k8s.io",
                "kind": "MultiKueueConfig",
                "name": MULTIKUEUE_CONFIG,
            },
        },
    }


def multikueue_config(spec: FleetSpec) -> dict[str, Any]:
    # Order matters to Kueue's incremental dispatcher and is kept as the stack lists it.
    return {
        "apiVersion": KUEUE_API,
        "kind": "MultiKueueConfig",
        "metadata": metadata(MULTIKUEUE_CONFIG),
        "spec": {"clusters": [w.name for w in spec.workers]},
    }


def multikueue_cluster(spec: FleetSpec, worker: WorkerSpec) -> dict[str, Any]:
    if spec.credentials.mode == "clusterProfile":
        source: dict[str, Any] = {"clusterProfileRef": {"name": worker.name}}
    else:
        source = {
            "kubeConfig": {"location": kubeconfig_secret_name(worker), "locationType": "Secret"}
        }
    # The worker's labels travel with it so the dispatcher can select clusters by label,
    # and so does its cordon.
    labels = dict(worker.labels)
    if worker.cordoned:
        labels[CORDONED_LABEL] = "true"
    return {
        "apiVersion": KUEUE_API,
        "kind": "MultiKueueCluster",
        "metadata": metadata(worker.name, labels=labels),
        "spec": {"clusterSource": source},
    }


def kubeconfig_secret(worker: ClusterSpec, kubeconfig: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": metadata(kubeconfig_secret_name(worker), KUEUE_NAMESPACE),
        "stringData": {KUBECONFIG_KEY: kubeconfig},
    }


def cluster_profile(spec: FleetSpec, worker: ClusterSpec) -> dict[str, Any]:
    """Spec only: status.accessProviders is status, kept current by the dispatch controller."""
    return {
        "apiVersion": CLUSTER_PROFILE_API,
        "kind": "ClusterProfile",
        "metadata": metadata(
            worker.name,
            KUEUE_NAMESPACE,
            labels={**worker.labels, CLUSTER_MANAGER_LABEL: OWNER},
        ),
        "spec": {
            "displayName": worker.physical_name(spec.fleet_name),
            "clusterManager": {"name": OWNER},
        },
    }


def profile_token_secret(worker: ClusterSpec, token: str) -> dict[str, Any]:
    # The secretreader plugin reads key `token` of the Secret its exec config names.
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": metadata(profile_token_secret_name(worker), KUEUE_NAMESPACE),
        "stringData": {"token": token},
    }


def profile_token_rbac(spec: FleetSpec) -> list[dict[str, Any]]:
    """The plugin runs inside kueue-controller-manager: let it get exactly these Secrets."""
    names = [profile_token_secret_name(w) for w in spec.workers]
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": metadata(PROFILE_SECRETS_ROLE, KUEUE_NAMESPACE),
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["secrets"],
                    "resourceNames": names,
                    "verbs": ["get"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": metadata(PROFILE_SECRETS_ROLE, KUEUE_NAMESPACE),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": PROFILE_SECRETS_ROLE,
            },
            "subjects": [
                {
                    "kind": "ServiceAccount",
                    "name": KUEUE_SERVICE_ACCOUNT,
                    "namespace": KUEUE_NAMESPACE,
                }
            ],
        },
    ]


def manager_multikueue_objects(
    spec: FleetSpec, credentials: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """`credentials` maps a worker name to its kubeconfig (Secret mode) or token (profile
    mode); a worker missing from it gets a readable placeholder, as in `render`."""
    credentials = credentials or {}
    objects: list[dict[str, Any]] = []
    profile_mode = spec.credentials.mode == "clusterProfile"
    if profile_mode:
        objects += profile_token_rbac(spec)
    for w in spec.workers:
        if profile_mode:
            objects.append(
                profile_token_secret(
                    w, credentials.get(w.name, placeholder(w, "ServiceAccount token"))
                )
            )
            objects.append(cluster_profile(spec, w))
        else:
            objects.append(
                kubeconfig_secret(
                    w, credentials.get(w.name, placeholder(w, "MultiKueue kubeconfig"))
                )
            )
        objects.append(multikueue_cluster(spec, w))
    objects += [multikueue_config(spec), admission_check()]
    return objects
