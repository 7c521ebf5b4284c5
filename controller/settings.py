"""The controller's own settings, read from the YAML file the stack mounts from a
ConfigMap (components/objects/dispatcher.py renders it). Everything has a default, so an
empty file is a working configuration; every mistake is refused at start with one line per
mistake (the key, what is wrong, the fix), never run with a silently different meaning."""

from __future__ import annotations

import base64
import binascii
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import Field, StrictBool, ValidationError, field_validator, model_validator

from controller.hosts import kueue_trusts_server, split_url
from controller.model import Policy
from controller.policy_api import FIXES as POLICY_FIXES
from controller.policy_api import PolicySpec
from controller.typed import (
    NAMESPACE,
    OBJECT_NAME,
    DnsLabel,
    DnsSubdomain,
    LabelKey,
    Strict,
    problems,
)


@dataclass(frozen=True)
class DeclaredProfile:
    """A worker reached through a ClusterProfile, as the stack declared it: the controller
    keeps that profile's status (access provider, health, version) current."""

    name: str
    server: str
    certificate_authority_data: str
    token_secret: str
    access_provider: str = "secretreader"


@dataclass(frozen=True)
class Settings:
    namespace: str = "multikueue-fleet-system"
    kueue_namespace: str = "kueue-system"
    lease_name: str = "multikueue-fleet-dispatcher"
    identity: str = field(
        default_factory=lambda: os.environ.get("POD_NAME") or socket.gethostname()
    )
    # Secrets in `namespace` with this label hold the read-only kubeconfig of a worker,
    # the label's value naming the worker (its MultiKueueCluster).
    worker_secret_label: str = "multikueue-fleet/worker"
    default_policy: Policy = field(default_factory=Policy)
    cluster_profiles: tuple[DeclaredProfile, ...] = ()
    # Inventory automation is on: watch ClusterProfiles, so a worker that joined through
    # the inventory is reached with a reader token and the server its profile names.
    inventory: bool = False
    stale_after_seconds: float = 60.0  # a worker silent for longer is unhealthy
    # Kueue's multiKueue.workerLostTimeout (15m by default, Kueue v0.19.2
    # apis/config/v1beta2/defaults.go): how long a nomination on a worker the dispatcher
    # cannot reach is kept, as Kueue keeps the worker that long.
    worker_lost_timeout_seconds: float = 900.0
    resync_seconds: float = 15.0  # pending workloads are looked at again this often
    lease_duration_seconds: float = 15.0
    lease_renew_seconds: float = 5.0
    # A leader that has not renewed for this long stops writing; None: two thirds of the
    # lease duration, client-go's default ratio (controller/leader.py).
    lease_renew_deadline_seconds: float | None = None
    metrics_port: int = 8080
    # Status patches under way at once (one per workload at most): enough to hide the
    # API server's round trip, few enough to stay a polite client.
    concurrent_writes: int = 16


class SettingsError(ValueError):
    """The settings file cannot be used; one line per mistake."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        super().__init__("\n".join(lines))


# k8s.io/client-go v0.36.3, tools/leaderelection/leaderelection.go (NewLeaderElector):
# the renew deadline must exceed the retry period times this jitter factor.
JITTER_FACTOR = 1.2


def default_renew_deadline(duration: float) -> float:
    """client-go's defaults are a 15 s lease and a 10 s renew deadline: two thirds."""
    return duration * 2 / 3


_BASE = Settings(identity="")
# A period longer than an hour is a typo (minutes for seconds?) rather than a wish.
_HOUR = 3600.0
# The longest workerLostTimeoutSeconds taken (the stack's validate refuses a longer one).
WORKER_LOST_TIMEOUT_MAX = 24 * _HOUR

FIXES = {
    **POLICY_FIXES,
    "namespace": NAMESPACE,
    "kueueNamespace": NAMESPACE,
    "leaseName": OBJECT_NAME,
    "workerSecretLabel": "a label key such as multikueue-fleet/worker",
    "inventory": "true or false, without quotes",
    "staleAfterSeconds": "seconds, a number above 0 and at most 3600 (default 60)",
    "workerLostTimeoutSeconds": "seconds, a number from 0 to 86400 (default 900, Kueue's "
    "workerLostTimeout)",
    # Below a tenth of a second the resync loop would spin a core on an idle fleet.
    "resyncSeconds": "seconds, a number from 0.1 to 3600 (default 15)",
    "leaseDurationSeconds": "seconds, a number from 1 to 3600 (default 15)",
    "leaseRenewSeconds": "seconds, above 0 and below leaseDurationSeconds (default 5)",
    "leaseRenewDeadlineSeconds": "seconds, above 1.2 x leaseRenewSeconds and below "
    "leaseDurationSeconds (default two thirds of leaseDurationSeconds)",
    "metricsPort": "a TCP port from 1 to 65535 (default 8080)",
    # 0 would mean no nomination is ever written.
    "concurrentWrites": "a whole number from 1 to 256 (default 16)",
    "clusterProfiles": "a list of {name, server, tokenSecret} mappings",
    "name": f"the worker's name ({OBJECT_NAME})",
    "server": "the worker's API server URL, https://hostname:port, its host a DNS name or an "
    "IP address ([IPv6]:port), no user@, query or spaces",
    "tokenSecret": f"the Secret holding the worker's token ({OBJECT_NAME})",
    "certificateAuthorityData": "the worker's CA bundle (PEM), base64-encoded: base64 -w0 ca.crt",
    "accessProvider": "the name of a ClusterProfile access provider",
    "defaultPolicy": "a DispatchPolicy spec (strategy, clustersToNominate, ...)",
}


