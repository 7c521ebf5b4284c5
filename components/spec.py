"""FleetSpec: the typed model of one stack's fleet, with every default in Python.

A stack file (or `pulumi.Config`) is a mapping of top-level keys. `load_spec` reads it
into frozen dataclasses and records every shape problem (unknown key, wrong type, bad
choice) with the `pulumi config set --path` path that locates it. Meaning-level checks
that look across the whole fleet live in validate.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from components.problems import Problem, did_you_mean
from components.versions import (
    DEFAULT_KUBERNETES_VERSION,
    KIND_NODE_IMAGES,
    KUEUE_VERSION,
    SECRETREADER_PLUGIN_IMAGE,
    SECRETREADER_PLUGIN_PATH,
)

PROJECT = "multikueue-fleet"
PROVIDERS = ("kind", "existing", "gke", "eks")
DISPATCHER_NAME = "multikueue-fleet/dispatcher"
DEFAULT_FRAMEWORKS = ("batch", "jobset", "leaderworkerset")
STRATEGIES = ("MostFreeQuota", "BestFit", "OrderedSpillover")
WHEN_NOTHING_FITS = ("WaitOnBest", "LeastLoaded")
PLUGIN_MOUNTS = ("auto", "initContainer", "imageVolume", "customImage")
CREDENTIAL_MODES = ("kubeconfigSecret", "clusterProfile")


class Secret:
    """A secret config value. `value` is None when it is encrypted in a stack file that is
    read offline (render): its content is then known only to `pulumi up`."""

    __slots__ = ("value",)

    def __init__(self, value: str | None) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "Secret(***)" if self.value is not None else "Secret(<encrypted>)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)


# --- the model ---------------------------------------------------------------------------


@dataclass(frozen=True)
class KindSettings:
    node_image: str
    worker_nodes: int = 1


@dataclass(frozen=True)
class ExistingSettings:
    context: str
    kubeconfig_path: str | None = None
    # The API server URL as seen from the manager's pods, when it differs from the one in
    # the local kubeconfig (for example a private endpoint).
    server: str | None = None


@dataclass(frozen=True)
class GkeSettings:
    project: str
    location: str
    machine_type: str = "e2-standard-4"
    node_count: int = 2


@dataclass(frozen=True)
class EksSettings:
    region: str
    instance_type: str = "m5.xlarge"
    node_count: int = 2


@dataclass(frozen=True)
class ClusterSpec:
    name: str
    role: str  # "manager" or "worker"
    provider: str
    # "major.minor"; None only for an `existing` cluster whose version was not given.
    kubernetes_version: str | None
    frameworks: tuple[str, ...]
    labels: dict[str, str] = field(default_factory=dict)
    node_labels: dict[str, str] = field(default_factory=dict)
    kind: KindSettings | None = None
    existing: ExistingSettings | None = None
    gke: GkeSettings | None = None
    eks: EksSettings | None = None
    # Per-worker quota overrides: clusterQueue -> flavor -> resource -> quantity.
    quotas: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)
    path: str = ""

    def physical_name(self, fleet_name: str) -> str:
        """The name the cluster has on its platform (kind, GKE, EKS)."""
        if self.existing is not None:
            return self.existing.context
        return f"{fleet_name}-{self.name}"


@dataclass(frozen=True)
class WaitForPodsReady:
    enabled: bool = True
    timeout: str = "30m"
    block_admission: bool = False
    recovery_timeout: str | None = None
    requeuing_timestamp: str = "Eviction"
    backoff_limit_count: int | None = None
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 3600
    # None: on for the manager unless it runs frameworks whose status MultiKueue does not
    # mirror (kueue_config.waits_for_pods_ready); workers always follow `enabled`.
    on_manager: bool | None = None


@dataclass(frozen=True)
class MultiKueueSettings:
    origin: str
    gc_interval: str = "1m"
    worker_lost_timeout: str = "15m"


@dataclass(frozen=True)
class ExternalFramework:
    name: str  # Kind.version.group, as Kueue parses it
    resource: str  # plural resource name, for RBAC
    path: str = ""

    @property
    def parts(self) -> tuple[str, str, str]:
        kind, _, rest = self.name.partition(".")
        version, _, group = rest.partition(".")
        return kind, version, group


@dataclass(frozen=True)
class KueueSpec:
    version: str = KUEUE_VERSION
    feature_gates: dict[str, bool] = field(default_factory=dict)
    feature_gate_flags: dict[str, bool] = field(default_factory=dict)
    integrations: tuple[str, ...] = ()
    external_frameworks: tuple[ExternalFramework, ...] = ()
    wait_for_pods_ready: WaitForPodsReady = field(default_factory=WaitForPodsReady)
    multikueue: MultiKueueSettings = field(default_factory=lambda: MultiKueueSettings("multikueue"))


@dataclass(frozen=True)
class FlavorSpec:
    name: str
    node_labels: dict[str, str] = field(default_factory=dict)
    node_taints: tuple[dict[str, Any], ...] = ()
    tolerations: tuple[dict[str, Any], ...] = ()
    topology: str | None = None
    path: str = ""


@dataclass(frozen=True)
class TopologySpec:
    name: str
    levels: tuple[str, ...]
    path: str = ""


@dataclass(frozen=True)
class ResourceQuota:
    nominal: str
    borrowing_limit: str | None = None
    lending_limit: str | None = None


@dataclass(frozen=True)
class FlavorQuotas:
    flavor: str
    resources: dict[str, ResourceQuota]
    path: str = ""


@dataclass(frozen=True)
class ResourceGroup:
    covered: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]
    path: str = ""


@dataclass(frozen=True)
class ClusterQueueSpec:
    name: str
    resource_groups: tuple[ResourceGroup, ...]
    cohort: str | None = None
    queueing_strategy: str = "BestEffortFIFO"
    namespace_selector: dict[str, Any] = field(default_factory=dict)
    preemption: dict[str, Any] | None = None
    flavor_fungibility: dict[str, Any] | None = None
    # flavor -> resource -> quantity; None means the sum of the workers' quotas.
    manager_quota: dict[str, dict[str, str]] | None = None
    path: str = ""


@dataclass(frozen=True)
class LocalQueueSpec:
    namespace: str
    name: str
    cluster_queue: str
    path: str = ""


@dataclass(frozen=True)
class QueuesSpec:
    flavors: tuple[FlavorSpec, ...]
    topologies: tuple[TopologySpec, ...]
    cluster_queues: tuple[ClusterQueueSpec, ...]
    local_queues: tuple[LocalQueueSpec, ...]


@dataclass(frozen=True)
class ClusterProfileSettings:
    plugin_mount: str = "auto"
    plugin_image: str = SECRETREADER_PLUGIN_IMAGE
    plugin_path: str = SECRETREADER_PLUGIN_PATH
    access_provider: str = "secretreader"
    # customImage mode: a Kueue image that already holds the plugin at plugin_path.
    kueue_image: str | None = None


@dataclass(frozen=True)
class CredentialsSpec:
    mode: str = "kubeconfigSecret"
    cluster_profile: ClusterProfileSettings = field(default_factory=ClusterProfileSettings)


@dataclass(frozen=True)
class DispatchPolicyDefaults:
    strategy: str = "MostFreeQuota"
    clusters_to_nominate: int = 1
    widen_after: str = "5m"
    when_nothing_fits: str = "WaitOnBest"
    cluster_selector: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DispatcherSpec:
    enabled: bool = True
    name: str = DISPATCHER_NAME
    # None: built from controller/ at deploy time and pinned by digest.
    image: str | None = None
    # Where that build is pushed when the manager is not a kind cluster.
    registry: str | None = None
    # Let DispatchPolicies with `inventory` add ClusterProfiles to MultiKueue (grants the
    # dispatcher the rights to create MultiKueueClusters and its own MultiKueueConfigs).
    inventory: bool = False
    replicas: int = 2
    policy: DispatchPolicyDefaults = field(default_factory=DispatchPolicyDefaults)


@dataclass(frozen=True)
class FleetSpec:
    stack: str
    fleet_name: str
    manager: ClusterSpec
    workers: tuple[ClusterSpec, ...]
    kueue: KueueSpec
    queues: QueuesSpec
    credentials: CredentialsSpec
    dispatcher: DispatcherSpec
    worker_kubeconfigs: dict[str, Secret] = field(default_factory=dict)

    @property
    def clusters(self) -> tuple[ClusterSpec, ...]:
        return (self.manager, *self.workers)


# --- reading -------------------------------------------------------------------------------

TOP_LEVEL_KEYS = (
    "fleetName",
    "manager",
    "workers",
    "frameworks",
    "kueue",
    "queues",
    "credentials",
    "dispatcher",
    "workerKubeconfigs",
)
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
K8S_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)?$")
NODE_IMAGE_VERSION = re.compile(r":v(\d+)\.(\d+)\.\d+")


def key_path(base: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{base}[{key}]"
    return f"{base}.{key}" if base else key


class _Reader:
    """Typed access to an untyped mapping that records problems instead of raising."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems

    def error(self, path: str, message: str, hint: str = "") -> None:
        self.problems.append(Problem(path, message, hint))

    def mapping(self, value: Any, path: str, allowed: tuple[str, ...] | None) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.error(
                path,
                f"expected a mapping, got {type(value).__name__}",
                "write it as `key: value` lines under this key",
            )
            return {}
        if allowed is not None:
            for key in value:
                if key not in allowed:
                    self.error(
                        key_path(path, str(key)),
                        "unknown key",
                        f"{did_you_mean(str(key), allowed)}known keys here: {', '.join(allowed)}",
                    )
        return dict(value)

    def items(self, value: Any, path: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.error(
                path,
                f"expected a list, got {type(value).__name__}",
                "write it as a YAML list (`- item` lines)",
            )
            return []
        return value

    def string(
        self,
        m: Mapping[str, Any],
        key: str,
        path: str,
        default: str | None = None,
        *,
        required: bool = False,
        choices: tuple[str, ...] | None = None,
    ) -> str | None:
        value = m.get(key)
        where = key_path(path, key)
        if value is None:
            if required:
                self.error(where, "is required", f"set `{key}` in the stack file")
            return default
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            self.error(where, f"expected a string, got {type(value).__name__}")
            return default
        text = str(value)
        if choices is not None and text not in choices:
            self.error(
                where,
                f"'{text}' is not one of {', '.join(choices)}",
                f"{did_you_mean(text, choices)}use one of {', '.join(choices)}",
            )
            return default
        return text

    def integer(
        self,
        m: Mapping[str, Any],
        key: str,
        path: str,
        default: int | None,
        *,
        minimum: int | None = None,
        maximum: int | None = None,
    ) -> int | None:
        value = m.get(key)
        where = key_path(path, key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            try:
                value = int(str(value))
            except ValueError:
                self.error(where, f"expected a whole number, got {value!r}")
                return default
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            self.error(
                where,
                f"{value} is out of range",
                f"use a value from {minimum} to {maximum if maximum is not None else 'any'}",
            )
            return default
        return value

    def boolean(self, m: Mapping[str, Any], key: str, path: str, default: bool) -> bool:
        value = m.get(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        self.error(key_path(path, key), f"expected true or false, got {value!r}")
        return default

    def str_map(self, m: Mapping[str, Any], key: str, path: str) -> dict[str, str]:
        where = key_path(path, key)
        raw = self.mapping(m.get(key), where, None)
        out: dict[str, str] = {}
        for k, v in raw.items():
            if isinstance(v, (dict, list)) or v is None:
                self.error(key_path(where, str(k)), "expected a plain value (string or number)")
                continue
            out[str(k)] = str(v).lower() if isinstance(v, bool) else str(v)
        return out

    def bool_map(self, m: Mapping[str, Any], key: str, path: str) -> dict[str, bool]:
        where = key_path(path, key)
        raw = self.mapping(m.get(key), where, None)
        return {str(k): self.boolean(raw, k, where, False) for k in raw}

    def str_list(
        self, m: Mapping[str, Any], key: str, path: str, default: tuple[str, ...] = ()
    ) -> tuple[str, ...]:
        where = key_path(path, key)
        if m.get(key) is None:
            return default
        out = []
        for i, item in enumerate(self.items(m.get(key), where)):
            if isinstance(item, (dict, list)) or item is None:
                self.error(key_path(where, i), "expected a string")
                continue
            out.append(str(item))
        return tuple(out)

    def objects(self, m: Mapping[str, Any], key: str, path: str) -> tuple[dict[str, Any], ...]:
        """A list of free-form mappings (taints, tolerations): shape only, no key check."""
        where = key_path(path, key)
        return tuple(
            self.mapping(item, key_path(where, i), None)
            for i, item in enumerate(self.items(m.get(key), where))
        )


def _version_of(text: str | None) -> str | None:
    match = K8S_VERSION.match(text or "")
    return f"{match.group(1)}.{match.group(2)}" if match else None


def _read_cluster(
    r: _Reader,
    raw: Any,
    path: str,
    role: str,
    default_name: str,
    default_frameworks: tuple[str, ...],
) -> ClusterSpec:
    allowed = (
        "name",
        "provider",
        "kubernetesVersion",
        "labels",
        "nodeLabels",
        "frameworks",
        "kind",
        "existing",
        "gke",
        "eks",
    )
    if role == "worker":
        allowed = (*allowed, "quotas")
    m = r.mapping(raw, path, allowed)
    name = r.string(m, "name", path, default_name) or default_name
    provider = r.string(m, "provider", path, "kind", choices=PROVIDERS) or "kind"
    version_text = r.string(m, "kubernetesVersion", path)
    version = _version_of(version_text)
    if version_text is not None and version is None:
        r.error(
            key_path(path, "kubernetesVersion"),
            f"'{version_text}' is not a Kubernetes version",
            'write it as major.minor, for example "1.36"',
        )
    for other in PROVIDERS:
        if other != provider and other in m:
            r.error(
                key_path(path, other),
                f"settings for provider '{other}' on a '{provider}' cluster",
                f"remove `{other}` or set `provider: {other}`",
            )
    frameworks = r.str_list(m, "frameworks", path, default_frameworks)
    if "batch" not in frameworks:
        frameworks = ("batch", *frameworks)  # batch/Job is part of Kubernetes itself
    spec: dict[str, Any] = {}
    sub = key_path(path, provider)
    if provider == "kind":
        k = r.mapping(m.get("kind"), sub, ("nodeImage", "workerNodes"))
        image = r.string(k, "nodeImage", sub)
        if image:
            match = NODE_IMAGE_VERSION.search(image)
            version = version or (f"{match.group(1)}.{match.group(2)}" if match else None)
        else:
            version = version or DEFAULT_KUBERNETES_VERSION
            image = KIND_NODE_IMAGES.get(version)
            if image is None:
                r.error(
                    key_path(path, "kubernetesVersion"),
                    f"kind {version} has no node image pinned for this kind release",
                    f"use one of {', '.join(sorted(KIND_NODE_IMAGES))}, or set {sub}.nodeImage "
                    "to an image built for kind (pinned by @sha256 digest)",
                )
                image = ""
        spec["kind"] = KindSettings(
            image, r.integer(k, "workerNodes", sub, 1, minimum=0, maximum=10) or 0
        )
    elif provider == "existing":
        e = r.mapping(m.get("existing"), sub, ("context", "kubeconfigPath", "server"))
        spec["existing"] = ExistingSettings(
            r.string(e, "context", sub, "", required=True) or "",
            r.string(e, "kubeconfigPath", sub),
            r.string(e, "server", sub),
        )
    elif provider == "gke":
        g = r.mapping(m.get("gke"), sub, ("project", "location", "machineType", "nodeCount"))
        spec["gke"] = GkeSettings(
            r.string(g, "project", sub, "", required=True) or "",
            r.string(g, "location", sub, "", required=True) or "",
            r.string(g, "machineType", sub, "e2-standard-4") or "e2-standard-4",
            r.integer(g, "nodeCount", sub, 2, minimum=1, maximum=1000) or 2,
        )
        version = version or DEFAULT_KUBERNETES_VERSION
    else:
        e = r.mapping(m.get("eks"), sub, ("region", "instanceType", "nodeCount"))
        spec["eks"] = EksSettings(
            r.string(e, "region", sub, "", required=True) or "",
            r.string(e, "instanceType", sub, "m5.xlarge") or "m5.xlarge",
            r.integer(e, "nodeCount", sub, 2, minimum=1, maximum=1000) or 2,
        )
        version = version or DEFAULT_KUBERNETES_VERSION
    quotas: dict[str, dict[str, dict[str, str]]] = {}
    if role == "worker":
        qpath = key_path(path, "quotas")
        for cq, flavors in r.mapping(m.get("quotas"), qpath, None).items():
            cq_path = key_path(qpath, str(cq))
            quotas[str(cq)] = {
                str(fl): r.str_map({"v": res}, "v", key_path(cq_path, str(fl)))
                for fl, res in r.mapping(flavors, cq_path, None).items()
            }
    return ClusterSpec(
        name=name,
        role=role,
        provider=provider,
        kubernetes_version=version,
        frameworks=frameworks,
        labels=r.str_map(m, "labels", path),
        node_labels=r.str_map(m, "nodeLabels", path),
        quotas=quotas,
        path=path,
        **spec,
    )


def _read_kueue(r: _Reader, raw: Any, fleet_name: str) -> KueueSpec:
    path = "kueue"
    m = r.mapping(
        raw,
        path,
        (
            "version",
            "featureGates",
            "featureGateFlags",
            "integrations",
            "externalFrameworks",
            "waitForPodsReady",
            "multiKueue",
        ),
    )
    w_path = key_path(path, "waitForPodsReady")
    w = r.mapping(
        m.get("waitForPodsReady"),
        w_path,
        (
            "enabled",
            "onManager",
            "timeout",
            "blockAdmission",
            "recoveryTimeout",
            "requeuingStrategy",
        ),
    )
    rq_path = key_path(w_path, "requeuingStrategy")
    rq = r.mapping(
        w.get("requeuingStrategy"),
        rq_path,
        ("timestamp", "backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds"),
    )
    wait = WaitForPodsReady(
        enabled=r.boolean(w, "enabled", w_path, True),
        timeout=r.string(w, "timeout", w_path, "30m") or "30m",
        block_admission=r.boolean(w, "blockAdmission", w_path, False),
        recovery_timeout=r.string(w, "recoveryTimeout", w_path),
        requeuing_timestamp=r.string(
            rq, "timestamp", rq_path, "Eviction", choices=("Eviction", "Creation")
        )
        or "Eviction",
        backoff_limit_count=r.integer(rq, "backoffLimitCount", rq_path, None, minimum=0),
        backoff_base_seconds=r.integer(rq, "backoffBaseSeconds", rq_path, 60, minimum=1) or 60,
        backoff_max_seconds=r.integer(rq, "backoffMaxSeconds", rq_path, 3600, minimum=1) or 3600,
        on_manager=r.boolean(w, "onManager", w_path, False) if "onManager" in w else None,
    )
    mk_path = key_path(path, "multiKueue")
    mk = r.mapping(m.get("multiKueue"), mk_path, ("origin", "gcInterval", "workerLostTimeout"))
    # A distinct origin per fleet by default: two managers that share a worker must not
    # garbage-collect each other's remote objects.
    multikueue = MultiKueueSettings(
        origin=r.string(mk, "origin", mk_path, f"mkf-{fleet_name}") or f"mkf-{fleet_name}",
        gc_interval=r.string(mk, "gcInterval", mk_path, "1m") or "1m",
        worker_lost_timeout=r.string(mk, "workerLostTimeout", mk_path, "15m") or "15m",
    )
    ext_path = key_path(path, "externalFrameworks")
    externals = []
    for i, item in enumerate(r.items(m.get("externalFrameworks"), ext_path)):
        p = key_path(ext_path, i)
        entry = r.mapping(
            {"name": item} if isinstance(item, str) else item, p, ("name", "resource")
        )
        name = r.string(entry, "name", p, "", required=True) or ""
        plural = name.split(".", 1)[0].lower() + "s"
        externals.append(
            ExternalFramework(name, r.string(entry, "resource", p, plural) or plural, p)
        )
    return KueueSpec(
        version=r.string(m, "version", path, KUEUE_VERSION) or KUEUE_VERSION,
        feature_gates=r.bool_map(m, "featureGates", path),
        feature_gate_flags=r.bool_map(m, "featureGateFlags", path),
        integrations=r.str_list(m, "integrations", path),
        external_frameworks=tuple(externals),
        wait_for_pods_ready=wait,
        multikueue=multikueue,
    )


def _read_quota(r: _Reader, raw: Any, path: str) -> ResourceQuota:
    if isinstance(raw, Mapping):
        m = r.mapping(raw, path, ("nominalQuota", "borrowingLimit", "lendingLimit"))
        return ResourceQuota(
            r.string(m, "nominalQuota", path, "0", required=True) or "0",
            r.string(m, "borrowingLimit", path),
            r.string(m, "lendingLimit", path),
        )
    if raw is None or isinstance(raw, (bool, list)):
        r.error(path, "expected a quantity such as 8, 500m or 32Gi, or a mapping with nominalQuota")
        return ResourceQuota("0")
    return ResourceQuota(str(raw))


def _read_cluster_queue(r: _Reader, raw: Any, path: str) -> ClusterQueueSpec:
    m = r.mapping(
        raw,
        path,
        (
            "name",
            "cohort",
            "queueingStrategy",
            "namespaceSelector",
            "preemption",
            "flavorFungibility",
            "resourceGroups",
            "managerQuota",
        ),
    )
    groups = []
    rg_path = key_path(path, "resourceGroups")
    for gi, graw in enumerate(r.items(m.get("resourceGroups"), rg_path)):
        gp = key_path(rg_path, gi)
        g = r.mapping(graw, gp, ("coveredResources", "flavors"))
        flavors = []
        fl_path = key_path(gp, "flavors")
        for fi, fraw in enumerate(r.items(g.get("flavors"), fl_path)):
            fp = key_path(fl_path, fi)
            f = r.mapping(fraw, fp, ("name", "resources"))
            res_path = key_path(fp, "resources")
            resources = {
                str(res): _read_quota(r, q, key_path(res_path, str(res)))
                for res, q in r.mapping(f.get("resources"), res_path, None).items()
            }
            flavors.append(
                FlavorQuotas(r.string(f, "name", fp, "", required=True) or "", resources, fp)
            )
        covered = r.str_list(
            g, "coveredResources", gp, tuple(flavors[0].resources) if flavors else ()
        )
        groups.append(ResourceGroup(covered, tuple(flavors), gp))
    if not groups:
        r.error(
            rg_path,
            "a ClusterQueue needs at least one resource group",
            "add resourceGroups with a flavor and its quotas",
        )
    pre_path = key_path(path, "preemption")
    preemption = None
    if m.get("preemption") is not None:
        p = r.mapping(
            m["preemption"],
            pre_path,
            ("reclaimWithinCohort", "withinClusterQueue", "borrowWithinCohort"),
        )
        preemption = {}
        for key, choices in (
            ("reclaimWithinCohort", ("Never", "LowerPriority", "Any")),
            ("withinClusterQueue", ("Never", "LowerPriority", "LowerOrNewerEqualPriority")),
        ):
            value = r.string(p, key, pre_path, choices=choices)
            if value:
                preemption[key] = value
        if p.get("borrowWithinCohort") is not None:
            bp = key_path(pre_path, "borrowWithinCohort")
            b = r.mapping(p["borrowWithinCohort"], bp, ("policy", "maxPriorityThreshold"))
            bwc: dict[str, Any] = {
                "policy": r.string(b, "policy", bp, "Never", choices=("Never", "LowerPriority"))
            }
            threshold = r.integer(b, "maxPriorityThreshold", bp, None)
            if threshold is not None:
                bwc["maxPriorityThreshold"] = threshold
            preemption["borrowWithinCohort"] = bwc
    ff_path = key_path(path, "flavorFungibility")
    fungibility = None
    if m.get("flavorFungibility") is not None:
        f = r.mapping(
            m["flavorFungibility"], ff_path, ("whenCanBorrow", "whenCanPreempt", "preference")
        )
        fungibility = {}
        for key, choices in (
            ("whenCanBorrow", ("MayStopSearch", "TryNextFlavor")),
            ("whenCanPreempt", ("MayStopSearch", "TryNextFlavor")),
            ("preference", ("BorrowingOverPreemption", "PreemptionOverBorrowing")),
        ):
            value = r.string(f, key, ff_path, choices=choices)
            if value:
                fungibility[key] = value
    mq_path = key_path(path, "managerQuota")
    manager_quota = None
    if m.get("managerQuota") is not None:
        manager_quota = {
            str(fl): r.str_map({"v": res}, "v", key_path(mq_path, str(fl)))
            for fl, res in r.mapping(m["managerQuota"], mq_path, None).items()
        }
    selector = m.get("namespaceSelector")
    return ClusterQueueSpec(
        name=r.string(m, "name", path, "", required=True) or "",
        resource_groups=tuple(groups),
        cohort=r.string(m, "cohort", path),
        queueing_strategy=r.string(
            m, "queueingStrategy", path, "BestEffortFIFO", choices=("BestEffortFIFO", "StrictFIFO")
        )
        or "BestEffortFIFO",
        # Kueue admits nothing for a null selector; {} means every namespace.
        namespace_selector=r.mapping(
            selector, key_path(path, "namespaceSelector"), ("matchLabels", "matchExpressions")
        ),
        preemption=preemption,
        flavor_fungibility=fungibility,
        manager_quota=manager_quota,
        path=path,
    )


DEFAULT_QUEUES: dict[str, Any] = {
    "flavors": [{"name": "default-flavor"}],
    "clusterQueues": [
        {
            "name": "cluster-queue",
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {"name": "default-flavor", "resources": {"cpu": 4, "memory": "8Gi"}}
                    ],
                }
            ],
        }
    ],
    "localQueues": [
        {"namespace": "default", "name": "user-queue", "clusterQueue": "cluster-queue"}
    ],
}


