"""The dispatcher's settings: a name Kueue hands nominations to (not a built-in one), the
gate its writes need, an inventory only in ClusterProfile mode, where its image comes from,
a cluster selector some worker matches, and durations its settings loader accepts."""

from __future__ import annotations

from collections.abc import Iterator

from components.checks.kueue_settings import written_gates
from components.checks.rule import error, warn
from components.model.fieldtypes import duration_seconds
from components.model.problems import Problem
from components.model.spec import FleetSpec
from controller.api import MAX_SELECTOR_LABELS, WORKER_LOST_TIMEOUT_MAX

# Kueue v0.19.2's own dispatchers, by their names in its configuration
# (apis/config/v1beta2/configuration_types.go 395-399).
BUILTIN_DISPATCHERS = {
    "AllAtOnce": "kueue.x-k8s.io/multikueue-dispatcher-all-at-once",
    "Incremental": "kueue.x-k8s.io/multikueue-dispatcher-incremental",
}


def dispatcher(spec: FleetSpec) -> Iterator[Problem]:
    d = spec.dispatcher
    if not d.enabled:
        return
    if d.name in BUILTIN_DISPATCHERS.values():
        yield error(
            "dispatcher.name",
            f"'{d.name}' is a built-in Kueue dispatcher",
            "choose another name: Kueue would run its own dispatcher and ignore ours",
        )
    if written_gates(spec).get("WorkloadRequestUseMergePatch") is False:
        yield error(
            "kueue.featureGates.WorkloadRequestUseMergePatch",
            "the dispatcher needs WorkloadRequestUseMergePatch, which is set to false",
            "remove the entry (the stack turns it on): without it Kueue's server-side "
            "apply keeps our nominations and never admits the workload",
        )
    if d.inventory and spec.credentials.mode != "clusterProfile":
        # An inventory MultiKueueCluster points at a ClusterProfile; Kueue v0.19.2 marks it
        # inactive unless MultiKueueClusterProfile is on (pkg/controller/admissionchecks/
        # multikueue/multikueuecluster.go:927-930), which only ClusterProfile mode turns on,
        # with the access-provider plugin it reads the profile's credentials through.
        yield error(
            "dispatcher.inventory",
            "inventory adds ClusterProfiles to MultiKueue, which Kueue connects to only in "
            f"ClusterProfile mode; with credentials.mode {spec.credentials.mode} every "
            "inventory MultiKueueCluster stays inactive",
            "set credentials.mode: clusterProfile, or remove dispatcher.inventory",
        )
    if d.run == "local":
        # Nothing is built or pulled: a value here would be silently ignored.
        for key, field in (("image",) * 2, ("registry",) * 2, ("platform",) * 2,
                           ("base_image", "baseImage")):  # fmt: skip
            if getattr(d, key) is not None:
                yield error(
                    f"dispatcher.{field}",
                    "is set, but with dispatcher.run: local no image is built or run",
                    f"remove dispatcher.{field}, or set dispatcher.run: cluster",
                )
    elif d.image and d.base_image:
        yield error(
            "dispatcher.baseImage",
            "is set, but dispatcher.image names the image to run, so nothing is built from it",
            "remove dispatcher.baseImage, or remove dispatcher.image to build from controller/",
        )
    elif spec.manager.provider != "kind" and not d.image and not d.registry:
        yield error(
            "dispatcher.registry",
            "the dispatcher image must be pushed somewhere the manager can pull from",
            "set dispatcher.registry (for example europe-docker.pkg.dev/PROJECT/REPO) or "
            "dispatcher.image to a built image",
        )
    selector = d.policy.cluster_selector
    if len(selector) > MAX_SELECTOR_LABELS:
        yield error(
            "dispatcher.policy.clusterSelector",
            f"{len(selector)} labels, but a DispatchPolicy's selector holds at most "
            f"{MAX_SELECTOR_LABELS}",
            "select workers by fewer labels (give the workers one label that says it)",
        )
    if selector and not any(
        all(w.labels.get(k) == v for k, v in selector.items()) for w in spec.workers
    ):
        yield warn(
            "dispatcher.policy.clusterSelector",
            "no worker has all these labels, so no workload would be dispatched",
            "add the labels to workers[].labels, or change the selector",
        )


def dispatcher_durations(spec: FleetSpec) -> Iterator[Problem]:
    """Durations the stack renders into the dispatcher's settings file, checked against
    what its loader (controller/settings.py) accepts, so the dispatcher starts."""
    if not spec.dispatcher.enabled:
        return
    lost = duration_seconds(spec.kueue.multikueue.worker_lost_timeout)
    if lost > WORKER_LOST_TIMEOUT_MAX:
        yield Problem(
            "kueue.multiKueue.workerLostTimeout",
            f"{spec.kueue.multikueue.worker_lost_timeout} is longer than the dispatcher "
            f"takes ({WORKER_LOST_TIMEOUT_MAX / 3600:g}h): it is written to its settings as "
            "workerLostTimeoutSeconds, and the dispatcher would not start",
            f"use at most {WORKER_LOST_TIMEOUT_MAX / 3600:g}h (Kueue's default is 15m)",
        )
