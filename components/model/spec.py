"""FleetSpec: the typed model of one stack's fleet (pydantic v2), with every default here.

A stack file (or `pulumi.Config`) is a mapping of top-level keys, written in camelCase.
`load_spec` validates it into frozen models; every problem of shape (unknown key with a
"did you mean", wrong type, bad choice, a name, label, quantity, duration, version or image
the API server or a tool would refuse) comes back as a Problem with the
`pulumi config set --path` path that locates it and a fix. Checks that look across the
whole fleet live in components/checks, a module per subject, as plain functions over this
model (validate.py runs them in one list).

The JSON Schema of the stack file is generated from these models (components/cli/schema.py).
"""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping
from dataclasses import replace
from typing import Annotated, Any, ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PlainValidator,
    PrivateAttr,
    Tag,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import InitErrorDetails

from components.model.fieldtypes import (
    QUANTITY_SCHEMA,
    AbsolutePath,
    AwsRegion,
    CertificatesPem,
    DispatchDuration,
    Duration,
    GcpLocation,
    GcpProject,
    HttpsUrl,
    Image,
    InstanceType,
    KubernetesVersion,
    LabelKey,
    LabelValue,
    MachineType,
    MirrorUrl,
    Quantity,
    RegistryHost,
    Repository,
    ResourceName,
    StrictBool,
    Text,
    dns_label,
    dns_subdomain,
    duration_is_zero,
    fail,
    int_range,
    kind_of,
    minor_tuple,
    quantity_problem,
    show,
)
from components.model.problems import Problem, did_you_mean, key_path
from components.model.versions import (
    DEFAULT_KUBERNETES_VERSION,
    KIND_NODE_IMAGES,
    KUEUE_MIN_KUBERNETES,
    KUEUE_VERSION,
    KUEUE_VERSIONS,
    MANAGER_MIN_KUBERNETES,
    NEWEST_KUBERNETES,
    PROVIDER_MIN_KUBERNETES,
    SECRETREADER_PLUGIN_IMAGE,
    SECRETREADER_PLUGIN_PATH,
)

__all__ = ["Problem", "key_path"]

PROJECT = "multikueue-fleet"
PROVIDERS = ("kind", "existing", "gke", "eks")
DISPATCHER_NAME = "multikueue-fleet/dispatcher"
DEFAULT_FRAMEWORKS = ("batch", "jobset", "leaderworkerset")
STRATEGIES = ("MostFreeQuota", "BestFit", "OrderedSpillover")
WHEN_NOTHING_FITS = ("WaitOnBest", "LeastLoaded")
PLUGIN_MOUNTS = ("auto", "initContainer", "imageVolume", "customImage")
CREDENTIAL_MODES = ("kubeconfigSecret", "clusterProfile")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
NODE_IMAGE_VERSION = re.compile(r":v(\d+)\.(\d+)\.\d+(?:@|$)")


def _version_text(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


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


def _secret(value: Any) -> Secret:
    if isinstance(value, Secret):
        return value
    if isinstance(value, Mapping) and set(value) == {"secure"}:
        return Secret(None)
    if isinstance(value, str):
        return Secret(value)
    raise fail(
        f"expected the kubeconfig as a string, got {kind_of(value)}",
        "pulumi config set --secret --path 'workerKubeconfigs.NAME' < kubeconfig",
    )


SecretText = Annotated[
    Secret,
    PlainValidator(_secret),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string"},
                {
                    "type": "object",
                    "properties": {"secure": {"type": "string"}},
                    "required": ["secure"],
                    "additionalProperties": False,
                },
            ]
        }
    ),
]


# --- the base of every model -------------------------------------------------------------


