"""The controller's own settings, read from the YAML file the stack mounts from a
ConfigMap. Everything has a default, so an empty file is a working configuration."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from controller.model import Policy
from controller.policy_api import InvalidPolicy, parse


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
    resync_seconds: float = 15.0  # pending workloads are looked at again this often
    lease_duration_seconds: float = 15.0
    lease_renew_seconds: float = 5.0
    metrics_port: int = 8080
    # Status patches under way at once (one per workload at most): enough to hide the
    # API server's round trip, few enough to stay a polite client.
    concurrent_writes: int = 16


def load_settings(path: str | Path | None) -> Settings:
    raw: dict[str, Any] = {}
    if path:
        raw = yaml.safe_load(Path(path).read_text()) or {}
    known = {
        "namespace",
        "kueueNamespace",
        "leaseName",
        "workerSecretLabel",
        "defaultPolicy",
        "clusterProfiles",
        "inventory",
        "staleAfterSeconds",
        "resyncSeconds",
        "metricsPort",
        "concurrentWrites",
    }
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(
            f"{path}: unknown settings {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    try:
        policy, _ = parse({"metadata": {"name": "default"}, "spec": raw.get("defaultPolicy") or {}})
    except InvalidPolicy as exc:
        raise ValueError(f"{path}: defaultPolicy: {exc}") from exc
    profiles = tuple(
        DeclaredProfile(
            p["name"],
            p["server"],
            p.get("certificateAuthorityData", ""),
            p["tokenSecret"],
            p.get("accessProvider", "secretreader"),
        )
        for p in raw.get("clusterProfiles") or []
    )
    base = Settings()
    return Settings(
        namespace=raw.get("namespace", base.namespace),
        kueue_namespace=raw.get("kueueNamespace", base.kueue_namespace),
        lease_name=raw.get("leaseName", base.lease_name),
        worker_secret_label=raw.get("workerSecretLabel", base.worker_secret_label),
        default_policy=policy,
        cluster_profiles=profiles,
        inventory=bool(raw.get("inventory", base.inventory)),
        stale_after_seconds=float(raw.get("staleAfterSeconds", base.stale_after_seconds)),
        resync_seconds=float(raw.get("resyncSeconds", base.resync_seconds)),
        metrics_port=int(raw.get("metricsPort", base.metrics_port)),
        concurrent_writes=int(raw.get("concurrentWrites", base.concurrent_writes)),
    )
