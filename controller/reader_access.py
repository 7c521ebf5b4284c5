"""How the dispatcher reaches each worker with its read-only identity.

A Secret in the dispatcher's namespace, labelled with the worker's MultiKueueCluster name,
holds either a whole `kubeconfig` (what the stack writes for its workers) or only a
bearer `token`. A token is paired with the API server and CA that the worker's
ClusterProfile publishes in `status.accessProviders`: that is how a cluster that joined
through the inventory is reached without anyone writing a kubeconfig for it. The
dispatcher never borrows Kueue's credentials (they may create Jobs on the worker); its
token only needs to read ClusterQueues, LocalQueues and Workloads there.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

KUBECONFIG_KEY = "kubeconfig"
TOKEN_KEY = "token"


@dataclass(frozen=True)
class Access:
    kubeconfig: str | None  # YAML text, None when the worker cannot be reached
    reason: str = ""  # why not, for `explain` and the policy's verdicts


def _decoded(secret: Mapping[str, Any], key: str) -> str | None:
    value = (secret.get("data") or {}).get(key)
    return base64.b64decode(value).decode().strip() if value else None


def profile_name(cluster: Mapping[str, Any] | None, worker: str) -> str:
    """The ClusterProfile a MultiKueueCluster is reached through (its own name if none)."""
    source = ((cluster or {}).get("spec") or {}).get("clusterSource") or {}
    return (source.get("clusterProfileRef") or {}).get("name") or worker


def endpoint(profile: Mapping[str, Any]) -> dict[str, Any] | None:
    """The profile's first access provider entry that names a server (with its CA)."""
    for entry in (profile.get("status") or {}).get("accessProviders") or []:
        cluster = entry.get("cluster") or {}
        if cluster.get("server"):
            return cluster
    return None


def token_kubeconfig(worker: str, cluster: Mapping[str, Any], token: str) -> str:
    entry = {"server": cluster["server"]}
    if cluster.get("certificate-authority-data"):
        entry["certificate-authority-data"] = cluster["certificate-authority-data"]
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": worker,
            "clusters": [{"name": worker, "cluster": entry}],
            "users": [{"name": "dispatcher-reader", "user": {"token": token}}],
            "contexts": [
                {"name": worker, "context": {"cluster": worker, "user": "dispatcher-reader"}}
            ],
        }
    )


def resolve(
    worker: str,
    secret: Mapping[str, Any],
    cluster: Mapping[str, Any] | None,
    profiles: Mapping[str, Mapping[str, Any]],
) -> Access:
    """A worker's reader kubeconfig from its Secret, with the profile's server for a token.
    `profiles`: ClusterProfile name -> object, in Kueue's namespace."""
    text = _decoded(secret, KUBECONFIG_KEY)
    if text:
        return Access(text)
    token = _decoded(secret, TOKEN_KEY)
    name = (secret.get("metadata") or {}).get("name", "")
    if not token:
        return Access(None, f"reader Secret {name} has neither a `kubeconfig` nor a `token` key")
    profile_ref = profile_name(cluster, worker)
    profile = profiles.get(profile_ref)
    if profile is None:
        return Access(
            None,
            f"reader Secret {name} holds a token, but there is no ClusterProfile {profile_ref} "
            "to say where the API server is (or the dispatcher does not watch profiles: "
            "set dispatcher.inventory)",
        )
    found = endpoint(profile)
    if found is None:
        return Access(
            None, f"ClusterProfile {profile_ref} lists no access provider with a server yet"
        )
    return Access(token_kubeconfig(worker, found, token))
