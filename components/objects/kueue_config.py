"""The Kueue controller Configuration (config.kueue.x-k8s.io/v1beta2) for each cluster.

Kueue decodes this file strictly: an unknown key stops the manager. Only keys of the
v1beta2 Configuration are written (research/kueue-api.md §2).
"""

from __future__ import annotations

import hashlib
from typing import Any

from components.model.frameworks import FRAMEWORKS, STATUS_NOT_MIRRORED
from components.model.problems import Problem
from components.model.spec import ClusterSpec, FleetSpec
from components.model.versions import (
    KUEUE_PLUGIN_DOCKERFILE,
    SECRETREADER_PLUGIN_IMAGE,
    SECRETREADER_PLUGIN_PATH,
    SHELL_LESS_PLUGIN_IMAGES,
)
from components.objects.labels import KUEUE_NAMESPACE, metadata
from components.objects.manifests import yaml_text

CONFIG_MAP = "kueue-manager-config"
CONFIG_KEY = "controller_manager_config.yaml"
# Where the access-provider plugin's volume is mounted in Kueue's pod.
PLUGIN_ROOT = "/plugins"
# On the kueue-controller-manager pod template: Kueue reads its Configuration (mounted with
# subPath, which a ConfigMap update never reaches) and its gate flags only at start, so a
# change of either must change the template, which rolls the Deployment.
RESTART_ANNOTATION = "multikueue-fleet/kueue-config-hash"
# Reconciles each of Kueue's controllers runs at once, per kind (the shipped Configuration's
# controller.groupKindConcurrency, v0.19.2).
GROUP_KIND_CONCURRENCY = {
    "Job.batch": 5,
    "Pod": 5,
    "Workload.kueue.x-k8s.io": 10,
    "LocalQueue.kueue.x-k8s.io": 5,
    "Cohort.kueue.x-k8s.io": 1,
    "ClusterQueue.kueue.x-k8s.io": 5,
    "ResourceFlavor.kueue.x-k8s.io": 1,
}


def integrations(spec: FleetSpec, cluster: ClusterSpec) -> list[str]:
    """Kueue integration names for a cluster: those of its frameworks, then the extras."""
    names = [
        i for key in cluster.frameworks if key in FRAMEWORKS for i in FRAMEWORKS[key].integrations
    ]
    return list(dict.fromkeys([*names, *spec.kueue.integrations]))


def external_frameworks(spec: FleetSpec, cluster: ClusterSpec) -> list[str]:
    return list(dict.fromkeys(e.name for e in spec.kueue.external_frameworks))


def status_not_mirrored(spec: FleetSpec, cluster: ClusterSpec) -> list[str]:
    """Integrations on a manager whose Workloads there can never get PodsReady."""
    if cluster.role != "manager":
        return []
    return [i for i in integrations(spec, cluster) if i in STATUS_NOT_MIRRORED]


def waits_for_pods_ready(spec: FleetSpec, cluster: ClusterSpec) -> bool:
    """Whether this cluster's Kueue evicts admitted work that does not get PodsReady in time.

    Kueue's workload controller does so with no MultiKueue exemption (v0.19.2
    pkg/controller/core/workload_controller.go, admittedNotReadyWorkload), and evicting the
    manager's Workload withdraws the copy running on the worker. So a manager that runs
    frameworks whose status is not mirrored does not wait, unless asked (and validation
    refuses that ask)."""
    w = spec.kueue.wait_for_pods_ready
    if not w.enabled:
        return False
    if cluster.role == "manager" and w.on_manager is not None:
        return w.on_manager
    return not status_not_mirrored(spec, cluster)