class ProfileEntry(Strict):
    """One entry of `clusterProfiles`."""

    name: DnsSubdomain
    server: Annotated[str, Field(min_length=1)]
    token_secret: DnsSubdomain
    certificate_authority_data: str = ""
    access_provider: Annotated[str, Field(min_length=1)] = "secretreader"

    # What the dispatcher writes into the ClusterProfile's status.accessProviders[].cluster,
    # taken as the CRD takes it (cluster-inventory-api v0.1.3,
    # config/crd/bases/multicluster.x-k8s.io_clusterprofiles.yaml): `server` "the address of
    # the kubernetes cluster (https://hostname:port)", `certificate-authority-data` PEM
    # certificates with `format: byte`, so base64, which the API server checks on every write.
    @field_validator("server")
    @classmethod
    def _https_url(cls, server: str) -> str:
        if server != server.strip():
            raise ValueError("has spaces around it, which Kueue cannot parse (Go's url.Parse)")
        url = split_url(server)
        if url is None:
            raise ValueError("has an invalid port or an unclosed IPv6 bracket")
        if url.scheme != "https" or not url.hostname:
            raise ValueError("is not an https:// URL with a host (https://hostname:port)")
        if url.username is not None or "?" in server or "#" in server:
            # The CRD's server is https://hostname:port: credentials come from tokenSecret,
            # and a query or fragment would be dropped or sent with every request.
            raise ValueError(
                "has a user@, a query or a fragment: a ClusterProfile's server is "
                "https://hostname:port alone"
            )
        if not kueue_trusts_server(server):
            # Kueue v0.19.2 pkg/controller/admissionchecks/multikueue/multikueuecluster.go,
            # isValidHostname: the MultiKueueCluster would stay inactive.
            raise ValueError(
                "has a host Kueue refuses as an untrusted server endpoint "
                "(neither an IP address nor a DNS name)"
            )
        return server

    @field_validator("certificate_authority_data")
    @classmethod
    def _base64_pem(cls, data: str) -> str:
        if not data:
            return data  # the system's roots
        if "-----BEGIN" in data:
            raise ValueError(
                "is PEM text, and the ClusterProfile takes it base64-encoded (`base64 -w0 ca.crt`)"
            )
        try:
            pem = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("is not base64 (`base64 -w0 ca.crt` gives it)") from None
        if b"-----BEGIN CERTIFICATE-----" not in pem:
            raise ValueError("decodes to no PEM certificate (`base64 -w0 ca.crt` of the CA)")
        return data


