"""How MultiKueue on the manager reaches the workers: ClusterProfile mode (its gate, the
dispatcher that writes the profiles' access providers, the access-provider plugin's mount,
image and path, a custom Kueue image) and worker kubeconfigs as Kueue accepts them."""

from __future__ import annotations

from collections.abc import Iterator

from components.checks.kueue_settings import written_gates
from components.checks.rule import error
from components.model.fieldtypes import minor_tuple
from components.model.problems import Problem, did_you_mean, key_path
from components.model.spec import FleetSpec
from components.model.versions import IMAGE_VOLUME_MIN_KUBERNETES
from components.objects.kubeconfig import KUBECONFIG_FIX, kueue_rejections
from components.objects.kueue_config import plugin_image_problems, plugin_path_problems
from components.objects.kueue_install import plugin_mount


def cluster_profile_mode(spec: FleetSpec) -> Iterator[Problem]:
    if spec.credentials.mode != "clusterProfile":
        return
    cp = spec.credentials.cluster_profile
    if written_gates(spec).get("MultiKueueClusterProfile") is False:
        yield error(
            "kueue.featureGates.MultiKueueClusterProfile",
            "ClusterProfile mode needs the MultiKueueClusterProfile gate, which is set to false",
            "remove the entry (the stack turns the gate on) or use "
            "credentials.mode: kubeconfigSecret",
        )
    if not spec.dispatcher.enabled:
        yield error(
            "dispatcher.enabled",
            "ClusterProfile mode needs the dispatcher: it writes the profiles' "
            "status.accessProviders, without which Kueue cannot reach a worker",
            "set dispatcher.enabled: true, or use credentials.mode: kubeconfigSecret",
        )
    version = spec.manager.kubernetes_version
    # An existing Kueue gets the plugin from whoever installed it (existing_kueue).
    mounts = spec.kueue.install == "managed"
    if mounts and cp.plugin_mount in ("imageVolume", "auto") and version is None:
        yield error(
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
        yield error(
            "credentials.clusterProfile.pluginMount",
            f"image volumes need Kubernetes 1.35 or newer; the manager runs {version}",
            "use pluginMount: initContainer (or auto, which picks it)",
        )
    yield from plugin_image_problems(spec, plugin_mount(spec, spec.manager))
    yield from plugin_path_problems(spec, plugin_mount(spec, spec.manager))
    if mounts and cp.plugin_mount == "customImage" and not cp.kueue_image:
        yield error(
            "credentials.clusterProfile.kueueImage",
            "pluginMount customImage needs the Kueue image that holds the plugin",
            "set credentials.clusterProfile.kueueImage",
        )
    for name in spec.worker_kubeconfigs:
        yield error(
            key_path("workerKubeconfigs", name),
            "worker kubeconfigs are not used in ClusterProfile mode",
            "remove workerKubeconfigs or use credentials.mode: kubeconfigSecret",
        )


def kueue_image_needs_custom_mount(spec: FleetSpec) -> Iterator[Problem]:
    cp = spec.credentials.cluster_profile
    managed = spec.kueue.install == "managed"  # else existing_kueue refuses kueueImage
    if managed and cp.kueue_image and cp.plugin_mount != "customImage":
        yield error(
            "credentials.clusterProfile.kueueImage",
            "kueueImage is used only with pluginMount: customImage",
            "remove it, or set pluginMount: customImage",
        )


def worker_kubeconfigs(spec: FleetSpec) -> Iterator[Problem]:
    workers = {w.name for w in spec.workers}
    for name, secret in spec.worker_kubeconfigs.items():
        path = key_path("workerKubeconfigs", name)
        if name not in workers:
            yield error(
                path,
                f"no worker is named '{name}'",
                f"{did_you_mean(name, workers)}use a name from workers[].name",
            )
        if secret.value is not None:
            for reason in kueue_rejections(secret.value):
                yield error(path, f"Kueue would reject this kubeconfig: {reason}", KUBECONFIG_FIX)
