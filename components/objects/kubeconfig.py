"""Kubeconfigs the MultiKueue manager uses to reach a worker: built here, and checked
against the rules Kueue 0.19 applies before it will connect (research/kueue-api.md §5)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from components.model.spec import ExistingSettings

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_IPV4 = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")


def worker_kubeconfig(
    cluster: str, server: str, ca_data: str, token: str, user: str = ""
) -> dict[str, Any]:
    """One cluster, one token user, one context, current-context set (Kueue parses it with
    client-go RESTConfigFromKubeConfig, which needs the current context)."""
    user = user or f"{cluster}-multikueue"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": cluster, "cluster": {"server": server, "certificate-authority-data": ca_data}}
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": user}}],
        "current-context": cluster,
    }


def existing_kubeconfig_path(existing: ExistingSettings) -> Path:
    """The kubeconfig file of an `existing` cluster: kubeconfigPath, else the first file
    of KUBECONFIG, else ~/.kube/config."""
    path = existing.kubeconfig_path or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    return Path(path or Path.home() / ".kube" / "config").expanduser()


def context_cluster(text: str, context: str) -> tuple[str, str]:
    """(API server URL, CA) of `context` in a kubeconfig: the CA's data, or the path of its
    file. ValueError when the context is not there."""
    config = yaml.safe_load(text) or {}
    if not isinstance(config, dict):
        raise ValueError("it is not a kubeconfig (expected a mapping with contexts)")
    ctx = next(
        (
            c.get("context") or {}
            for c in config.get("contexts") or []
            if isinstance(c, dict) and c.get("name") == context
        ),
        None,
    )
    if ctx is None:
        raise ValueError(f"no context {context!r} in the kubeconfig")
    cluster = next(
        (
            c.get("cluster") or {}
            for c in config.get("clusters") or []
            if isinstance(c, dict) and c.get("name") == ctx.get("cluster")
        ),
        {},
    )
    ca = cluster.get("certificate-authority-data") or cluster.get("certificate-authority") or ""
    return str(cluster.get("server", "")), str(ca)


def reduce_to_context(text: str, context: str) -> str:
    """The user's kubeconfig cut down to one context, its cluster and its user, with
    current-context set to it: what the stack keeps and exports for an existing cluster,
    so that another context, a login elsewhere or a `use-context` in the user's file
    changes nothing in the stack. ValueError (one line) when the context is missing."""
    config = yaml.safe_load(text) or {}
    if not isinstance(config, dict):
        raise ValueError("it is not a kubeconfig (expected a mapping with contexts)")
    entry = next((c for c in config.get("contexts") or [] if c.get("name") == context), None)
    if entry is None:
        names = ", ".join(str(c.get("name")) for c in config.get("contexts") or []) or "none"
        raise ValueError(f"it has no context {context!r} (it has: {names})")
    ctx = entry.get("context") or {}

    def named(section: str, name: Any) -> list[dict[str, Any]]:
        return [e for e in config.get(section) or [] if e.get("name") == name][:1]

    reduced = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": named("clusters", ctx.get("cluster")),
        "users": named("users", ctx.get("user")),
        "contexts": [entry],
        "current-context": context,
    }
    return yaml.safe_dump(reduced, sort_keys=False)


def _host_ok(server: str) -> bool:
    host = (urlsplit(server).hostname or "").lower()
    if _IPV4.match(host) or ":" in host:
        return True
    return bool(host) and len(host) <= 253 and bool(_DNS_SUBDOMAIN.match(host))


def kueue_rejections(text: str) -> list[str]:
    """Why Kueue would mark a MultiKueueCluster using this kubeconfig inactive; [] if none."""
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return [f"it is not valid YAML ({exc.__class__.__name__})"]
    if not isinstance(config, dict):
        return ["it is not a kubeconfig (expected a mapping with clusters, users, contexts)"]
    reasons = []
    contexts = {c.get("name"): c.get("context") or {} for c in config.get("contexts") or []}
    current = config.get("current-context")
    if not current or current not in contexts:
        reasons.append("current-context is missing or names no context in the file")
    for entry in config.get("clusters") or []:
        name, cluster = entry.get("name"), entry.get("cluster") or {}
        server = cluster.get("server") or ""
        if not server:
            reasons.append(f"cluster '{name}' has no server")
        elif not _host_ok(server):
            reasons.append(f"cluster '{name}' server host is neither an IP nor a DNS name")
        if cluster.get("insecure-skip-tls-verify"):
            reasons.append(f"cluster '{name}' sets insecure-skip-tls-verify")
        if cluster.get("certificate-authority"):
            reasons.append(f"cluster '{name}' reads its CA from a file (certificate-authority)")
    for entry in config.get("users") or []:
        name, user = entry.get("name"), entry.get("user") or {}
        for key, why in (
            ("exec", "runs an exec credential plugin"),
            ("auth-provider", "uses an auth-provider"),
            ("tokenFile", "reads its token from a file (tokenFile)"),
            ("username", "uses basic auth"),
            ("password", "uses basic auth"),
        ):
            if user.get(key):
                reasons.append(f"user '{name}' {why}")
    return list(dict.fromkeys(reasons))


KUBECONFIG_FIX = (
    "give the manager a kubeconfig with an inline `token` and `certificate-authority-data`, "
    "a reachable https server, and current-context set; or drop the entry and let the stack "
    "create a least-privilege ServiceAccount on the worker"
)
