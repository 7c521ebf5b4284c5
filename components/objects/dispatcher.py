"""Builders for the dispatch controller on the manager: its identity and least-privilege
rights, settings, Deployment, metrics Service, disruption budget, the DispatchPolicy CRD
and the stack's default policy, and the Secrets holding its read-only worker kubeconfigs."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from components.model.fieldtypes import duration_seconds
from components.model.spec import ClusterSpec, FleetSpec
from components.objects.labels import FLEET_NAMESPACE, KUEUE_NAMESPACE, metadata
from components.objects.manifests import yaml_text
from components.objects.multikueue import placeholder, profile_token_secret_name
from controller.api import GROUP, PLURAL, Policy, Settings, crd, policy_object, seconds

NAME = "multikueue-fleet-dispatcher"
BUILT_IMAGE = "<image built from controller/ by pulumi up, pinned by digest>"
ROLE = "multikueue-fleet:dispatcher"
WORKER_LABEL = "multikueue-fleet/worker"
SETTINGS_KEY = "config.yaml"
APP_LABELS = {"app.kubernetes.io/name": NAME}
# dispatcher.run: local: the Secret holding the process's ServiceAccount token.
TOKEN_SECRET = f"{NAME}-token"


def reader_secret_name(worker: ClusterSpec) -> str:
    return f"{worker.name}-reader-kubeconfig"


def default_policy(spec: FleetSpec) -> Policy:
    p = spec.dispatcher.policy
    return Policy(
        name="default",
        cluster_selector=dict(p.cluster_selector),
        strategy=p.strategy,
        clusters_to_nominate=p.clusters_to_nominate,
        widen_after_seconds=seconds(p.widen_after),
        when_nothing_fits=p.when_nothing_fits,
        hedge_clusters=p.hedge_clusters,
        hedge_share=p.hedge_share_percent / 100,
    )


def settings(spec: FleetSpec, endpoints: Mapping[str, tuple[str, str]]) -> dict[str, Any]:
    """The controller's settings file. `endpoints`: worker -> (server, CA data) as the
    manager reaches it, for the ClusterProfile status the controller keeps current."""
    out: dict[str, Any] = {
        "namespace": FLEET_NAMESPACE,
        "kueueNamespace": KUEUE_NAMESPACE,
        "workerSecretLabel": WORKER_LABEL,
    }
    lost = duration_seconds(spec.kueue.multikueue.worker_lost_timeout)
    if lost != Settings.worker_lost_timeout_seconds:
        # Kueue keeps a lost worker this long; the dispatcher keeps a nomination there as
        # long (controller/policy.py, _briefly_lost).
        out["workerLostTimeoutSeconds"] = lost
    if spec.dispatcher.inventory:
        out["inventory"] = True
    if spec.credentials.mode == "clusterProfile":
        access = spec.credentials.cluster_profile.access_provider
        out["clusterProfiles"] = [
            {
                "name": w.name,
                "server": endpoints.get(w.name, (placeholder(w, "API server URL"), ""))[0],
                "certificateAuthorityData": endpoints.get(w.name, ("", placeholder(w, "CA")))[1],
                "tokenSecret": profile_token_secret_name(w),
                "accessProvider": access,
            }
            for w in spec.workers
        ]
    return out


def _rules(spec: FleetSpec) -> list[dict[str, Any]]:
    read = ["get", "list", "watch"]
    return [
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": read},
        # The one write the Kueue contract allows an external dispatcher.
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["patch"]},
        {
            "apiGroups": ["kueue.x-k8s.io"],
            "resources": ["admissionchecks", "multikueueclusters", "multikueueconfigs"],
            "verbs": read,
        },
        {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": read},
        {"apiGroups": [GROUP], "resources": [f"{PLURAL}/status"], "verbs": ["patch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    ] + (
        [
            # Inventory automation: only objects carrying its owner label are ever touched.
            {
                "apiGroups": ["kueue.x-k8s.io"],
                "resources": ["multikueueclusters", "multikueueconfigs"],
                "verbs": ["create", "patch", "delete"],
            },
        ]
        if spec.dispatcher.inventory
        else []
    )


def _binding(kind: str, name: str) -> dict[str, Any]:
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name}


def rbac(spec: FleetSpec) -> list[dict[str, Any]]:
    subject = [{"kind": "ServiceAccount", "name": NAME, "namespace": FLEET_NAMESPACE}]
    own = [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "create", "update"],
        },
    ]
    objects = [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": metadata(NAME, FLEET_NAMESPACE),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": metadata(ROLE),
            "rules": _rules(spec),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": metadata(ROLE),
            "roleRef": _binding("ClusterRole", ROLE),
            "subjects": subject,
        },
        # Its own namespace only: the workers' reader kubeconfigs and the leader Lease.
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": metadata(NAME, FLEET_NAMESPACE),
            "rules": own,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": metadata(NAME, FLEET_NAMESPACE),
            "roleRef": _binding("Role", NAME),
            "subjects": subject,
        },
    ]
    profile_mode = spec.credentials.mode == "clusterProfile"
    if profile_mode or spec.dispatcher.inventory:
        profiles = [
            {
                "apiGroups": ["multicluster.x-k8s.io"],
                "resources": ["clusterprofiles"],
                "verbs": ["get", "list", "watch"],
            },
        ]
        if profile_mode:  # it keeps the status of the profiles the stack declared
            profiles.append(
                {
                    "apiGroups": ["multicluster.x-k8s.io"],
                    "resources": ["clusterprofiles/status"],
                    "verbs": ["patch"],
                }
            )
        objects += [
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": metadata(NAME, KUEUE_NAMESPACE),
                "rules": profiles,
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": metadata(NAME, KUEUE_NAMESPACE),
                "roleRef": _binding("Role", NAME),
                "subjects": subject,
            },
        ]
    return objects


def deployment(spec: FleetSpec, image: str, config_text: str) -> dict[str, Any]:
    probe = {
        "httpGet": {"path": "/healthz", "port": "metrics"},
        "periodSeconds": 10,
        "failureThreshold": 3,
    }
    container = {
        "name": "dispatcher",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": ["--config", f"/etc/dispatcher/{SETTINGS_KEY}", "run"],
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "ports": [{"name": "metrics", "containerPort": 8080}],
        "livenessProbe": probe,
        "readinessProbe": {**probe, "httpGet": {"path": "/readyz", "port": "metrics"}},
        "resources": {
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"memory": "512Mi"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        # The root filesystem is read-only, but the Kubernetes client writes each worker's CA
        # data to a file when it builds that worker's client (kubernetes_asyncio 36.1.0
        # config/kube_config.py, FileOrData.as_file -> tempfile.mkstemp): without a
        # writable /tmp every worker is skipped and nothing is ever dispatched.
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/dispatcher", "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }
    # A settings change rolls the pods: they read the file once, at start.
    checksum = hashlib.sha256(config_text.encode()).hexdigest()[:16]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(NAME, FLEET_NAMESPACE, labels=APP_LABELS),
        "spec": {
            "replicas": spec.dispatcher.replicas,
            "selector": {"matchLabels": dict(APP_LABELS)},
            "template": {
                "metadata": {
                    "labels": dict(APP_LABELS),
                    "annotations": {"multikueue-fleet/config-sha256": checksum},
                },
                "spec": {
                    "serviceAccountName": NAME,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 65532,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [container],
                    "volumes": [
                        {"name": "config", "configMap": {"name": NAME}},
                        # Small files only (CA data per worker), in memory.
                        {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
                    ],
                    "topologySpreadConstraints": [
                        {
                            "maxSkew": 1,
                            "topologyKey": "kubernetes.io/hostname",
                            "whenUnsatisfiable": "ScheduleAnyway",
                            "labelSelector": {"matchLabels": dict(APP_LABELS)},
                        }
                    ],
                },
            },
        },
    }


def reader_secret(worker: ClusterSpec, kubeconfig: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": metadata(
            reader_secret_name(worker), FLEET_NAMESPACE, labels={WORKER_LABEL: worker.name}
        ),
        "stringData": {"kubeconfig": kubeconfig},
    }


def running_objects(spec: FleetSpec, image: str, config_text: str) -> list[dict[str, Any]]:
    """The dispatcher as pods on the manager: the Deployment, its metrics Service and its
    disruption budget."""
    return [
        deployment(spec, image, config_text),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": metadata(NAME, FLEET_NAMESPACE, labels=APP_LABELS),
            "spec": {
                "selector": dict(APP_LABELS),
                "ports": [{"name": "metrics", "port": 8080, "targetPort": "metrics"}],
            },
        },
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": metadata(NAME, FLEET_NAMESPACE),
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": dict(APP_LABELS)}},
        },
    ]


def token_secret() -> dict[str, Any]:
    """With `dispatcher.run: local`: a token of the dispatcher's own ServiceAccount for the
    process the user runs (the stack's `dispatcherKubeconfig`), filled in by the token
    controller; deleted with the stack, which revokes it."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/service-account-token",
        "metadata": metadata(
            TOKEN_SECRET, FLEET_NAMESPACE, annotations={"kubernetes.io/service-account.name": NAME}
        ),
    }


def dispatcher_objects(
    spec: FleetSpec,
    image: str,
    endpoints: Mapping[str, tuple[str, str]] | None = None,
    reader_kubeconfigs: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Everything the dispatcher needs on the manager; [] when it is disabled. Values only
    known at deploy time (image, endpoints, kubeconfigs) show as placeholders when absent."""
    if not spec.dispatcher.enabled:
        return []
    config_text = yaml_text(settings(spec, endpoints or {}))
    definition = crd()
    definition["metadata"] = metadata(definition["metadata"]["name"])
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata(FLEET_NAMESPACE)},
        definition,
        *rbac(spec),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": metadata(NAME, FLEET_NAMESPACE),
            "data": {SETTINGS_KEY: config_text},
        },
    ]
    if spec.dispatcher.run == "cluster":
        objects += running_objects(spec, image, config_text)
    else:
        objects.append(token_secret())
    policy = policy_object("default", default_policy(spec))
    policy["metadata"] = metadata("default")
    objects.append(policy)
    given = reader_kubeconfigs or {}
    for w in spec.workers:
        text = given.get(w.name, placeholder(w, "dispatcher read-only kubeconfig"))
        objects.append(reader_secret(w, text))
    return objects