def derived_gates(spec: FleetSpec, cluster: ClusterSpec) -> dict[str, bool]:
    """Gates the fleet's own choices require, on top of what the user set."""
    gates: dict[str, bool] = {}
    if not waits_for_pods_ready(spec, cluster):
        # v1beta2 defaults waitForPodsReady whether or not it is written
        # (apis/config/v1beta2/defaults.go, SetDefaults_Configuration); only this Alpha gate
        # turns it off (pkg/util/waitforpodsready, Enabled). Upstream plans to drop the gate
        # in 0.21, together with the option of running without waitForPodsReady.
        gates["DisableWaitForPodsReady"] = True
    if cluster.role == "manager":
        if spec.credentials.mode == "clusterProfile":
            gates["MultiKueueClusterProfile"] = True
        if spec.dispatcher.enabled:
            # With merge patches Kueue nulls nominatedClusterNames explicitly when it
            # admits; under server-side apply our ownership of the field blocks admission.
            gates["WorkloadRequestUseMergePatch"] = True
    return gates


def feature_gates(spec: FleetSpec, cluster: ClusterSpec) -> tuple[dict[str, bool], bool]:
    """(gates, as_flags): every gate for the cluster and whether it goes in as CLI flags.
    Kueue refuses gates in both places, so derived gates follow the user's choice."""
    as_flags = bool(spec.kueue.feature_gate_flags)
    user = spec.kueue.feature_gate_flags if as_flags else spec.kueue.feature_gates
    return {**derived_gates(spec, cluster), **user}, as_flags


def feature_gate_args(spec: FleetSpec, cluster: ClusterSpec) -> list[str]:
    """Extra kueue-controller-manager arguments (only when gates are passed as flags)."""
    gates, as_flags = feature_gates(spec, cluster)
    if not as_flags or not gates:
        return []
    return [
        "--feature-gates=" + ",".join(f"{k}={str(v).lower()}" for k, v in sorted(gates.items()))
    ]


def _wait_for_pods_ready(spec: FleetSpec) -> dict[str, Any]:
    w = spec.kueue.wait_for_pods_ready
    strategy: dict[str, Any] = {
        "timestamp": w.requeuing_timestamp,
        "backoffBaseSeconds": w.backoff_base_seconds,
        "backoffMaxSeconds": w.backoff_max_seconds,
    }
    if w.backoff_limit_count is not None:
        strategy["backoffLimitCount"] = w.backoff_limit_count
    block: dict[str, Any] = {
        "timeout": w.timeout,
        "blockAdmission": w.block_admission,
        "requeuingStrategy": strategy,
    }
    if w.recovery_timeout is not None:
        block["recoveryTimeout"] = w.recovery_timeout
    return block


def _multikueue(spec: FleetSpec, cluster: ClusterSpec) -> dict[str, Any]:
    mk = spec.kueue.multikueue
    block: dict[str, Any] = {
        "gcInterval": mk.gc_interval,
        "origin": mk.origin,
        "workerLostTimeout": mk.worker_lost_timeout,
    }
    if spec.dispatcher.enabled:
        # Any name that is not a built-in makes Kueue leave nomination to us.
        block["dispatcherName"] = spec.dispatcher.name
    externals = external_frameworks(spec, cluster)
    if externals:
        block["externalFrameworks"] = [{"name": name} for name in externals]
    if spec.credentials.mode == "clusterProfile":
        cp = spec.credentials.cluster_profile
        block["clusterProfile"] = {
            "accessProviders": [
                {
                    "name": cp.access_provider,
                    "execConfig": {
                        "apiVersion": "client.authentication.k8s.io/v1",
                        "command": cp.plugin_path,
                        # The plugin learns which token Secret to read from the cluster extension,
                        # which it sees only with provideClusterInfo.
                        "provideClusterInfo": True,
                        "interactiveMode": "Never",
                    },
                }
            ]
        }
    return block


