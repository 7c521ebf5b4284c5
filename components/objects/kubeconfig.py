"""Kubeconfigs the MultiKueue manager uses to reach a worker: built here, and checked
against the rules Kueue 0.19 applies before it will connect (research/kueue-api.md §5)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from components.model.spec import ExistingSettings
from controller.api import kueue_trusts_server


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


# The context a reader kubeconfig of a kind worker also has: the same token, at the address
# the worker's API server is published on this machine (`kind get kubeconfig`), for a
# dispatcher or `mkf controller explain` that runs on the host, where the in-network name
# <cluster>-control-plane does not resolve. controller/kube.py picks it outside a pod.
FROM_HOST_CONTEXT = "from-host"


def with_host_context(config: dict[str, Any], host_server: str) -> dict[str, Any]:
    """`config` (one cluster, one user) plus FROM_HOST_CONTEXT at `host_server`; the current
    context stays the in-network one. kind's API server certificate names 127.0.0.1 and
    localhost (kind v0.33.0 pkg/cluster/internal/kubeadm/config.go certSANs)."""
    cluster = config["clusters"][0]
    user = config["users"][0]["name"]
    return {
        **config,
        "clusters": [
            *config["clusters"],
            {"name": FROM_HOST_CONTEXT, "cluster": {**cluster["cluster"], "server": host_server}},
        ],
        "contexts": [
            *config["contexts"],
            {"name": FROM_HOST_CONTEXT, "context": {"cluster": FROM_HOST_CONTEXT, "user": user}},
        ],
    }


def existing_kubeconfig_path(existing: ExistingSettings) -> Path:
    """The kubeconfig file of an `existing` cluster: kubeconfigPath, else the first file
    of KUBECONFIG, else ~/.kube/config."""
    path = existing.kubeconfig_path or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    return Path(path or Path.home() / ".kube" / "config").expanduser()


def read_kubeconfig_file(path: Path) -> str:
    """The text of a kubeconfig file. ValueError, one line saying what is wrong with the
    file, when it is missing, a directory, unreadable, empty or not a YAML mapping."""
    if path.is_dir():
        raise ValueError("it is a directory, not a kubeconfig file")
    if not path.exists():
        raise ValueError("no such file")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"it cannot be read ({exc.__class__.__name__}: {exc})") from None
    if not text.strip():
        raise ValueError("the file is empty")
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"it is not valid YAML ({exc.__class__.__name__})") from None
    if not isinstance(config, dict):
        raise ValueError("it is not a kubeconfig (expected a mapping with contexts)")
    return text


def _entries(config: dict[str, Any], section: str) -> list[dict[str, Any]]:
    """The mappings of a kubeconfig list (`clusters`, `users`, `contexts`); anything else
    in it (an empty `- ` item, a string) is no entry."""
    items = config.get(section)
    return [e for e in items if isinstance(e, dict)] if isinstance(items, list) else []


def context_cluster(text: str, context: str) -> tuple[str, str]:
    """(API server URL, CA) of `context` in a kubeconfig: the CA's data, or the path of its
    file. ValueError when the context is not there."""
    config = yaml.safe_load(text) or {}
    if not isinstance(config, dict):
        raise ValueError("it is not a kubeconfig (expected a mapping with contexts)")
    ctx = next(
        (c.get("context") or {} for c in _entries(config, "contexts") if c.get("name") == context),
        None,
    )
    if ctx is None:
        raise ValueError(f"no context {context!r} in the kubeconfig")
    cluster = next(
        (
            c.get("cluster") or {}
            for c in _entries(config, "clusters")
            if isinstance(ctx, dict) and c.get("name") == ctx.get("cluster")
        ),
        {},
    )
    if not isinstance(cluster, dict):
        cluster = {}
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
    entry = next((c for c in _entries(config, "contexts") if c.get("name") == context), None)
    if entry is None:
        names = ", ".join(str(c.get("name")) for c in _entries(config, "contexts")) or "none"
        raise ValueError(f"it has no context {context!r} (it has: {names})")
    ctx = entry.get("context")
    if not isinstance(ctx, dict):
        raise ValueError(f"its context {context!r} names no cluster and user")

    def named(section: str, name: Any) -> list[dict[str, Any]]:
        return [e for e in _entries(config, section) if e.get("name") == name][:1]

    reduced = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": named("clusters", ctx.get("cluster")),
        "users": named("users", ctx.get("user")),
        "contexts": [entry],
        "current-context": context,
    }
    return yaml.safe_dump(reduced, sort_keys=False)


def kubeconfig_server(text: str) -> str:
    """The server of the current context of a kubeconfig text; "" when there is none."""
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError:
        return ""
    if not isinstance(config, dict) or not isinstance(config.get("current-context"), str):
        return ""
    try:
        return context_cluster(text, config["current-context"])[0]
    except ValueError:
        return ""


def kueue_rejections(text: str) -> list[str]:
    """Why Kueue would mark a MultiKueueCluster using this kubeconfig inactive; [] if none."""
    if not text.strip():
        return ["it is empty"]
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return [f"it is not valid YAML ({exc.__class__.__name__})"]
    if not isinstance(config, dict):
        return ["it is not a kubeconfig (expected a mapping with clusters, users, contexts)"]
    reasons = []
    contexts = {c.get("name"): c.get("context") or {} for c in _entries(config, "contexts")}
    current = config.get("current-context")
    if not current or current not in contexts:
        reasons.append("current-context is missing or names no context in the file")
    for entry in _entries(config, "clusters"):
        name, cluster = entry.get("name"), entry.get("cluster") or {}
        if not isinstance(cluster, dict):
            reasons.append(f"cluster '{name}' is not a mapping")
            continue
        server = cluster.get("server") or ""
        if not server:
            reasons.append(f"cluster '{name}' has no server")
        elif not kueue_trusts_server(server):
            reasons.append(f"cluster '{name}' server host is neither an IP nor a DNS name")
        if cluster.get("insecure-skip-tls-verify"):
            reasons.append(f"cluster '{name}' sets insecure-skip-tls-verify")
        if cluster.get("certificate-authority"):
            reasons.append(f"cluster '{name}' reads its CA from a file (certificate-authority)")
    for entry in _entries(config, "users"):
        name, user = entry.get("name"), entry.get("user") or {}
        if not isinstance(user, dict):
            reasons.append(f"user '{name}' is not a mapping")
            continue
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