class _Model(BaseModel):
    """Frozen, camelCase keys as the user writes them, unknown keys refused. A key set to
    null counts as not set (its default applies)."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        arbitrary_types_allowed=True,
    )

    @model_validator(mode="before")
    @classmethod
    def _prepare(cls, data: Any, info: ValidationInfo) -> Any:
        if data is None:
            data = {}
        if isinstance(data, Mapping):
            data = cls._fill({k: v for k, v in data.items() if v is not None}, info)
        return data

    @classmethod
    def _fill(cls, data: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        """Defaults that depend on other values, filled in before validation."""
        return data

    def _derive(self, **values: Any) -> None:
        """Set values computed after validation (the model is frozen for everyone else)."""
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def as_k8s(self) -> dict[str, Any]:
        """As the Kubernetes object field: camelCase keys, unset ones left out."""
        return self.model_dump(by_alias=True, exclude_none=True)


def _raise(model: str, errors: list[tuple[tuple[str | int, ...], str, str]]) -> None:
    """Report several problems at once, each at its own path under the model."""
    if errors:
        raise ValidationError.from_exception_data(
            model,
            [InitErrorDetails(type=fail(m, f), loc=loc, input=None) for loc, m, f in errors],
        )


def _or_shorthand(shorthand: dict[str, Any]) -> Any:
    """JSON Schema of a model that may also be written as a plain value."""

    def extra(schema: dict[str, Any], _model: Any) -> None:
        full = dict(schema)
        schema.clear()
        schema["anyOf"] = [shorthand, full]

    return extra


def _item_name(items: Any, field: str = "name") -> None:
    """Shorthand: a list item given as a plain string means {field: string}."""
    if isinstance(items, list):
        for i, item in enumerate(items):
            if isinstance(item, str):
                items[i] = {field: item}


# --- clusters ----------------------------------------------------------------------------


def _pinned_tag_of_digest(image: str) -> str | None:
    """The tag (vX.Y.Z) kind's release notes give the digest of `image`, when it is one of
    the digests pinned in versions.py; None for another digest (which cannot be told)."""
    digest = image.rpartition("@")[2] if "@" in image else ""
    for pinned in KIND_NODE_IMAGES.values():
        name, _, pinned_digest = pinned.partition("@")
        if digest and digest == pinned_digest:
            return name.rsplit(":", 1)[-1]
    return None


def _pinned_image_of_tag(tag: str) -> str:
    return next(p for p in KIND_NODE_IMAGES.values() if p.split("@")[0].endswith(f":{tag}"))


class MirrorSettings(_Model):
    """A mirror with the options containerd's hosts.toml gives a host (containerd v2.3.4
    docs/hosts.md, `[host."<url>"]`: ca, skip_verify, override_path)."""

    url: MirrorUrl
    # CA certificates (PEM) the mirror's TLS certificate is checked against, where no public
    # CA signs it: written beside hosts.toml on every node, and named by the host's `ca`.
    ca: CertificatesPem | None = None
    # Take the mirror's certificate unchecked (`skip_verify`): insecure, for a test mirror.
    skip_verify: StrictBool = False
    # The URL's path is the registry API's root (`override_path`): containerd asks
    # <url>/<name>/manifests/... rather than <url>/v2/<name>/manifests/...
    override_path: StrictBool = False

    @model_validator(mode="after")
    def _options(self) -> MirrorSettings:
        """What containerd would take without a word and then not do as meant."""
        errors: list[tuple[tuple[str | int, ...], str, str]] = []
        if (self.ca or self.skip_verify) and not self.url.startswith("https://"):
            errors.append(
                (
                    ("ca" if self.ca else "skipVerify",),
                    f"is for an https mirror; {self.url} is http, where containerd checks no "
                    "certificate",
                    "remove it, or give the mirror's https:// URL",
                )
            )
        elif self.ca and self.skip_verify:
            errors.append(
                (
                    ("skipVerify",),
                    "takes any certificate, so the ca given would never be used",
                    "remove skipVerify to check the mirror against ca (or ca to take any)",
                )
            )
        if self.override_path and urlsplit(self.url).path.strip("/") == "":
            errors.append(
                (
                    ("overridePath",),
                    f"uses the URL's path as the registry API's root, and {self.url} has none",
                    "give the path the mirror serves the API at (https://HOST/v2/PREFIX), or "
                    "remove overridePath",
                )
            )
        _raise(type(self).__name__, errors)
        return self

    def hosts_toml_options(self) -> dict[str, Any]:
        return {
            k: v
            for k, v in self.model_dump(by_alias=True, exclude={"url"}).items()
            if v not in (None, False)
        }


# A mirror is its URL, or a mapping with the URL and options: told apart by what was written,
# so an error names what is wrong with that form only (the tags are left out of its path).
Mirror = Annotated[
    Annotated[MirrorUrl, Tag("[url]")] | Annotated[MirrorSettings, Tag("[options]")],
    Discriminator(lambda v: "[options]" if isinstance(v, dict | MirrorSettings) else "[url]"),
]


class KindSettings(_Model):
    # None in the file: the image pinned for the cluster's Kubernetes version.
    node_image: Image | None = None
    worker_nodes: int_range(0, 10) = 1
    # A node image without an @sha256 digest is refused unless this is set: kind supports
    # an image only with the kind release that built it, and a tag can move.
    allow_unpinned_node_image: StrictBool = False
    # Pull through a mirror: each registry an image name starts with, and where the nodes'
    # containerd gets its images instead (kind's local-registry pattern: containerd's
    # config_path and a hosts.toml per registry). The fleet's objects keep their upstream
    # image names. A URL, or the URL with options containerd gives a host.
    registry_mirrors: dict[RegistryHost, Mirror] = {}


class ExistingSettings(_Model):
    context: Text
    kubeconfig_path: Text | None = None
    # The API server URL as seen from the manager's pods, when it differs from the one in
    # the local kubeconfig (for example a private endpoint).
    server: HttpsUrl | None = None


# GPU node pools: nodes carry this taint so only pods asking for GPUs land there (the
# ExtendedResourceToleration admission plugin gives such pods the toleration). GKE adds it
# itself to a GPU pool of a cluster that also has other pools
# (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus, "GKE automatically adds
# taints"); on EKS the node group is given it.
GPU_TAINT = ("nvidia.com/gpu", "present", "NoSchedule")
GKE_GPU_DRIVERS = ("LATEST", "DEFAULT", "INSTALLATION_DISABLED")
EKS_GPU_AMIS = ("BOTTLEROCKET_x86_64_NVIDIA", "BOTTLEROCKET_ARM_64_NVIDIA")


class GkeGpuPool(_Model):
    """A GKE node pool with NVIDIA GPUs, its driver installed by GKE."""

    # A Compute Engine accelerator type, also the value of the node label GKE sets:
    # cloud.google.com/gke-accelerator=<accelerator>.
    accelerator: MachineType
    accelerator_count: int_range(1, 16) = 1
    # T4 and V100 attach to N1 machines only.
    machine_type: MachineType = "n1-standard-8"
    node_count: int_range(1, 1000) = 1
    driver_version: Literal["LATEST", "DEFAULT", "INSTALLATION_DISABLED"] = "LATEST"
    node_labels: dict[LabelKey, LabelValue] = {}
    # The zones of the GPU nodes (node_locations); empty: every zone of the cluster's
    # location, nodeCount in each.
    zones: tuple[GcpLocation, ...] = ()


class EksGpuPool(_Model):
    """An EKS managed node group of GPU instances on the NVIDIA Bottlerocket AMI (its
    drivers and the Kubernetes device plugin are in the image)."""

    instance_type: InstanceType
    node_count: int_range(1, 1000) = 1
    ami_type: Literal["BOTTLEROCKET_x86_64_NVIDIA", "BOTTLEROCKET_ARM_64_NVIDIA"] = (
        "BOTTLEROCKET_x86_64_NVIDIA"
    )
    node_labels: dict[LabelKey, LabelValue] = {}


class GkeSettings(_Model):
    project: GcpProject
    location: GcpLocation
    machine_type: MachineType = "e2-standard-4"
    node_count: int_range(1, 1000) = 2
    gpu_pool: GkeGpuPool | None = None


class EksSettings(_Model):
    region: AwsRegion
    instance_type: InstanceType = "m5.xlarge"
    node_count: int_range(1, 1000) = 2
    gpu_pool: EksGpuPool | None = None


class ClusterSpec(_Model):
    """A cluster of the fleet: the manager (ManagerSpec) or a worker (WorkerSpec)."""

    role: ClassVar[str] = ""
    name: dns_label("cluster name")
    provider: Literal["kind", "existing", "gke", "eks"] = "kind"
    # "major.minor" once validated; None only for an `existing` cluster without it.
    kubernetes_version: KubernetesVersion | None = None
    labels: dict[LabelKey, LabelValue] = {}
    node_labels: dict[LabelKey, LabelValue] = {}
    # None in the file: the fleet's `frameworks`; "batch" is always added.
    frameworks: tuple[Text, ...] | None = None
    kind: KindSettings | None = None
    existing: ExistingSettings | None = None
    gke: GkeSettings | None = None
    eks: EksSettings | None = None
    _path: str = PrivateAttr(default="")
    # `frameworks` as written for this cluster; None: it takes the fleet's.
    _written_frameworks: tuple[str, ...] | None = PrivateAttr(default=None)

    @property
    def path(self) -> str:
        return self._path

    @property
    def written_frameworks(self) -> tuple[str, ...] | None:
        return self._written_frameworks

    def physical_name(self, fleet_name: str) -> str:
        """The name the cluster has on its platform (kind, GKE, EKS)."""
        if self.existing is not None:
            return self.existing.context
        return f"{fleet_name}-{self.name}"

    @classmethod
    def _fill(cls, data: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        # Settings of another provider are a misplaced section, whatever they hold.
        provider = data.get("provider", "kind")
        if provider in PROVIDERS:
            _raise(
                cls.__name__,
                [
                    (
                        (other,),
                        f"settings for provider '{other}' on a '{provider}' cluster",
                        f"remove `{other}` or set `provider: {other}`",
                    )
                    for other in PROVIDERS
                    if other != provider and other in data
                ],
            )
        return data

    @model_validator(mode="after")
    def _provider_and_version(self) -> ClusterSpec:
        errors: list[tuple[tuple[str | int, ...], str, str]] = []
        required = {"existing": ("context",), "gke": ("project", "location"), "eks": ("region",)}
        if self.provider in required and getattr(self, self.provider) is None:
            for key in required[self.provider]:
                errors.append(
                    ((self.provider, key), "is required", f"set `{key}` in the stack file")
                )
        version = self.kubernetes_version
        version_checked = False
        kind = self.kind
        if self.provider == "kind":
            kind = kind or KindSettings()
            version, image, version_checked = self._kind_image(kind, errors)
            kind = kind.model_copy(update={"node_image": image})
        elif self.provider in ("gke", "eks"):
            version = version or DEFAULT_KUBERNETES_VERSION
        if version is not None and not version_checked:
            self._version_range(version, errors)
        _raise(type(self).__name__, errors)
        self._derive(kubernetes_version=version, kind=kind)
        return self

    def _kind_image(
        self, kind: KindSettings, errors: list[tuple[tuple[str | int, ...], str, str]]
    ) -> tuple[str | None, str, bool]:
        """(version, node image, whether an error about the version was already reported)."""
        version = self.kubernetes_version
        image = kind.node_image
        if not image:
            version = version or DEFAULT_KUBERNETES_VERSION
            pinned = KIND_NODE_IMAGES.get(version)
            if pinned is None:
                errors.append(
                    (
                        ("kubernetesVersion",),
                        f"kind {version} has no node image pinned for this kind release",
                        f"use one of {', '.join(sorted(KIND_NODE_IMAGES))}, or set "
                        "kind.nodeImage to an image built for kind (pinned by @sha256 digest)",
                    )
                )
                return version, "", True
            return version, pinned, False
        match = NODE_IMAGE_VERSION.search(image)
        from_image = f"{int(match.group(1))}.{int(match.group(2))}" if match else None
        if "@" not in image and not kind.allow_unpinned_node_image:
            errors.append(
                (
                    ("kind", "nodeImage"),
                    f"kind node image '{show(image)}' is not pinned by digest",
                    "add its @sha256:DIGEST (kind's release notes list them), or set "
                    "kind.allowUnpinnedNodeImage: true to use a moving tag anyway",
                )
            )
        known = _pinned_tag_of_digest(image)
        if known is not None and match and known != image.split("@", 1)[0].rsplit(":", 1)[-1]:
            # The digest is what kind pulls: the tag would be a lie about the version run,
            # and every version check here would judge the tag's version.
            errors.append(
                (
                    ("kind", "nodeImage"),
                    f"node image '{show(image)}' is tagged {image.split('@')[0].rsplit(':')[-1]}"
                    f" but its digest is that of kindest/node:{known}",
                    f"use {_pinned_image_of_tag(known)}, or the digest that belongs to the tag",
                )
            )
            return version, image, True
        if from_image is None and known is not None:
            # Untagged, but the digest is one kind's release notes give a tag for: that tag
            # is the version the node runs, judged like one written out.
            by_digest = NODE_IMAGE_VERSION.search(f":{known}")
            assert by_digest is not None  # the pinned tags are all vX.Y.Z
            from_image = f"{int(by_digest.group(1))}.{int(by_digest.group(2))}"
        if from_image is None and version is None:
            errors.append(
                (
                    ("kind", "nodeImage"),
                    f"the Kubernetes version of node image '{show(image)}' cannot be told "
                    "from its tag",
                    "use a kindest/node:vX.Y.Z image, or set kubernetesVersion",
                )
            )
            return None, image, True
        if from_image and version and from_image != version:
            errors.append(
                (
                    ("kubernetesVersion",),
                    f"kubernetesVersion is {version} but kind.nodeImage runs {from_image}",
                    "make them agree, or leave kubernetesVersion out",
                )
            )
            return version, image, True
        return version or from_image, image, False

    def _version_range(
        self, version: str, errors: list[tuple[tuple[str | int, ...], str, str]]
    ) -> None:
        v = minor_tuple(version)
        lowest = PROVIDER_MIN_KUBERNETES[self.provider]
        why = {
            "gke": "GKE no longer creates clusters older than that",
            "eks": "EKS no longer creates clusters older than that",
        }.get(
            self.provider,
            f"Kueue {KUEUE_VERSION} needs Kubernetes "
            f"{_version_text(KUEUE_MIN_KUBERNETES)} or newer",
        )
        if self.role == "manager" and lowest < MANAGER_MIN_KUBERNETES:
            lowest = MANAGER_MIN_KUBERNETES
            why = (
                "the manager hands batch Jobs to MultiKueue through Job managedBy, on by "
                "default from Kubernetes 1.32"
            )
        newest = NEWEST_KUBERNETES
        if v < lowest:
            errors.append(
                (
                    ("kubernetesVersion",),
                    f"Kubernetes {version} is too old here: {why}",
                    f"use {_version_text(lowest)} to {_version_text(newest)}",
                )
            )
        elif v > newest:
            errors.append(
                (
                    ("kubernetesVersion",),
                    f"Kubernetes {version} is newer than any release this project knows "
                    f"({_version_text(newest)})",
                    f"use {_version_text(lowest)} to {_version_text(newest)} (newer "
                    "releases need a newer multikueue-fleet: components/model/versions.py)",
                )
            )


class ManagerSpec(ClusterSpec):
    role: ClassVar[str] = "manager"
    name: dns_label("cluster name") = "manager"

    @property
    def quotas(self) -> dict[str, dict[str, dict[str, str]]]:
        return {}


class WorkerSpec(ClusterSpec):
    role: ClassVar[str] = "worker"
    # Per-worker quota overrides: clusterQueue -> flavor -> resource -> quantity.
    quotas: dict[Text, dict[Text, dict[ResourceName, Quantity]]] = {}
    # Out of service: the dispatcher nominates it for nothing new; what it admitted runs on.
    cordoned: StrictBool = False


# --- Kueue -------------------------------------------------------------------------------


class RequeuingStrategy(_Model):
    timestamp: Literal["Eviction", "Creation"] = "Eviction"
    backoff_limit_count: int_range(0, 2**31 - 1) | None = None
    backoff_base_seconds: int_range(1, 2**31 - 1) = 60
    backoff_max_seconds: int_range(1, 2**31 - 1) = 3600


class WaitForPodsReady(_Model):
    enabled: StrictBool = True
    timeout: Duration = "30m"
    block_admission: StrictBool = False
    recovery_timeout: Duration | None = None
    requeuing_strategy: RequeuingStrategy = Field(default={}, validate_default=True)
    # None: on for the manager unless it runs frameworks whose status MultiKueue does not
    # mirror (kueue_config.waits_for_pods_ready); workers always follow `enabled`.
    on_manager: StrictBool | None = None

    @model_validator(mode="after")
    def _timeout_not_zero(self) -> WaitForPodsReady:
        # Kueue v0.19.2 apis/config/v1beta2/defaults.go SetDefaults_Configuration: a zero
        # `timeout` is replaced by DefaultWaitForPodsReadyTimeout (30 minutes; the research
        # notes, kueue-api.md §3: "default 30m"), so "0s" would mean 30m, not "never wait".
        if self.enabled and duration_is_zero(self.timeout):
            _raise(
                type(self).__name__,
                [
                    (
                        ("timeout",),
                        f"timeout '{self.timeout}' is zero, which Kueue replaces with its "
                        "default of 30m (apis/config/v1beta2/defaults.go)",
                        "set the wait you mean (for example 10m), or enabled: false to not "
                        "wait for PodsReady at all",
                    )
                ],
            )
        return self

    @property
    def requeuing_timestamp(self) -> str:
        return self.requeuing_strategy.timestamp

    @property
    def backoff_limit_count(self) -> int | None:
        return self.requeuing_strategy.backoff_limit_count

    @property
    def backoff_base_seconds(self) -> int:
        return self.requeuing_strategy.backoff_base_seconds

    @property
    def backoff_max_seconds(self) -> int:
        return self.requeuing_strategy.backoff_max_seconds


class MultiKueueSettings(_Model):
    # None in the file: mkf-<fleetName>, a distinct origin per fleet (two managers that
    # share a worker must not garbage-collect each other's remote objects).
    origin: LabelValue | None = None
    gc_interval: Duration = "1m"
    worker_lost_timeout: Duration = "15m"


def kind_plural(kind: str) -> str:
    """The plural resource name a CRD generator gives a kind: controller-tools (kubebuilder)
    writes `flect.Pluralize(strings.ToLower(kind))` into spec.names.plural (controller-tools
    pkg/crd/spec.go), so "Policy" is "policies" and "Gateway" "gateways", "Index" "indexes"
    (not kind + "s", nor apimachinery's UnsafeGuessKindToResource, which says "gatewaies").
    The common English rules only; an irregular plural is set with `resource`."""
    word = kind.lower()
    if not word:
        return word
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    if word.endswith("y") and len(word) > 1 and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


class ExternalFramework(_Model):
    model_config = ConfigDict(json_schema_extra=_or_shorthand({"type": "string"}))

    name: Text  # Kind.version.group, as Kueue parses it
    # None in the file: the plural of the kind, lower-case, for RBAC.
    resource: Text | None = None
    _path: str = PrivateAttr(default="")

    @property
    def path(self) -> str:
        return self._path

    @model_validator(mode="after")
    def _plural(self) -> ExternalFramework:
        if self.resource is None:
            self._derive(resource=kind_plural(self.name.split(".", 1)[0]))
        return self

    @property
    def parts(self) -> tuple[str, str, str]:
        kind, _, rest = self.name.partition(".")
        version, _, group = rest.partition(".")
        return kind, version, group


def _kueue_version(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    if text not in KUEUE_VERSIONS:
        raise fail(
            f"Kueue {show(text)} is not supported by this release",
            f"use {' or '.join(KUEUE_VERSIONS)}: Kueue decodes its config strictly, the keys "
            "and gates written here are those of v0.19.x, and other releases are not "
            "checked (or do not exist)",
        )
    return text


class KueueSpec(_Model):
    # Who installs Kueue on the fleet's clusters. "managed": the fleet, from the pinned
    # release with this stack's Configuration. "existing": someone else already did (a
    # platform team, a managed add-on, the loopback launcher); the fleet installs nothing of
    # Kueue's, checks at deploy time that its API is served, and `render` writes the
    # Configuration this stack expects that Kueue to run with (components/checks/
    # existing_kueue.py).
    install: Literal["managed", "existing"] = "managed"
    version: Annotated[
        str,
        PlainValidator(_kueue_version),
        WithJsonSchema({"enum": list(KUEUE_VERSIONS)}),
    ] = KUEUE_VERSION
    feature_gates: dict[Text, StrictBool] = {}
    feature_gate_flags: dict[Text, StrictBool] = {}
    integrations: tuple[Text, ...] = ()
    external_frameworks: tuple[ExternalFramework, ...] = ()
    wait_for_pods_ready: WaitForPodsReady = Field(default={}, validate_default=True)
    multikueue: MultiKueueSettings = Field(default={}, validate_default=True, alias="multiKueue")

    @classmethod
    def _fill(cls, data: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        if isinstance(data.get("externalFrameworks"), list):
            data["externalFrameworks"] = list(data["externalFrameworks"])
            _item_name(data["externalFrameworks"])
        return data


# --- queues ------------------------------------------------------------------------------


class Taint(_Model):
    key: LabelKey
    value: LabelValue | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Toleration(_Model):
    key: LabelKey | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: LabelValue | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int_range(-(2**63), 2**63 - 1) | None = None

    @model_validator(mode="after")
    def _operator(self) -> Toleration:
        # Kueue v0.19.2 apis/kueue/v1beta2/resourceflavor_types.go:99-103 (CEL on the
        # ResourceFlavor's tolerations): `!has(x.value)` refuses an empty value too.
        errors = []
        if self.operator == "Exists" and self.value is not None:
            errors.append(
                (("value",), "a toleration with operator Exists has no value", "remove `value`")
            )
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            errors.append(
                (
                    ("tolerationSeconds",),
                    "tolerationSeconds applies only to effect NoExecute (Kueue refuses it "
                    f"with effect {self.effect or 'unset'})",
                    "set `effect: NoExecute`, or remove tolerationSeconds",
                )
            )
        if self.key is None and self.operator != "Exists":
            errors.append(
                (
                    ("operator",),
                    "a toleration without a key must use operator Exists",
                    "set `key`, or `operator: Exists` to tolerate every taint",
                )
            )
        _raise("Toleration", errors)
        return self


class FlavorSpec(_Model):
    name: dns_subdomain("ResourceFlavor name")
    node_labels: dict[LabelKey, LabelValue] = {}
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology: Text | None = None
    _path: str = PrivateAttr(default="")

    @property
    def path(self) -> str:
        return self._path


class TopologySpec(_Model):
    name: dns_subdomain("Topology name")
    levels: tuple[LabelKey, ...] = ()
    _path: str = PrivateAttr(default="")

    @property
    def path(self) -> str:
        return self._path


class ResourceQuota(_Model):
    model_config = ConfigDict(json_schema_extra=_or_shorthand(QUANTITY_SCHEMA))

    nominal: Quantity = Field(alias="nominalQuota")
    borrowing_limit: Quantity | None = None
    lending_limit: Quantity | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        # `cpu: 8` is short for `cpu: {nominalQuota: 8}`.
        if isinstance(data, Mapping):
            return data
        if data is None or isinstance(data, (bool, list)):
            raise fail(
                "expected a quantity such as 8, 500m or 32Gi, or a mapping with nominalQuota",
                "write it like 8, 500m or 32Gi",
            )
        problem = quantity_problem(data)
        if problem is not None:
            raise fail(f"nominalQuota {problem[0]}", problem[1])
        return {"nominalQuota": data}


class FlavorQuotas(_Model):
    flavor: Text = Field(alias="name")
    resources: dict[ResourceName, ResourceQuota] = {}
    _path: str = PrivateAttr(default="")

    @property
    def path(self) -> str:
        return self._path


class ResourceGroup(_Model):
    # None in the file: the resources of the first flavor.
    covered: tuple[ResourceName, ...] | None = Field(default=None, alias="coveredResources")
    flavors: tuple[FlavorQuotas, ...] = ()
    _path: str = PrivateAttr(default="")

    @property
    def path(self) -> str:
        return self._path

    @model_validator(mode="after")
    def _covered(self) -> ResourceGroup:
        if self.covered is None:
            self._derive(covered=tuple(self.flavors[0].resources) if self.flavors else ())
        return self


class LabelSelectorRequirement(_Model):
    key: LabelKey
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: tuple[LabelValue, ...] | None = None

    @model_validator(mode="after")
    def _values(self) -> LabelSelectorRequirement:
        if self.operator in ("In", "NotIn") and not self.values:
            _raise(
                "LabelSelectorRequirement",
                [(("values",), f"operator {self.operator} needs values", "list the values")],
            )
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            _raise(
                "LabelSelectorRequirement",
                [(("values",), f"operator {self.operator} takes no values", "remove `values`")],
            )
        return self


class LabelSelector(_Model):
    match_labels: dict[LabelKey, LabelValue] | None = None
    match_expressions: tuple[LabelSelectorRequirement, ...] | None = None


class BorrowWithinCohort(_Model):
    policy: Literal["Never", "LowerPriority"] = "Never"
    max_priority_threshold: int_range(-(2**31), 2**31 - 1) | None = None


class Preemption(_Model):
    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] | None = None
    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] | None = (
        None
    )
    borrow_within_cohort: BorrowWithinCohort | None = None


class FlavorFungibility(_Model):
    when_can_borrow: Literal["MayStopSearch", "TryNextFlavor"] | None = None
    when_can_preempt: Literal["MayStopSearch", "TryNextFlavor"] | None = None
    preference: Literal["BorrowingOverPreemption", "PreemptionOverBorrowing"] | None = None


class ClusterQueueSpec(_Model):
    name: dns_subdomain("ClusterQueue name")
    resource_groups: tuple[ResourceGroup, ...] = Field(default=(), validate_default=True)
    cohort: dns_subdomain("cohort name") | None = None
    queueing_strategy: Literal["BestEffortFIFO", "StrictFIFO"] = "BestEffortFIFO"
    # Kueue admits nothing for a null selector; {} (the default) means every namespace.
    namespace_selector: LabelSelector = Field(default={}, validate_default=True)
    preemption: Preemption | None = None
    flavor_fungibility: FlavorFungibility | None = None
    # flavor -> resource -> quantity; None means the sum of the workers' quotas.
    manager_quota: dict[Text, dict[ResourceName, Quantity]] | None = None
    _path: str = PrivateAttr(default="")

    @property
    def path(self) -> str:
        return self._path

    @field_validator("resource_groups")
    @classmethod
    def _some_group(cls, groups: tuple[ResourceGroup, ...]) -> tuple[ResourceGroup, ...]:
        if not groups:
            raise fail(
                "a ClusterQueue needs at least one resource group",
                "add resourceGroups with a flavor and its quotas",
            )
        return groups


class LocalQueueSpec(_Model):
    namespace: dns_label("namespace") = "default"
    name: dns_subdomain("LocalQueue name")
    cluster_queue: Text
    _path: str = PrivateAttr(default="")

    @property
    def path(self) -> str:
        return self._path


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


class QueuesSpec(_Model):
    flavors: tuple[FlavorSpec, ...] = ()
    topologies: tuple[TopologySpec, ...] = ()
    cluster_queues: tuple[ClusterQueueSpec, ...] = ()
    local_queues: tuple[LocalQueueSpec, ...] = ()


# --- credentials and dispatcher ----------------------------------------------------------


class ClusterProfileSettings(_Model):
    plugin_mount: Literal["auto", "initContainer", "imageVolume", "customImage"] = "auto"
    plugin_image: Image = SECRETREADER_PLUGIN_IMAGE
    plugin_path: AbsolutePath = SECRETREADER_PLUGIN_PATH
    access_provider: dns_label("access provider name") = "secretreader"
    # customImage mode: a Kueue image that already holds the plugin at plugin_path.
    kueue_image: Image | None = None


class CredentialsSpec(_Model):
    mode: Literal["kubeconfigSecret", "clusterProfile"] = "kubeconfigSecret"
    cluster_profile: ClusterProfileSettings = Field(default={}, validate_default=True)


class DispatchPolicyDefaults(_Model):
    # The dispatcher's own defaults (controller/model.py Policy): pack, and hedge a
    # whole-worker job on 5 workers (BENCHMARKS.md section 4, issue 39).
    strategy: Literal["MostFreeQuota", "BestFit", "OrderedSpillover"] = "BestFit"
    # Kueue accepts at most 20 nominated cluster names per workload.
    clusters_to_nominate: int_range(1, 20) = 1
    widen_after: DispatchDuration = "5m"
    when_nothing_fits: Literal["WaitOnBest", "LeastLoaded"] = "WaitOnBest"
    # A whole-worker workload that fits nowhere: nominated to this many at once (1: off).
    hedge_clusters: int_range(1, 20) = 5
    hedge_share_percent: int_range(1, 100) = 90
    cluster_selector: dict[LabelKey, LabelValue] = {}


class DispatcherSpec(_Model):
    enabled: StrictBool = True
    name: Text = DISPATCHER_NAME
    # Where it runs. "cluster": a Deployment on the manager. "local": a process the user
    # starts (`python -m controller run`), for a manager that runs no pods (the loopback
    # fleet) or a dispatcher under development; the stack then makes everything but the
    # Deployment, and outputs the settings and a kubeconfig with the dispatcher's own
    # ServiceAccount token, so the process has exactly the pod's rights.
    run: Literal["cluster", "local"] = "cluster"
    # None: built from controller/ at deploy time and pinned by digest.
    image: Image | None = None
    # Where that build is pushed when the manager is not a kind cluster.
    registry: Repository | None = None
    # What that build starts FROM (controller/Dockerfile's BASE build argument): None, its
    # default python:3.11-slim-bookworm. A host that cannot pull that one names its own (a
    # mirror's copy; `kindnode build --for-stack` sets the stand-in it builds, in
    # stacks/local/STACK.yaml), so no image of the host's is retagged to stand in for it.
    base_image: Image | None = None
    # What the build is for: the manager's nodes, not the laptop that builds it (an arm64
    # image on amd64 nodes cannot start). None: a kind manager's nodes run on the Docker
    # engine that builds the image, so its architecture; another manager's, linux/amd64.
    platform: Literal["linux/amd64", "linux/arm64"] | None = None
    # Let DispatchPolicies with `inventory` add ClusterProfiles to MultiKueue (grants the
    # dispatcher the rights to create MultiKueueClusters and its own MultiKueueConfigs).
    inventory: StrictBool = False
    replicas: int_range(1, 5) = 2
    policy: DispatchPolicyDefaults = Field(default={}, validate_default=True)

    @property
    def builds_image(self) -> bool:
        """The image is built from controller/ (then loaded into kind or pushed), which
        needs a running Docker engine on whatever kind of cluster it goes to."""
        return self.enabled and self.run == "cluster" and not self.image


# --- monitoring ----------------------------------------------------------------------------


class MonitoringSpec(_Model):
    # monitoring/'s dashboard and alerts, and the scrape targets they read, as Prometheus
    # Operator objects (components/objects/monitoring.py). Off by default: the operator's
    # CRDs are not part of a cluster, and the objects are refused without them.
    prometheus_operator: StrictBool = False
    # What the Prometheus's serviceMonitorSelector and ruleSelector match: an operator
    # ignores objects it is not told to select (kube-prometheus-stack: `release: <its
    # release name>`).
    labels: dict[LabelKey, LabelValue] = {}
    # Where the dashboard's ConfigMap goes on the manager: a namespace Grafana's dashboard
    # sidecar searches. None: the fleet's own namespace.
    dashboard_namespace: dns_label("namespace") | None = None


# --- the fleet ---------------------------------------------------------------------------


class FleetSpec(_Model):
    """One stack's fleet. Build it with load_spec (a stack's config mapping)."""

    # Default: the stack's name.
    fleet_name: dns_label("fleet name")
    manager: ManagerSpec = Field(default={}, validate_default=True)
    workers: tuple[WorkerSpec, ...] = Field(
        default=({"name": "worker1"}, {"name": "worker2"}), validate_default=True
    )
    frameworks: tuple[Text, ...] = DEFAULT_FRAMEWORKS
    kueue: KueueSpec = Field(default={}, validate_default=True)
    queues: QueuesSpec = Field(default=DEFAULT_QUEUES, validate_default=True)
    credentials: CredentialsSpec = Field(default={}, validate_default=True)
    dispatcher: DispatcherSpec = Field(default={}, validate_default=True)
    monitoring: MonitoringSpec = Field(default={}, validate_default=True)
    worker_kubeconfigs: dict[Text, SecretText] = {}
    _stack: str = PrivateAttr(default="")

    @property
    def stack(self) -> str:
        return self._stack

    @property
    def clusters(self) -> tuple[ClusterSpec, ...]:
        return (self.manager, *self.workers)

    @classmethod
    def _fill(cls, data: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        stack = (info.context or {}).get("stack")
        if "fleetName" not in data and stack:
            data["fleetName"] = stack
        workers = data.get("workers")
        if isinstance(workers, list):
            data["workers"] = [
                {"name": f"worker{i + 1}", **w}
                if isinstance(w, Mapping) and w.get("name") is None
                else ({"name": f"worker{i + 1}"} if w is None else w)
                for i, w in enumerate(workers)
            ]
        return data

    @model_validator(mode="after")
    def _fleet_defaults(self) -> FleetSpec:
        for c in self.clusters:
            c._written_frameworks = c.frameworks
            own = c.frameworks if c.frameworks is not None else self.frameworks
            # batch/Job is part of Kubernetes itself.
            c._derive(frameworks=own if "batch" in own else ("batch", *own))
        mk = self.kueue.multikueue
        if mk.origin is None:
            mk._derive(origin=f"mkf-{self.fleet_name}")
        _assign_paths(self)
        return self


def _assign_paths(spec: FleetSpec) -> None:
    """Each item that problems point at learns its `pulumi config set --path` path."""
    spec.manager._path = "manager"
    for i, w in enumerate(spec.workers):
        w._path = key_path("workers", i)
    for i, ext in enumerate(spec.kueue.external_frameworks):
        ext._path = key_path("kueue.externalFrameworks", i)
    q = spec.queues
    for i, f in enumerate(q.flavors):
        f._path = key_path("queues.flavors", i)
    for i, t in enumerate(q.topologies):
        t._path = key_path("queues.topologies", i)
    for i, cq in enumerate(q.cluster_queues):
        cq._path = key_path("queues.clusterQueues", i)
        for gi, g in enumerate(cq.resource_groups):
            g._path = key_path(key_path(cq.path, "resourceGroups"), gi)
            for fi, fq in enumerate(g.flavors):
                fq._path = key_path(key_path(g.path, "flavors"), fi)
    for i, lq in enumerate(q.local_queues):
        lq._path = key_path("queues.localQueues", i)


TOP_LEVEL_KEYS = tuple(f.alias or n for n, f in FleetSpec.model_fields.items())


# --- reading -----------------------------------------------------------------------------


def load_spec(
    config: Mapping[str, Any], stack: str, secret_keys: frozenset[str] = frozenset()
) -> tuple[FleetSpec | None, list[Problem]]:
    """Read a stack's config (bare keys, no project prefix) into a FleetSpec.

    Returns the spec (None when its shape is wrong) and the problems found; validate.validate
    adds the fleet-wide ones. Keys named in `secret_keys` hold secrets."""
    if not isinstance(config, Mapping):
        return None, [
            Problem(
                "",
                f"the config must be a mapping of keys, got {kind_of(config)}",
                "write it as `multikueue-fleet:KEY: value` entries",
            )
        ]
    try:
        spec = FleetSpec.model_validate(dict(config), context={"stack": stack})
    except ValidationError as exc:
        problems = problems_of(exc)
        if "fleetName" not in config:
            # The fleet took the stack's name, which the file name gave: say so, and that
            # either one is the fix, rather than blame a key the file does not have.
            problems = [
                replace(
                    p,
                    message=f"fleetName is unset, so the fleet takes the stack's name '{stack}' "
                    "(from the file name), which is not a valid DNS label",
                    hint="set fleetName, or name the file Pulumi.<name>.yaml with <name> "
                    "lower-case letters, digits and '-'",
                )
                if p.path == "fleetName"
                else p
                for p in problems
            ]
        return None, problems
    spec._stack = stack
    problems = []
    if "workerKubeconfigs" not in secret_keys:
        for name, secret in spec.worker_kubeconfigs.items():
            if secret.value is not None:
                problems.append(
                    Problem(
                        key_path("workerKubeconfigs", name),
                        "a kubeconfig with a credential is stored in plain text",
                        "store it encrypted: pulumi config set --secret --path "
                        f"'workerKubeconfigs.{name}' < kubeconfig",
                    )
                )
    return spec, problems


# --- pydantic errors as Problems ---------------------------------------------------------

_TYPE_ERRORS = {
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "dict_type": "a mapping",
    "list_type": "a list",
    "tuple_type": "a list",
    "string_type": "a string",
}
_HOW = {
    "a mapping": "write it as `key: value` lines under this key",
    "a list": "write it as a YAML list (`- item` lines)",
    "a string": "write a plain value",
}


def _unwrap(annotation: Any) -> list[Any]:
    """The types an annotation may hold a value of (Annotated, Optional, unions unwrapped)."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return [t for a in typing.get_args(annotation) for t in _unwrap(a)]
    return [annotation]