def _read_queues(r: _Reader, raw: Any) -> QueuesSpec:
    path = "queues"
    m = r.mapping(
        raw if raw is not None else DEFAULT_QUEUES,
        path,
        ("flavors", "topologies", "clusterQueues", "localQueues"),
    )
    flavors = []
    for i, fraw in enumerate(r.items(m.get("flavors"), key_path(path, "flavors"))):
        fp = key_path(key_path(path, "flavors"), i)
        f = r.mapping(fraw, fp, ("name", "nodeLabels", "nodeTaints", "tolerations", "topology"))
        flavors.append(
            FlavorSpec(
                name=r.string(f, "name", fp, "", required=True) or "",
                node_labels=r.str_map(f, "nodeLabels", fp),
                node_taints=r.objects(f, "nodeTaints", fp),
                tolerations=r.objects(f, "tolerations", fp),
                topology=r.string(f, "topology", fp),
                path=fp,
            )
        )
    topologies = []
    for i, traw in enumerate(r.items(m.get("topologies"), key_path(path, "topologies"))):
        tp = key_path(key_path(path, "topologies"), i)
        t = r.mapping(traw, tp, ("name", "levels"))
        topologies.append(
            TopologySpec(
                r.string(t, "name", tp, "", required=True) or "", r.str_list(t, "levels", tp), tp
            )
        )
    cqs = tuple(
        _read_cluster_queue(r, cq, key_path(key_path(path, "clusterQueues"), i))
        for i, cq in enumerate(r.items(m.get("clusterQueues"), key_path(path, "clusterQueues")))
    )
    lqs = []
    for i, lraw in enumerate(r.items(m.get("localQueues"), key_path(path, "localQueues"))):
        lp = key_path(key_path(path, "localQueues"), i)
        lq = r.mapping(lraw, lp, ("namespace", "name", "clusterQueue"))
        lqs.append(
            LocalQueueSpec(
                r.string(lq, "namespace", lp, "default") or "default",
                r.string(lq, "name", lp, "", required=True) or "",
                r.string(lq, "clusterQueue", lp, "", required=True) or "",
                lp,
            )
        )
    return QueuesSpec(tuple(flavors), tuple(topologies), cqs, tuple(lqs))