def configuration(spec: FleetSpec, cluster: ClusterSpec) -> dict[str, Any]:
    config: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": KUEUE_NAMESPACE,
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443", "enableClusterQueueResources": True},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "internalCertManagement": {
            "enable": True,
            "webhookServiceName": "kueue-webhook-service",
            "webhookSecretName": "kueue-webhook-server-cert",
        },
        # As Kueue's install ships them (config/components/manager/
        # controller_manager_config.yaml at v0.19.2). Left out, every controller would run
        # one reconcile at a time: controller-runtime's default when a kind has no entry
        # (pkg/controller/controller.go NewTypedUnmanaged), and Kueue's defaults.go sets
        # none. MultiKueue's Workload reconciler waits on 5-QPS clients to every worker in
        # each reconcile, so with one at a time a workload's copies waited behind every
        # other workload's reads (BENCHMARKS.md section 5).
        "controller": {"groupKindConcurrency": dict(GROUP_KIND_CONCURRENCY)},
        "clientConnection": {"qps": 300, "burst": 500},
        "integrations": {"frameworks": integrations(spec, cluster)},
    }
    externals = external_frameworks(spec, cluster)
    if externals:
        config["integrations"]["externalFrameworks"] = externals
    # Since 0.19 waitForPodsReady is on unless the opt-out gate is set, so it is written out
    # explicitly when on and left out (with the gate) when off.
    if waits_for_pods_ready(spec, cluster):
        config["waitForPodsReady"] = _wait_for_pods_ready(spec)
    if cluster.role == "manager":
        config["multiKueue"] = _multikueue(spec, cluster)
    gates, as_flags = feature_gates(spec, cluster)
    if gates and not as_flags:
        config["featureGates"] = dict(sorted(gates.items()))
    return config


# The keys of a Configuration the fleet depends on. The rest (probes, metrics, the webhook
# port, leader election, certificates, client rates) is how one runs Kueue: with
# `kueue.install: existing` that is its owner's choice, and Kueue's defaults apply to what
# is left out (apis/config/v1beta2/defaults.go at v0.19.2, SetDefaults_Configuration).
FLEET_KEYS = (
    "apiVersion",
    "kind",
    "namespace",
    "integrations",
    "waitForPodsReady",
    "multiKueue",
    "featureGates",
)


def fleet_configuration(spec: FleetSpec, cluster: ClusterSpec) -> dict[str, Any]:
    """What a Kueue the fleet does not install must run with: the fleet's keys of
    `configuration`, itself a valid Configuration."""
    return {k: v for k, v in configuration(spec, cluster).items() if k in FLEET_KEYS}


def startup_hash(spec: FleetSpec, cluster: ClusterSpec) -> str:
    """A digest of everything Kueue reads only at start: its Configuration and gate flags."""
    text = "\n".join(
        [config_map(spec, cluster)["data"][CONFIG_KEY], *feature_gate_args(spec, cluster)]
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def kueue_pod_annotations(spec: FleetSpec, cluster: ClusterSpec) -> dict[str, str]:
    return {RESTART_ANNOTATION: startup_hash(spec, cluster)}


def config_map(spec: FleetSpec, cluster: ClusterSpec) -> dict[str, Any]:
    """The ConfigMap the Kueue Deployment mounts its configuration from."""
    text = yaml_text(configuration(spec, cluster))
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(CONFIG_MAP, KUEUE_NAMESPACE),
        "data": {CONFIG_KEY: text},
    }