def _keys_at(loc: tuple[str | int, ...]) -> list[str]:
    """The keys a model at `loc` (under FleetSpec) knows, for a "did you mean" hint."""
    types: list[Any] = [FleetSpec]
    for part in loc:
        if _bracketed(part):
            continue
        following: list[Any] = []
        for t in types:
            if isinstance(t, type) and issubclass(t, BaseModel):
                for name, field in t.model_fields.items():
                    if part in (field.alias, name):
                        following += _unwrap(field.annotation)
            elif typing.get_origin(t) in (tuple, list):
                following += _unwrap(typing.get_args(t)[0])
            elif typing.get_origin(t) is dict:
                following += _unwrap(typing.get_args(t)[1])
        types = following
    for t in types:
        if isinstance(t, type) and issubclass(t, BaseModel):
            return [f.alias or n for n, f in t.model_fields.items()]
    return []


def _bracketed(part: str | int) -> bool:
    """A part of a loc pydantic adds that is no key of the file: `[key]`, a union's tag."""
    return isinstance(part, str) and part.startswith("[") and part.endswith("]")


def loc_path(loc: tuple[str | int, ...]) -> str:
    """A pydantic error's location as a config path, without the parts it adds."""
    path = ""
    for part in loc:
        if _bracketed(part):
            continue
        path = key_path(path, part)
    return path


