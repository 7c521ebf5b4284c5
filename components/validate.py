"""Fleet-wide checks on a FleetSpec, run before any resource is registered.

Each check names the config path at fault and how to fix it; all problems are reported
at once. The rules come from what Kueue 0.19 refuses at start-up or silently breaks on
(research/kueue-api.md), and from what MultiKueue needs across manager and workers.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from components import kueue_gates, quantity
from components.frameworks import (
    FRAMEWORKS,
    REMOVED_FRAMEWORKS,
    framework_of_integration,
    known_integrations,
)
from components.kubeconfig import KUBECONFIG_FIX, kueue_rejections
from components.kueue_config import plugin_image_problems, pods_ready_problems
from components.problems import Problem, did_you_mean
from components.spec import ClusterSpec, FleetSpec, key_path
from components.upstream import plugin_mount
from components.versions import IMAGE_VOLUME_MIN_KUBERNETES, KUEUE_SUPPORTED_MINOR

MAX_WORKERS = 20  # MultiKueueConfig.spec.clusters holds at most 20 names
BUILTIN_DISPATCHERS = (
    "kueue.x-k8s.io/multikueue-dispatcher-all-at-once",
    "kueue.x-k8s.io/multikueue-dispatcher-incremental",
)
RESERVED_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease", "kueue-system")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
DURATION = re.compile(r"^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$")
KIND_VERSION_GROUP = re.compile(r"^[A-Z][A-Za-z0-9]*\.v[0-9][a-z0-9]*\.[a-z0-9.-]+$")
# kind names the node container <cluster>-control-plane, a hostname (<= 63 characters).
KIND_NAME_MAX = 63 - len("-control-plane")


class _Checks:
    def __init__(self, spec: FleetSpec) -> None:
        self.spec = spec
        self.problems: list[Problem] = []

    def error(self, path: str, message: str, hint: str = "") -> None:
        self.problems.append(Problem(path, message, hint))

    def warn(self, path: str, message: str, hint: str = "") -> None:
        self.problems.append(Problem(path, message, hint, "warning"))

    # --- names ---------------------------------------------------------------------------

    def dns_label(self, name: str, path: str, what: str) -> None:
        if name and (len(name) > 63 or not DNS_LABEL.match(name)):
            self.error(
                path,
                f"{what} '{name}' is not a valid DNS label",
                "use at most 63 lower-case letters, digits and '-', starting and "
                "ending with a letter or digit",
            )

    def dns_subdomain(self, name: str, path: str, what: str) -> None:
        if name and (len(name) > 253 or not DNS_SUBDOMAIN.match(name)):
            self.error(
                path,
                f"{what} '{name}' is not a valid Kubernetes object name",
                "use lower-case letters, digits, '-' and '.', starting and ending "
                "with a letter or digit",
            )

    def unique(self, names: Iterable[tuple[str, str]], what: str) -> None:
        seen: dict[str, str] = {}
        for name, path in names:
            if name in seen:
                self.error(
                    path,
                    f"duplicate {what} '{name}' (also at {seen[name]})",
                    f"give each {what} its own name",
                )
            else:
                seen[name] = path

    def labels(self, labels: dict[str, str], path: str) -> None:
        for key, value in labels.items():
            prefix, _, name = key.rpartition("/")
            if (
                not LABEL_NAME.match(name)
                or len(name) > 63
                or (prefix and not DNS_SUBDOMAIN.match(prefix))
            ):
                self.error(
                    key_path(path, key),
                    f"'{key}' is not a valid label key",
                    "use [prefix/]name, name at most 63 letters, digits, '-', '_', '.'",
                )
            if len(value) > 63 or not LABEL_VALUE.match(value):
                self.error(
                    key_path(path, key),
                    f"'{value}' is not a valid label value",
                    "use at most 63 letters, digits, '-', '_', '.'",
                )

    def duration(self, value: str | None, path: str) -> None:
        if value is not None and not DURATION.match(value):
            self.error(
                path,
                f"'{value}' is not a duration",
                "write it the Go way, for example 30s, 5m, 1h30m",
            )

    # --- clusters ------------------------------------------------------------------------

    def clusters(self) -> None:
        spec = self.spec
        if not spec.workers:
            self.error("workers", "a fleet needs at least one worker", "add an entry to workers")
        if len(spec.workers) > MAX_WORKERS:
            self.error(
                "workers",
                f"{len(spec.workers)} workers, but one MultiKueueConfig holds at "
                f"most {MAX_WORKERS} clusters",
                "split the fleet into several stacks (one manager each), or drop workers",
            )
        self.dns_label(spec.fleet_name, "fleetName", "fleet name")
        self.unique(((c.name, key_path(c.path, "name")) for c in spec.clusters), "cluster name")
        for c in spec.clusters:
            self.dns_label(c.name, key_path(c.path, "name"), "cluster name")
            self.labels(c.labels, key_path(c.path, "labels"))
            self.labels(c.node_labels, key_path(c.path, "nodeLabels"))
            if c.provider == "kind" and len(c.physical_name(spec.fleet_name)) > KIND_NAME_MAX:
                self.error(
                    key_path(c.path, "name"),
                    f"kind cluster name '{c.physical_name(spec.fleet_name)}' is longer "
                    f"than {KIND_NAME_MAX} characters",
                    "shorten fleetName or the cluster name",
                )
            if (
                c.existing is not None
                and c.existing.server
                and not c.existing.server.startswith("https://")
            ):
                self.error(
                    key_path(c.path, "existing.server"),
                    "the server must be an https:// URL",
                    "Kueue refuses plain-http and insecure worker connections",
                )
            if c.role == "worker" and c.provider == "kind" and spec.manager.provider != "kind":
                self.error(
                    key_path(c.path, "provider"),
                    f"kind worker '{c.name}' cannot be reached by a "
                    f"{spec.manager.provider} manager",
                    "a kind worker is reachable only from a kind manager on the same "
                    "Docker host; use kind for the manager too, or another provider here",
                )
        self.frameworks()

    def frameworks(self) -> None:
        spec = self.spec
        for c in spec.clusters:
            fpath = key_path(c.path, "frameworks")
            for i, name in enumerate(c.frameworks):
                if name in REMOVED_FRAMEWORKS:
                    self.error(
                        key_path(fpath, i),
                        REMOVED_FRAMEWORKS[name],
                        f"remove '{name}' from {fpath}",
                    )
                    continue
                if name not in FRAMEWORKS:
                    self.error(
                        key_path(fpath, i),
                        f"unknown framework '{name}'",
                        f"{did_you_mean(name, FRAMEWORKS)}known frameworks: "
                        f"{', '.join(FRAMEWORKS)}",
                    )
                    continue
                for needed in FRAMEWORKS[name].requires:
                    if needed not in c.frameworks:
                        self.error(
                            fpath,
                            f"'{name}' needs '{needed}' on cluster '{c.name}'",
                            f"add '{needed}' to {fpath}",
                        )
        for w in spec.workers:
            missing = [
                f for f in spec.manager.frameworks if f in FRAMEWORKS and f not in w.frameworks
            ]
            for name in missing:
                self.error(
                    key_path(w.path, "frameworks"),
                    f"'{name}' is enabled on the manager but not installed on worker '{w.name}'",
                    f"add '{name}' to {key_path(w.path, 'frameworks')}: MultiKueue watches "
                    "every enabled kind on every worker and marks the whole worker "
                    "inactive when one is missing",
                )
        known = known_integrations()
        for i, name in enumerate(spec.kueue.integrations):
            path = key_path("kueue.integrations", i)
            if name not in known:
                self.error(
                    path,
                    f"'{name}' is not a Kueue integration",
                    f"{did_you_mean(name, known)}known: {', '.join(known)}",
                )
                continue
            fw = framework_of_integration(name)
            if fw is None:
                continue
            for c in spec.clusters:
                if fw.key not in c.frameworks:
                    self.error(
                        path,
                        f"'{name}' needs framework '{fw.key}' on cluster '{c.name}'",
                        f"add '{fw.key}' to {key_path(c.path, 'frameworks')}, or drop "
                        "the integration",
                    )
        self.external_frameworks()

    def external_frameworks(self) -> None:
        spec = self.spec
        builtin_kinds = {fw_name.split("/")[-1] for fw_name in known_integrations()}
        seen: set[str] = set()
        for ext in spec.kueue.external_frameworks:
            path = key_path(ext.path, "name")
            if not KIND_VERSION_GROUP.match(ext.name):
                self.error(
                    path,
                    f"'{ext.name}' is not Kind.version.group",
                    "write it like PipelineRun.v1.tekton.dev (Kind is case-sensitive)",
                )
                continue
            kind = ext.parts[0]
            if ext.name in seen:
                self.error(path, f"'{ext.name}' is listed twice", "list each kind once")
            seen.add(ext.name)
            if kind.lower() in builtin_kinds:
                self.error(
                    path,
                    f"'{ext.name}' has a built-in Kueue integration",
                    "enable it under kueue.integrations or a cluster's frameworks instead",
                )

    # --- Kueue ---------------------------------------------------------------------------

    def kueue(self) -> None:
        k = self.spec.kueue
        if not k.version.startswith(KUEUE_SUPPORTED_MINOR):
            self.error(
                "kueue.version",
                f"Kueue {k.version} is not supported by this release",
                f"use a {KUEUE_SUPPORTED_MINOR}x version: Kueue decodes its config "
                "strictly and the keys and gates written here are those of that minor",
            )
        if k.feature_gates and k.feature_gate_flags:
            self.error(
                "kueue.featureGateFlags",
                "feature gates are set both in the config and as --feature-gates flags",
                "Kueue refuses to start with both; move every gate to kueue.featureGates",
            )
        for key in ("featureGates", "featureGateFlags"):
            gates = k.feature_gates if key == "featureGates" else k.feature_gate_flags
            for name, value in gates.items():
                self.gate(name, value, key_path(key_path("kueue", key), name))
        gates = {**k.feature_gates, **k.feature_gate_flags}
        prefix = "kueue.featureGateFlags" if k.feature_gate_flags else "kueue.featureGates"
        self.problems.extend(kueue_gates.gate_problems(gates, prefix))
        self.problems.extend(pods_ready_problems(self.spec))
        if not kueue_gates.effective(gates, "TopologyAwareScheduling") and any(
            f.topology for f in self.spec.queues.flavors
        ):
            self.error(
                "kueue.featureGates.TopologyAwareScheduling",
                "TopologyAwareScheduling is off but a flavor uses a topology",
                "turn the gate on or remove `topology` from the flavors",
            )
        mk = k.multikueue
        if len(mk.origin) > 63 or not LABEL_VALUE.match(mk.origin) or not mk.origin:
            self.error(
                "kueue.multiKueue.origin",
                f"'{mk.origin}' is not a valid label value",
                "Kueue stamps the origin as a label on remote objects: use at most 63 "
                "letters, digits, '-', '_', '.'",
            )
        self.duration(mk.gc_interval, "kueue.multiKueue.gcInterval")
        self.duration(mk.worker_lost_timeout, "kueue.multiKueue.workerLostTimeout")
        w = k.wait_for_pods_ready
        self.duration(w.timeout, "kueue.waitForPodsReady.timeout")
        self.duration(w.recovery_timeout, "kueue.waitForPodsReady.recoveryTimeout")

    def gate(self, name: str, value: bool, path: str) -> None:
        if name in kueue_gates.REMOVED_GATES:
            self.error(
                path,
                f"feature gate '{name}' does not exist in Kueue 0.19 "
                f"({kueue_gates.REMOVED_GATES[name]})",
                "delete it: Kueue stops at start-up on an unknown gate",
            )
            return
        gate = kueue_gates.GATES.get(name)
        if gate is None:
            self.error(
                path,
                f"unknown feature gate '{name}'",
                f"{did_you_mean(name, kueue_gates.GATES)}Kueue stops at start-up on an "
                "unknown gate",
            )
        elif gate.locked and value != gate.default:
            self.error(
                path,
                f"feature gate '{name}' is locked to {str(gate.default).lower()} in Kueue 0.19",
                "delete it: Kueue refuses to change a locked gate",
            )
        elif gate.locked:
            self.warn(
                path,
                f"feature gate '{name}' is locked in 0.19 and will be removed",
                "delete it now, or the next Kueue minor will refuse to start",
            )

    # --- credentials and dispatcher ------------------------------------------------------

    def credentials(self) -> None:
        spec = self.spec
        gates = {**spec.kueue.feature_gates, **spec.kueue.feature_gate_flags}
        cp = spec.credentials.cluster_profile
        if spec.credentials.mode == "clusterProfile":
            if gates.get("MultiKueueClusterProfile") is False:
                self.error(
                    "kueue.featureGates.MultiKueueClusterProfile",
                    "ClusterProfile mode needs the MultiKueueClusterProfile gate, "
                    "which is set to false",
                    "remove the entry (the stack turns the gate on) or use "
                    "credentials.mode: kubeconfigSecret",
                )
            if not spec.dispatcher.enabled:
                self.error(
                    "dispatcher.enabled",
                    "ClusterProfile mode needs the dispatcher: it writes the profiles' "
                    "status.accessProviders, without which Kueue cannot reach a worker",
                    "set dispatcher.enabled: true, or use credentials.mode: kubeconfigSecret",
                )
            version = _minor_tuple(spec.manager.kubernetes_version)
            if cp.plugin_mount in ("imageVolume", "auto") and version is None:
                self.error(
                    "manager.kubernetesVersion",
                    "the manager's Kubernetes version is unknown, so the access-provider "
                    "plugin mount cannot be chosen",
                    "set manager.kubernetesVersion, or credentials.clusterProfile."
                    "pluginMount to initContainer or customImage",
                )
            elif cp.plugin_mount == "imageVolume" and version < IMAGE_VOLUME_MIN_KUBERNETES:
                self.error(
                    "credentials.clusterProfile.pluginMount",
                    f"image volumes need Kubernetes 1.35 or newer; the manager runs "
                    f"{spec.manager.kubernetes_version}",
                    "use pluginMount: initContainer (or auto, which picks it)",
                )
            self.problems.extend(plugin_image_problems(spec, plugin_mount(spec, spec.manager)))
            if cp.plugin_mount == "customImage" and not cp.kueue_image:
                self.error(
                    "credentials.clusterProfile.kueueImage",
                    "pluginMount customImage needs the Kueue image that holds the plugin",
                    "set credentials.clusterProfile.kueueImage",
                )
            for name in spec.worker_kubeconfigs:
                self.error(
                    key_path("workerKubeconfigs", name),
                    "worker kubeconfigs are not used in ClusterProfile mode",
                    "remove workerKubeconfigs or use credentials.mode: kubeconfigSecret",
                )
        if cp.kueue_image and cp.plugin_mount != "customImage":
            self.error(
                "credentials.clusterProfile.kueueImage",
                "kueueImage is used only with pluginMount: customImage",
                "remove it, or set pluginMount: customImage",
            )
        workers = {w.name for w in spec.workers}
        for name, secret in spec.worker_kubeconfigs.items():
            path = key_path("workerKubeconfigs", name)
            if name not in workers:
                self.error(
                    path,
                    f"no worker is named '{name}'",
                    f"{did_you_mean(name, workers)}use a name from workers[].name",
                )
            if secret.value is not None:
                for reason in kueue_rejections(secret.value):
                    self.error(
                        path, f"Kueue would reject this kubeconfig: {reason}", KUBECONFIG_FIX
                    )

    def dispatcher(self) -> None:
        d = self.spec.dispatcher
        gates = {**self.spec.kueue.feature_gates, **self.spec.kueue.feature_gate_flags}
        if not d.enabled:
            return
        if d.name in BUILTIN_DISPATCHERS:
            self.error(
                "dispatcher.name",
                f"'{d.name}' is a built-in Kueue dispatcher",
                "choose another name: Kueue would run its own dispatcher and ignore ours",
            )
        if gates.get("WorkloadRequestUseMergePatch") is False:
            self.error(
                "kueue.featureGates.WorkloadRequestUseMergePatch",
                "the dispatcher needs WorkloadRequestUseMergePatch, which is set to false",
                "remove the entry (the stack turns it on): without it Kueue's "
                "server-side apply keeps our nominations and never admits the workload",
            )
        if self.spec.manager.provider != "kind" and not d.image and not d.registry:
            self.error(
                "dispatcher.registry",
                "the dispatcher image must be pushed somewhere the manager can pull from",
                "set dispatcher.registry (for example "
                "europe-docker.pkg.dev/PROJECT/REPO) or dispatcher.image to a built image",
            )
        self.duration(d.policy.widen_after, "dispatcher.policy.widenAfter")
        self.labels(d.policy.cluster_selector, "dispatcher.policy.clusterSelector")
        selector = d.policy.cluster_selector
        if selector and not any(
            all(w.labels.get(k) == v for k, v in selector.items()) for w in self.spec.workers
        ):
            self.warn(
                "dispatcher.policy.clusterSelector",
                "no worker has all these labels, so no workload would be dispatched",
                "add the labels to workers[].labels, or change the selector",
            )

    # --- queues --------------------------------------------------------------------------

    def queues(self) -> None:
        q = self.spec.queues
        self.unique(((f.name, f.path) for f in q.flavors), "ResourceFlavor")
        self.unique(((t.name, t.path) for t in q.topologies), "Topology")
        self.unique(((c.name, c.path) for c in q.cluster_queues), "ClusterQueue")
        self.unique(((f"{lq.namespace}/{lq.name}", lq.path) for lq in q.local_queues), "LocalQueue")
        topologies = {t.name for t in q.topologies}
        for t in q.topologies:
            self.dns_subdomain(t.name, key_path(t.path, "name"), "Topology name")
            if not t.levels or len(t.levels) > 16:
                self.error(
                    key_path(t.path, "levels"),
                    "a Topology needs 1 to 16 levels",
                    "list node label keys from the widest domain to the narrowest",
                )
            elif len(set(t.levels)) != len(t.levels):
                self.error(
                    key_path(t.path, "levels"),
                    "a level is listed twice",
                    "list each node label once",
                )
            if "kubernetes.io/hostname" in t.levels[:-1]:
                self.error(
                    key_path(t.path, "levels"),
                    "kubernetes.io/hostname may only be the last level",
                    "move it to the end of the list",
                )
        flavors = {f.name: f for f in q.flavors}
        for f in q.flavors:
            self.dns_subdomain(f.name, key_path(f.path, "name"), "ResourceFlavor name")
            self.labels(f.node_labels, key_path(f.path, "nodeLabels"))
            if f.topology is not None:
                if f.topology not in topologies:
                    self.error(
                        key_path(f.path, "topology"),
                        f"no Topology named '{f.topology}'",
                        f"{did_you_mean(f.topology, topologies)}define it under queues.topologies",
                    )
                if not f.node_labels:
                    self.error(
                        key_path(f.path, "nodeLabels"),
                        "a flavor with a topology needs at least one node label",
                        "add the node label that selects this flavor's nodes",
                    )
        for cq in q.cluster_queues:
            self.cluster_queue(cq, flavors)
        self.worker_quotas()
        cqs = {c.name for c in q.cluster_queues}
        for lq in q.local_queues:
            self.local_queue(lq, cqs)

    def cluster_queue(self, cq, flavors) -> None:  # type: ignore[no-untyped-def]
        self.dns_subdomain(cq.name, key_path(cq.path, "name"), "ClusterQueue name")
        if cq.cohort:
            self.dns_subdomain(cq.cohort, key_path(cq.path, "cohort"), "cohort name")
        covered_by: dict[str, str] = {}
        flavor_seen: dict[str, str] = {}
        for g in cq.resource_groups:
            for res in g.covered:
                if res in covered_by:
                    self.error(
                        key_path(g.path, "coveredResources"),
                        f"'{res}' is covered by two resource groups",
                        "cover each resource in one group only",
                    )
                covered_by[res] = g.path
            if not g.flavors:
                self.error(
                    key_path(g.path, "flavors"),
                    "a resource group needs a flavor",
                    "add a flavor with quotas for the covered resources",
                )
            for fq in g.flavors:
                if fq.flavor not in flavors:
                    self.error(
                        key_path(fq.path, "name"),
                        f"no ResourceFlavor named '{fq.flavor}'",
                        f"{did_you_mean(fq.flavor, flavors)}define it under queues.flavors",
                    )
                if fq.flavor in flavor_seen:
                    self.error(
                        key_path(fq.path, "name"),
                        f"flavor '{fq.flavor}' is used twice in this ClusterQueue",
                        "use a flavor in one resource group only",
                    )
                flavor_seen[fq.flavor] = fq.path
                if set(fq.resources) != set(g.covered):
                    self.error(
                        key_path(fq.path, "resources"),
                        f"flavor '{fq.flavor}' must give a quota for exactly the covered "
                        f"resources ({', '.join(g.covered)})",
                        "add the missing resources or remove the extra ones",
                    )
                for res, quota in fq.resources.items():
                    rpath = key_path(key_path(fq.path, "resources"), res)
                    for label, value in (
                        ("nominalQuota", quota.nominal),
                        ("borrowingLimit", quota.borrowing_limit),
                        ("lendingLimit", quota.lending_limit),
                    ):
                        if value is not None and not quantity.is_valid(value):
                            self.error(
                                rpath,
                                f"{label} '{value}' is not a Kubernetes quantity",
                                "write it like 8, 500m or 32Gi",
                            )
                    if (quota.borrowing_limit or quota.lending_limit) and not cq.cohort:
                        self.error(
                            rpath,
                            "borrowingLimit and lendingLimit need a cohort",
                            f"set {key_path(cq.path, 'cohort')} or remove the limits",
                        )
        pre = cq.preemption or {}
        if (
            pre.get("reclaimWithinCohort", "Never") == "Never"
            and (pre.get("borrowWithinCohort") or {}).get("policy", "Never") != "Never"
        ):
            self.error(
                key_path(cq.path, "preemption.borrowWithinCohort"),
                "borrowWithinCohort needs reclaimWithinCohort other than Never",
                "set preemption.reclaimWithinCohort to LowerPriority or Any",
            )
        self.manager_quota(cq)

    def quota_refs(self, cq_name: str, overrides: dict[str, dict[str, str]], path: str) -> None:
        cq = next((c for c in self.spec.queues.cluster_queues if c.name == cq_name), None)
        if cq is None:
            names = [c.name for c in self.spec.queues.cluster_queues]
            self.error(
                path,
                f"no ClusterQueue named '{cq_name}'",
                f"{did_you_mean(cq_name, names)}use a name from queues.clusterQueues",
            )
            return
        covered = {fq.flavor: set(g.covered) for g in cq.resource_groups for fq in g.flavors}
        for flavor, resources in overrides.items():
            fpath = key_path(path, flavor)
            if flavor not in covered:
                self.error(
                    fpath,
                    f"ClusterQueue '{cq_name}' has no flavor '{flavor}'",
                    f"use one of {', '.join(covered) or '(none)'}",
                )
                continue
            for res, value in resources.items():
                if res not in covered[flavor]:
                    self.error(
                        key_path(fpath, res),
                        f"flavor '{flavor}' of '{cq_name}' does not cover '{res}'",
                        f"use one of {', '.join(sorted(covered[flavor]))}",
                    )
                elif not quantity.is_valid(value):
                    self.error(
                        key_path(fpath, res),
                        f"'{value}' is not a Kubernetes quantity",
                        "write it like 8, 500m or 32Gi",
                    )

    def worker_quotas(self) -> None:
        for w in self.spec.workers:
            for cq_name, overrides in w.quotas.items():
                self.quota_refs(cq_name, overrides, key_path(key_path(w.path, "quotas"), cq_name))

    def manager_quota(self, cq) -> None:  # type: ignore[no-untyped-def]
        if cq.manager_quota is None:
            return
        path = key_path(cq.path, "managerQuota")
        before = len(self.problems)
        self.quota_refs(cq.name, cq.manager_quota, path)
        if len(self.problems) != before:
            return
        from components.queues import worker_quota_sum

        try:
            sums = worker_quota_sum(self.spec, cq)
        except ValueError:
            return  # a worker quota is not a quantity: reported at that worker already
        for flavor, resources in cq.manager_quota.items():
            for res, value in resources.items():
                total = sums.get(flavor, {}).get(res, "0")
                if not quantity.equal(value, total):
                    self.warn(
                        key_path(key_path(path, flavor), res),
                        f"the manager admits {value} of {res} in '{flavor}' but the workers "
                        f"together offer {total}",
                        "fine if intended (over- or under-subscription); otherwise remove "
                        "managerQuota and the stack uses the workers' sum",
                    )

    def local_queue(self, lq, cqs: set[str]) -> None:  # type: ignore[no-untyped-def]
        npath, name_path = key_path(lq.path, "namespace"), key_path(lq.path, "name")
        self.dns_label(lq.namespace, npath, "namespace")
        self.dns_subdomain(lq.name, name_path, "LocalQueue name")
        if lq.namespace in RESERVED_NAMESPACES or lq.namespace == "multikueue-fleet-system":
            self.error(
                npath,
                f"namespace '{lq.namespace}' is reserved and is not mirrored to "
                "workers (Kueue does not manage jobs there)",
                "put the LocalQueue in a namespace of your own",
            )
        if lq.cluster_queue not in cqs:
            self.error(
                key_path(lq.path, "clusterQueue"),
                f"no ClusterQueue named '{lq.cluster_queue}'",
                f"{did_you_mean(lq.cluster_queue, cqs)}use a name from queues.clusterQueues",
            )


def _minor_tuple(version: str | None) -> tuple[int, int] | None:
    if not version:
        return None
    major, _, minor = version.partition(".")
    return int(major), int(minor)


def validate(spec: FleetSpec) -> list[Problem]:
    """Every meaning-level problem of one stack, errors and warnings together."""
    checks = _Checks(spec)
    checks.clusters()
    checks.kueue()
    checks.credentials()
    checks.dispatcher()
    checks.queues()
    return checks.problems


def _identity(spec: FleetSpec, c: ClusterSpec) -> str:
    """What makes two stacks' clusters the same real cluster."""
    if c.existing is not None:
        return f"existing:{c.existing.server or c.existing.context}"
    if c.gke is not None:
        return f"gke:{c.gke.project}/{c.gke.location}/{c.physical_name(spec.fleet_name)}"
    if c.eks is not None:
        return f"eks:{c.eks.region}/{c.physical_name(spec.fleet_name)}"
    return f"kind:{c.physical_name(spec.fleet_name)}"


