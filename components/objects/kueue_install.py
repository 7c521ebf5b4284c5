"""Kueue's release manifest edited for one cluster: our Configuration in its ConfigMap,
feature-gate flags, the ClusterProfile access-provider plugin mounted into the controller,
or a custom image. Pure functions of the spec and the manifest's text (upstream/ fetches
it)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from components.model.spec import ClusterSpec, FleetSpec
from components.model.versions import IMAGE_VOLUME_MIN_KUBERNETES
from components.objects.kueue_config import (
    CONFIG_KEY,
    CONFIG_MAP,
    PLUGIN_ROOT,
    config_map,
    feature_gate_args,
    kueue_pod_annotations,
)
from components.objects.manifests import documents

KUEUE_DEPLOYMENT = "kueue-controller-manager"
KUEUE_CONTAINER = "manager"
PLUGIN_VOLUME = "access-provider-plugins"
KUEUE_USER = 65532  # the user Kueue v0.19.2 image runs as (its Dockerfile: USER 65532:65532)
# The init container's script: $1 the folder Kueue finds the plugin in, $2 the plugin's
# path in its image.
COPY_PLUGIN = 'mkdir -p "$1" && cp "$2" "$1/"'


def plugin_mount(spec: FleetSpec, cluster: ClusterSpec) -> str | None:
    """How the access-provider plugin reaches kueue-controller-manager, or None (also when
    Kueue is not the fleet's to edit: whoever installed it mounts the plugin)."""
    if cluster.role != "manager" or spec.credentials.mode != "clusterProfile":
        return None
    if spec.kueue.install == "existing":
        return None
    mode = spec.credentials.cluster_profile.plugin_mount
    if mode != "auto":
        return mode
    major, _, minor = (cluster.kubernetes_version or "0.0").partition(".")
    return (
        "imageVolume"
        if (int(major), int(minor)) >= IMAGE_VOLUME_MIN_KUBERNETES
        else "initContainer"
    )


def _edit_manager(deployment: dict[str, Any], spec: FleetSpec, cluster: ClusterSpec) -> None:
    template = deployment["spec"]["template"]
    annotations = template.setdefault("metadata", {}).setdefault("annotations", {})
    annotations.update(kueue_pod_annotations(spec, cluster))
    pod = template["spec"]
    container = next(c for c in pod["containers"] if c["name"] == KUEUE_CONTAINER)
    args = [a for a in container.get("args") or [] if not a.startswith("--feature-gates=")]
    container["args"] = args + feature_gate_args(spec, cluster)
    cp = spec.credentials.cluster_profile
    mode = plugin_mount(spec, cluster)
    if mode is None:
        return
    if mode == "customImage":
        container["image"] = cp.kueue_image
        return
    mount = {"name": PLUGIN_VOLUME, "mountPath": PLUGIN_ROOT, "readOnly": True}
    container["volumeMounts"] = [*(container.get("volumeMounts") or []), mount]
    volumes = pod.setdefault("volumes", [])
    if mode == "imageVolume":
        volumes.append(
            {
                "name": PLUGIN_VOLUME,
                "image": {"reference": cp.plugin_image, "pullPolicy": "IfNotPresent"},
            }
        )
        return
    # initContainer: copy the plugin out of its image into a shared emptyDir. The image must
    # have `sh` and `cp` (kueue_config.plugin_image_problems); the binary sits at plugin_path
    # with the /plugins prefix removed.
    source = cp.plugin_path.removeprefix(PLUGIN_ROOT) or cp.plugin_path
    target = str(Path(cp.plugin_path).parent)
    volumes.append({"name": PLUGIN_VOLUME, "emptyDir": {}})
    pod.setdefault("initContainers", []).append(
        {
            "name": "access-provider-plugin",
            "image": cp.plugin_image,
            # The paths go in as the script's arguments, never into its text: a path with
            # a shell character in it (`;`, `$(...)`) is then only a strange file name.
            "command": ["sh", "-c", COPY_PLUGIN, "copy-plugin", target, source],
            "volumeMounts": [{"name": PLUGIN_VOLUME, "mountPath": PLUGIN_ROOT}],
            # Kueue's pod runs with runAsNonRoot (config/components/manager/manager.yaml,
            # v0.19.2), so an image whose user is root (most images with a shell) would
            # not start: the copy runs as the user Kueue's own image runs as (distroless
            # nonroot), which then owns the copy. The plugin file must be readable by it.
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": KUEUE_USER,
                "runAsGroup": KUEUE_USER,
                "readOnlyRootFilesystem": True,
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
            },
        }
    )


def kueue_objects(text: str, spec: FleetSpec, cluster: ClusterSpec) -> list[dict[str, Any]]:
    """Kueue's release manifests with this cluster's configuration applied."""
    objects = [copy.deepcopy(d) for d in documents(text)]
    ours = config_map(spec, cluster)
    found = set()
    for obj in objects:
        meta = obj.get("metadata") or {}
        if obj["kind"] == "ConfigMap" and meta.get("name") == CONFIG_MAP:
            obj["data"] = {CONFIG_KEY: ours["data"][CONFIG_KEY]}
            found.add("config")
        elif obj["kind"] == "Deployment" and meta.get("name") == KUEUE_DEPLOYMENT:
            _edit_manager(obj, spec, cluster)
            found.add("deployment")
    names = {"config": f"{CONFIG_MAP} ConfigMap", "deployment": f"{KUEUE_DEPLOYMENT} Deployment"}
    missing = [names[k] for k in sorted(names) if k not in found]
    if not missing:
        _deployment_after_config(objects)
    if missing:
        raise RuntimeError(
            f"the Kueue {spec.kueue.version} manifests have no {' and no '.join(missing)}; "
            "the fleet's configuration is applied by editing them, so this release's layout "
            "is not one this version of multikueue-fleet knows"
        )
    return objects


# pulumi-kubernetes yaml/v2 orders the objects of one ConfigGroup by this annotation
# (pulumi/pulumi-kubernetes#2894, after kubernetes-sigs/cli-utils' resource ordering;
# https://www.pulumi.com/registry/packages/kubernetes/api-docs/yaml/v2/configgroup/,
# "Explicit Dependency Ordering"): a reference is <group>/namespaces/<ns>/<kind>/<name>,
# the core group empty. Without it the ConfigMap and the Deployment are applied in
# parallel, and a Kueue that starts first reads the release's default configuration.
DEPENDS_ON = "config.kubernetes.io/depends-on"


def _deployment_after_config(objects: list[dict[str, Any]]) -> None:
    config = next(
        o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == CONFIG_MAP
    )
    ref = (
        f"/namespaces/{config['metadata'].get('namespace', 'kueue-system')}/ConfigMap/{CONFIG_MAP}"
    )
    for obj in objects:
        if obj["kind"] == "Deployment" and obj["metadata"]["name"] == KUEUE_DEPLOYMENT:
            annotations = obj["metadata"].setdefault("annotations", {})
            refs = [r for r in (annotations.get(DEPENDS_ON) or "").split(",") if r]
            annotations[DEPENDS_ON] = ",".join(dict.fromkeys([*refs, ref]))