class SettingsFile(Strict):
    """The settings file as written (camelCase keys); `settings()` gives the runtime form."""

    namespace: DnsLabel = _BASE.namespace
    kueue_namespace: DnsLabel = _BASE.kueue_namespace
    lease_name: DnsSubdomain = _BASE.lease_name
    worker_secret_label: LabelKey = _BASE.worker_secret_label
    default_policy: PolicySpec | None = None
    cluster_profiles: list[ProfileEntry] | None = None
    inventory: StrictBool = _BASE.inventory
    stale_after_seconds: Annotated[float, Field(gt=0, le=_HOUR)] = _BASE.stale_after_seconds
    worker_lost_timeout_seconds: Annotated[float, Field(ge=0, le=WORKER_LOST_TIMEOUT_MAX)] = (
        _BASE.worker_lost_timeout_seconds
    )
    resync_seconds: Annotated[float, Field(ge=0.1, le=_HOUR)] = _BASE.resync_seconds
    lease_duration_seconds: Annotated[float, Field(ge=1, le=_HOUR)] = _BASE.lease_duration_seconds
    lease_renew_seconds: Annotated[float, Field(gt=0, le=_HOUR)] = _BASE.lease_renew_seconds
    lease_renew_deadline_seconds: Annotated[float, Field(gt=0, le=_HOUR)] | None = None
    metrics_port: Annotated[int, Field(ge=1, le=65535)] = _BASE.metrics_port
    concurrent_writes: Annotated[int, Field(ge=1, le=256)] = _BASE.concurrent_writes

    @model_validator(mode="after")
    def _consistent(self) -> SettingsFile:
        if self.lease_renew_seconds >= self.lease_duration_seconds:
            # A leader renewing no sooner than its lease expires loses it between renewals.
            raise ValueError(
                f"leaseRenewSeconds ({self.lease_renew_seconds:g}) must be below "
                f"leaseDurationSeconds ({self.lease_duration_seconds:g})"
            )
        # k8s.io/client-go v0.36.3, tools/leaderelection/leaderelection.go NewLeaderElector:
        # leaseDuration > renewDeadline > JitterFactor x retryPeriod, so a leader gives up
        # before a standby may take over, and gets more than one try before it gives up.
        deadline = self.lease_renew_deadline_seconds
        shown = "leaseRenewDeadlineSeconds"
        if deadline is None:
            deadline = default_renew_deadline(self.lease_duration_seconds)
            shown = f"the renew deadline (two thirds of leaseDurationSeconds, {deadline:g})"
        if deadline >= self.lease_duration_seconds:
            raise ValueError(
                f"{shown} ({deadline:g}) must be below leaseDurationSeconds "
                f"({self.lease_duration_seconds:g}): a leader must stop before its lease runs out"
            )
        if deadline <= JITTER_FACTOR * self.lease_renew_seconds:
            raise ValueError(
                f"{shown} ({deadline:g}) must be above {JITTER_FACTOR:g} x leaseRenewSeconds "
                f"({JITTER_FACTOR * self.lease_renew_seconds:g}): lower leaseRenewSeconds or "
                "raise leaseRenewDeadlineSeconds"
            )
        names = [p.name for p in self.cluster_profiles or ()]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(
                f"clusterProfiles: the name(s) {', '.join(twice)} appear more than once"
            )
        return self

    def settings(self) -> Settings:
        spec = self.default_policy or PolicySpec()
        return Settings(
            namespace=self.namespace,
            kueue_namespace=self.kueue_namespace,
            lease_name=self.lease_name,
            worker_secret_label=self.worker_secret_label,
            default_policy=spec.policy("default"),
            cluster_profiles=tuple(
                DeclaredProfile(
                    p.name,
                    p.server,
                    p.certificate_authority_data,
                    p.token_secret,
                    p.access_provider,
                )
                for p in self.cluster_profiles or ()
            ),
            inventory=self.inventory,
            stale_after_seconds=self.stale_after_seconds,
            worker_lost_timeout_seconds=self.worker_lost_timeout_seconds,
            resync_seconds=self.resync_seconds,
            lease_duration_seconds=self.lease_duration_seconds,
            lease_renew_seconds=self.lease_renew_seconds,
            lease_renew_deadline_seconds=self.lease_renew_deadline_seconds,
            metrics_port=self.metrics_port,
            concurrent_writes=self.concurrent_writes,
        )


def parse_settings(raw: Any, source: str = "settings") -> Settings:
    """Settings from the parsed YAML of a settings file; SettingsError lists every mistake
    as "<source>: <key>: <what is wrong>; fix: <how>"."""
    if raw is None:
        raw = {}  # an empty file: every default
    try:
        model = SettingsFile.model_validate(raw)
    except ValidationError as exc:
        raise SettingsError(
            [f"{source}: {line}" for line in problems(exc, SettingsFile, "", FIXES)]
        ) from None
    return model.settings()


class _UniqueKeys(yaml.SafeLoader):
    """YAML as safe_load reads it, except that a key given twice in one mapping is an
    error: plain YAML keeps the last value without a word."""


def _mapping(loader: _UniqueKeys, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # `<<: *base`: keys merged in may be overridden here, as YAML intends
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, (str, int, float, bool)):
            continue  # a list or mapping as a key: the model refuses it with its path
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"the key '{key}' is given twice", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep)


_UniqueKeys.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def load_settings(path: str | Path | None) -> Settings:
    """The settings in the file at `path` (None: every default); SettingsError says what is
    wrong with it, one line per mistake."""
    if not path:
        return parse_settings({})
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise SettingsError(
            [
                f"{path}: cannot read the settings file: {exc.strerror}; fix: give --config an "
                "existing YAML file, or leave it out for every default"
            ]
        ) from None
    try:
        raw = yaml.load(text, Loader=_UniqueKeys)  # a SafeLoader: plain data only
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = getattr(exc, "problem", None) or "not valid YAML"
        raise SettingsError(
            [f"{path}: not valid YAML{where}: {what}; fix: correct the YAML syntax there"]
        ) from None
    return parse_settings(raw, str(path))