def pods_ready_problems(spec: FleetSpec) -> list[Problem]:
    """waitForPodsReady on a manager whose Workloads of some frameworks never get PodsReady:
    refused when asked for, explained when turned off for that reason."""
    w = spec.kueue.wait_for_pods_ready
    kinds = status_not_mirrored(spec, spec.manager)
    if not w.enabled or not kinds:
        return []
    why = (
        f"MultiKueue mirrors no status of {', '.join(kinds)} back to the manager, so their "
        "Workloads there never get PodsReady, and Kueue would evict them after "
        f"{w.timeout}, which withdraws the copy running on the worker"
    )
    gates = {**spec.kueue.feature_gates, **spec.kueue.feature_gate_flags}
    gate_path = (
        "kueue.featureGateFlags" if spec.kueue.feature_gate_flags else "kueue.featureGates"
    ) + ".DisableWaitForPodsReady"
    if w.on_manager:
        return [
            Problem(
                "kueue.waitForPodsReady.onManager",
                f"the manager cannot wait for PodsReady: {why}",
                "remove onManager (workers still wait for PodsReady), or take these "
                "frameworks off the manager",
            )
        ]
    if gates.get("DisableWaitForPodsReady") is False:
        return [
            Problem(
                gate_path,
                f"DisableWaitForPodsReady false turns waitForPodsReady on for the manager: {why}",
                "remove the entry (the stack sets the gate where waitForPodsReady is off)",
            )
        ]
    if w.on_manager is None:
        return [
            Problem(
                "kueue.waitForPodsReady",
                f"waitForPodsReady is off on the manager and on for the workers: {why}",
                "nothing to do; set kueue.waitForPodsReady.onManager to false to acknowledge "
                "it and not see this again",
                "note",
            )
        ]
    return []


def plugin_path_problems(spec: FleetSpec, mount: str | None) -> list[Problem]:
    """Kueue execs pluginPath as written (the ClusterProfile access provider's `command`,
    cluster-inventory-api v0.1.3 pkg/access/config.go): it must name a file, written plainly,
    and where the plugin arrives in a volume (imageVolume, initContainer) a file inside the
    folder that volume is mounted at, or Kueue finds nothing there."""
    path = spec.credentials.cluster_profile.plugin_path
    where = "credentials.clusterProfile.pluginPath"
    parts = path.split("/")[1:]
    if path.endswith("/") or any(p in ("", ".", "..") for p in parts):
        return [
            Problem(
                where,
                f"'{path}' does not name a file plainly (a trailing '/', an empty, '.' or '..' "
                "segment): Kueue runs the path as written",
                f"write the plugin binary's path without them, e.g. {SECRETREADER_PLUGIN_PATH}",
            )
        ]
    # A trailing '/' was refused above, so a path under the folder names a file in it.
    if mount in ("imageVolume", "initContainer") and not path.startswith(f"{PLUGIN_ROOT}/"):
        return [
            Problem(
                where,
                f"'{path}' is outside {PLUGIN_ROOT}, where the plugin's {mount} is mounted in "
                "Kueue's pod, so Kueue would find no plugin there",
                f"give the path under {PLUGIN_ROOT} (the image's /bin/NAME is "
                f"{PLUGIN_ROOT}/bin/NAME), e.g. {SECRETREADER_PLUGIN_PATH}",
            )
        ]
    return []


def plugin_image_problems(spec: FleetSpec, mount: str | None) -> list[Problem]:
    """The init container runs `sh -c "mkdir && cp"`: a plugin image without a shell (the
    official one, also the default) cannot be copied from, and no image with one is
    published (versions.KUEUE_PLUGIN_DOCKERFILE), so initContainer mode needs the user's."""
    image = spec.credentials.cluster_profile.plugin_image
    if mount != "initContainer" or not image.startswith(SHELL_LESS_PLUGIN_IMAGES):
        return []
    default = image == SECRETREADER_PLUGIN_IMAGE
    return [
        Problem(
            "credentials.clusterProfile.pluginImage",
            (
                "the plugin reaches Kueue through an init container here (pluginMount "
                f"{spec.credentials.cluster_profile.plugin_mount}, Kubernetes "
                f"{spec.manager.kubernetes_version}), which needs an image with sh and cp; "
                f"the default '{image}' has neither (it is built FROM scratch), and no "
                "image that has them is published"
                if default
                else f"'{image}' has no shell or cp (it is built FROM scratch, for image "
                "volumes), so the init container cannot copy the plugin out of it"
            ),
            "build the plugin with a shell (Kueue's alpine build: "
            f"{KUEUE_PLUGIN_DOCKERFILE}), push it and set pluginImage to it; or run the "
            "manager on Kubernetes 1.35+ (pluginMount imageVolume); or use pluginMount "
            "customImage",
        )
    ]