def _read_credentials(r: _Reader, raw: Any) -> CredentialsSpec:
    path = "credentials"
    m = r.mapping(raw, path, ("mode", "clusterProfile"))
    cp_path = key_path(path, "clusterProfile")
    cp = r.mapping(
        m.get("clusterProfile"),
        cp_path,
        ("pluginMount", "pluginImage", "pluginPath", "accessProvider", "kueueImage"),
    )
    defaults = ClusterProfileSettings()
    return CredentialsSpec(
        mode=r.string(m, "mode", path, "kubeconfigSecret", choices=CREDENTIAL_MODES)
        or "kubeconfigSecret",
        cluster_profile=ClusterProfileSettings(
            plugin_mount=r.string(cp, "pluginMount", cp_path, "auto", choices=PLUGIN_MOUNTS)
            or "auto",
            plugin_image=r.string(cp, "pluginImage", cp_path, defaults.plugin_image)
            or defaults.plugin_image,
            plugin_path=r.string(cp, "pluginPath", cp_path, defaults.plugin_path)
            or defaults.plugin_path,
            access_provider=r.string(cp, "accessProvider", cp_path, defaults.access_provider)
            or defaults.access_provider,
            kueue_image=r.string(cp, "kueueImage", cp_path),
        ),
    )


def _read_dispatcher(r: _Reader, raw: Any) -> DispatcherSpec:
    path = "dispatcher"
    m = r.mapping(
        raw, path, ("enabled", "name", "image", "registry", "inventory", "replicas", "policy")
    )
    pp = key_path(path, "policy")
    p = r.mapping(
        m.get("policy"),
        pp,
        ("strategy", "clustersToNominate", "widenAfter", "whenNothingFits", "clusterSelector"),
    )
    return DispatcherSpec(
        enabled=r.boolean(m, "enabled", path, True),
        name=r.string(m, "name", path, DISPATCHER_NAME) or DISPATCHER_NAME,
        image=r.string(m, "image", path),
        registry=r.string(m, "registry", path),
        inventory=r.boolean(m, "inventory", path, False),
        replicas=r.integer(m, "replicas", path, 2, minimum=1, maximum=5) or 2,
        policy=DispatchPolicyDefaults(
            strategy=r.string(p, "strategy", pp, "MostFreeQuota", choices=STRATEGIES)
            or "MostFreeQuota",
            # Kueue accepts at most 20 nominated cluster names per workload.
            clusters_to_nominate=r.integer(p, "clustersToNominate", pp, 1, minimum=1, maximum=20)
            or 1,
            widen_after=r.string(p, "widenAfter", pp, "5m") or "5m",
            when_nothing_fits=r.string(
                p, "whenNothingFits", pp, "WaitOnBest", choices=WHEN_NOTHING_FITS
            )
            or "WaitOnBest",
            cluster_selector=r.str_map(p, "clusterSelector", pp),
        ),
    )