def validate_together(specs: list[tuple[str, FleetSpec]]) -> list[Problem]:
    """Problems only visible across stacks: a worker shared by two managers with one origin
    (each would garbage-collect the other's remote objects), or two stacks that would
    create the same cluster."""
    problems: list[Problem] = []
    owners: dict[str, list[tuple[str, FleetSpec, ClusterSpec]]] = {}
    for source, spec in specs:
        for c in spec.clusters:
            owners.setdefault(_identity(spec, c), []).append((source, spec, c))
    for ident, users in owners.items():
        if len(users) < 2:
            continue
        if not ident.startswith("existing:"):
            names = ", ".join(f"{src} ({c.path})" for src, _, c in users)
            problems.append(
                Problem(
                    users[1][2].path,
                    f"{ident.split(':', 1)[1]} would be created by {names}",
                    "give the stacks different fleetName values",
                    "error",
                )
            )
            continue
        origins = Counter(
            spec.kueue.multikueue.origin for _, spec, c in users if c.role == "worker"
        )
        for origin, count in origins.items():
            if count > 1:
                names = ", ".join(
                    src
                    for src, spec, c in users
                    if c.role == "worker" and spec.kueue.multikueue.origin == origin
                )
                problems.append(
                    Problem(
                        "kueue.multiKueue.origin",
                        f"worker {ident.split(':', 1)[1]} is shared by {names} with the same "
                        f"origin '{origin}'",
                        "give each manager its own kueue.multiKueue.origin: each garbage-collects "
                        "remote objects of its origin that it does not know",
                        "error",
                    )
                )
    return problems
