"""Kueue brought by someone else (`kueue.install: existing`): what such a stack may not ask
for, and, at deploy time, whether a cluster serves what the fleet's objects need.

The fleet then owns nothing of Kueue's install: not its Deployment (so no gate flags, no
access-provider plugin mount, no custom image), not its CRDs or webhooks, and not the
ClusterProfile CRD, which Kueue looks for only once, at start. What the fleet still writes
into Kueue's namespace (a worker's `multikueue` identity, the manager's credential Secrets,
which MultiKueue reads from the namespace of its Configuration) needs that namespace to be
there. Kueue itself must run with the Configuration `render` writes to
`kueue-configuration.yaml` (the dispatcher's name and gates, the integrations, MultiKueue's
origin); nothing reads a running Kueue's configuration back, so that stays the operator's
to compare.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from components.model.problems import Problem, key_path
from components.model.spec import ClusterProfileSettings, FleetSpec
from components.objects.labels import KUEUE_API, KUEUE_NAMESPACE

CLUSTER_PROFILE_API = "multicluster.x-k8s.io/v1alpha1"
# What an existing install must serve whatever the cluster gets: MultiKueue and the
# dispatcher read and write Workloads on every cluster.
ALWAYS_NEEDED = {KUEUE_API: ("Workload",)}
# The ClusterProfile settings that change how kueue-controller-manager is deployed.
DEPLOYMENT_EDITS = ("plugin_mount", "plugin_image", "kueue_image")


def existing_kueue(spec: FleetSpec) -> Iterator[Problem]:
    """A validate rule: what `kueue.install: existing` cannot go with."""
    if spec.kueue.install != "existing":
        return
    for cluster in spec.clusters:
        if cluster.provider != "existing":
            yield Problem(
                key_path(cluster.path, "provider"),
                f"kueue.install is existing, but the fleet creates this {cluster.provider} "
                "cluster, so no one can have installed Kueue on it yet",
                "set kueue.install: managed, or list only clusters with provider: existing",
            )
    if spec.kueue.feature_gate_flags:
        yield Problem(
            "kueue.featureGateFlags",
            "gate flags go on kueue-controller-manager's command line, which the fleet does "
            "not manage with kueue.install: existing",
            "move them to kueue.featureGates (render shows them in the Configuration your "
            "Kueue must run with)",
        )
    if spec.credentials.mode != "clusterProfile":
        return
    settings = spec.credentials.cluster_profile
    for name in DEPLOYMENT_EDITS:
        field = ClusterProfileSettings.model_fields[name]
        if getattr(settings, name) != field.default:
            yield Problem(
                f"credentials.clusterProfile.{field.alias}",
                f"{field.alias} changes how kueue-controller-manager is deployed, which the "
                "fleet does not manage with kueue.install: existing",
                f"remove it, and mount the access-provider plugin at {settings.plugin_path} "
                "(pluginPath) in your Kueue yourself",
            )


def required_apis(objects: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """apiVersion -> the kinds a cluster's objects need its existing Kueue install to serve
    (Kueue's own, and ClusterProfile, whose CRD must be there before Kueue starts)."""
    needed = {api: set(kinds) for api, kinds in ALWAYS_NEEDED.items()}
    for obj in objects:
        if obj["apiVersion"] in (KUEUE_API, CLUSTER_PROFILE_API):
            needed.setdefault(obj["apiVersion"], set()).add(obj["kind"])
    return {api: sorted(kinds) for api, kinds in sorted(needed.items())}


def unserved(
    cluster: str,
    version: str,
    required: Mapping[str, list[str]],
    served: Mapping[str, set[str] | None],
    namespace_found: bool,
) -> list[str]:
    """One line per thing the cluster lacks, saying what to do; [] when it has it all.
    `served`: apiVersion -> the kinds discovery lists, None when it serves no such API."""
    problems: list[str] = []
    for api, kinds in required.items():
        listed = served.get(api)
        if api == CLUSTER_PROFILE_API:
            missing = kinds if listed is None else [k for k in kinds if k not in listed]
            if missing:
                problems.append(
                    f"cluster '{cluster}' serves no {api} ClusterProfile, which "
                    "credentials.mode clusterProfile needs: install the ClusterProfile CRD "
                    "(cluster-inventory-api) and restart Kueue (it looks for the CRD only at "
                    "start), or use credentials.mode: kubeconfigSecret"
                )
        elif listed is None:
            problems.append(
                f"cluster '{cluster}' serves no {api} API, so Kueue is not installed there "
                f"(kueue.install is existing): install Kueue {version} on it, running with "
                "the Configuration in render's kueue-configuration.yaml, or set "
                "kueue.install: managed"
            )
        else:
            missing = [k for k in kinds if k not in listed]
            if missing:
                problems.append(
                    f"cluster '{cluster}' serves {api} without {', '.join(missing)}: its Kueue "
                    f"is not the {version} this stack expects; install Kueue {version} there"
                )
    if not namespace_found:
        problems.append(
            f"cluster '{cluster}' has no namespace {KUEUE_NAMESPACE}: the fleet puts "
            "MultiKueue's identity and credentials there, the namespace Kueue's "
            f"Configuration names; run Kueue in {KUEUE_NAMESPACE}, or set kueue.install: managed"
        )
    return problems