def load_spec(
    config: Mapping[str, Any], stack: str, secret_keys: frozenset[str] = frozenset()
) -> tuple[FleetSpec, list[Problem]]:
    """Read a stack's config (bare keys, no project prefix) into a FleetSpec.

    Returns the spec and the shape problems found; validate.validate adds the rest.
    Keys named in `secret_keys` hold secrets; their values are wrapped in Secret.
    """
    problems: list[Problem] = []
    r = _Reader(problems)
    r.mapping(config, "", TOP_LEVEL_KEYS)
    fleet_name = r.string(config, "fleetName", "", stack) or stack
    frameworks = r.str_list(config, "frameworks", "", DEFAULT_FRAMEWORKS)
    manager = _read_cluster(r, config.get("manager"), "manager", "manager", "manager", frameworks)
    raw_workers = config.get("workers")
    if raw_workers is None:
        raw_workers = [{"name": "worker1"}, {"name": "worker2"}]
    workers = tuple(
        _read_cluster(r, w, key_path("workers", i), "worker", f"worker{i + 1}", frameworks)
        for i, w in enumerate(r.items(raw_workers, "workers"))
    )
    kubeconfigs: dict[str, Secret] = {}
    for name, value in r.mapping(
        config.get("workerKubeconfigs"), "workerKubeconfigs", None
    ).items():
        where = key_path("workerKubeconfigs", str(name))
        if isinstance(value, Mapping) and set(value) == {"secure"}:
            kubeconfigs[str(name)] = Secret(None)
        elif isinstance(value, str):
            kubeconfigs[str(name)] = Secret(value)
            if "workerKubeconfigs" not in secret_keys:
                problems.append(
                    Problem(
                        where,
                        "a kubeconfig with a credential is stored in plain text",
                        "store it encrypted: pulumi config set --secret --path "
                        f"'workerKubeconfigs.{name}' < kubeconfig",
                    )
                )
        else:
            r.error(where, "expected the kubeconfig as a string")
    spec = FleetSpec(
        stack=stack,
        fleet_name=fleet_name,
        manager=manager,
        workers=workers,
        kueue=_read_kueue(r, config.get("kueue"), fleet_name),
        queues=_read_queues(r, config.get("queues")),
        credentials=_read_credentials(r, config.get("credentials")),
        dispatcher=_read_dispatcher(r, config.get("dispatcher")),
        worker_kubeconfigs=kubeconfigs,
    )
    return spec, problems