def problems_of(exc: ValidationError) -> list[Problem]:
    """Every error of a validation, in the project's form."""
    out: list[Problem] = []
    for err in exc.errors(include_url=False, include_input=True):
        loc = tuple(err["loc"])
        kind = err["type"]
        ctx = err.get("ctx") or {}
        value = err.get("input")
        last = str(loc[-1]) if loc else ""
        if isinstance(value, Mapping) and set(value) == {"secure"} and kind != "extra_forbidden":
            message = "an encrypted (secret) value is not supported here"
            fix = "only workerKubeconfigs may be secret: set this one in plain text"
        elif kind == "fleet":
            message, fix = ctx["message"], ctx.get("fix", "")
        elif kind == "missing":
            message, fix = "is required", f"set `{last}` in the stack file"
        elif kind == "extra_forbidden":
            known = _keys_at(loc[:-1])
            message = "unknown key"
            fix = f"{did_you_mean(last, known)}known keys here: {', '.join(known)}"
        elif kind in _TYPE_ERRORS:
            wanted = _TYPE_ERRORS[kind]
            message, fix = f"expected {wanted}, got {kind_of(value)}", _HOW[wanted]
        elif kind == "literal_error":
            choices = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
            message = f"'{show(value)}' is not one of {', '.join(choices)}"
            fix = f"{did_you_mean(str(value), choices)}use one of {', '.join(choices)}"
        else:
            message, fix = err["msg"], ""
        out.append(Problem(loc_path(loc), message, fix))
    return out
