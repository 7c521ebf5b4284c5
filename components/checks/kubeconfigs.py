"""Existing clusters' kubeconfigs and the API servers the manager's pods reach workers at,
as their consumers take them: client-go loading the file (its context, paths, CA and
authentication), the deploying machine running its credential command, and MultiKueue and
the dispatcher in pods on the manager connecting to each worker's server. Each rule names
the consumer's own rule where it comes from."""

from __future__ import annotations

import base64
import binascii
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from components.model.problems import Problem, key_path
from components.model.spec import ClusterSpec, FleetSpec
from components.objects.kubeconfig import (
    context_cluster,
    existing_kubeconfig_path,
    kubeconfig_server,
    read_kubeconfig_file,
    reduce_to_context,
)
from controller.api import is_loopback_host, kueue_trusts_server, server_host, split_url

# (message, fix) of one problem, before the config path it is reported at is known.
Fault = tuple[str, str]
KIND_SERVER_HINT = "on kind, https://<kind cluster name>-control-plane:6443"


def _pods_reach_workers(spec: FleetSpec) -> list[str]:
    """What runs in a pod on the manager and connects to every worker's API server."""
    who = []
    if spec.kueue.install == "managed":
        who.append("Kueue (MultiKueue)")
    if spec.dispatcher.enabled and spec.dispatcher.run == "cluster":
        who.append("the dispatcher")
    return who


def context_problem(c: ClusterSpec) -> Problem | None:
    """An `existing.context` the cluster's kubeconfig file does not have, found before `up`
    fails on it half-way. None when the file is not there yet (the loopback launcher's, a
    CI runner's): `up` says that, naming the file."""
    assert c.existing is not None
    path = existing_kubeconfig_path(c.existing)
    try:
        text = read_kubeconfig_file(path)
        config = yaml.safe_load(text)
    except (ValueError, yaml.YAMLError):
        return None
    contexts = [
        str(e.get("name"))
        for e in (config.get("contexts") or [])
        if isinstance(e, dict) and e.get("name") is not None
    ]
    if c.existing.context in contexts:
        return None
    return Problem(
        key_path(c.path, "existing.context"),
        f"the kubeconfig {path} has no context '{c.existing.context}' "
        f"(it has: {', '.join(contexts) or 'none'})",
        f"set {c.path}.existing.context to one of its contexts, or point "
        f"{c.path}.existing.kubeconfigPath at this cluster's kubeconfig",
    )


def credential_command_problem(
    c: ClusterSpec, which: Callable[[str], str | None] = shutil.which
) -> Problem | None:
    """The command an existing cluster's kubeconfig runs for credentials (its user's
    `exec`: kubelogin, gke-gcloud-auth-plugin, `aws eks get-token`) when this machine has
    no such command: every Kubernetes call of `up` would fail on it. For the pre-flight of
    `mkf up` only: the deploying machine's PATH, not the one running `validate`."""
    assert c.existing is not None
    path = existing_kubeconfig_path(c.existing)
    try:
        # The context with its cluster and user alone, as the stack keeps it.
        reduced = yaml.safe_load(reduce_to_context(read_kubeconfig_file(path), c.existing.context))
    except (ValueError, yaml.YAMLError):
        return None  # a missing file or context is context_problem's to say
    user = next(iter(reduced["users"]), {}).get("user")
    command = (user.get("exec") or {}).get("command") if isinstance(user, dict) else None
    if not command or which(str(command)) is not None:
        return None
    return Problem(
        key_path(c.path, "existing.context"),
        f"the kubeconfig {path} gets this cluster's credentials by running '{command}' "
        "(its user's exec plugin), which is not on PATH here",
        f"install '{command}' on this machine (or put it on PATH), then run again",
    )


def _body(reduced: dict[str, Any], section: str) -> dict[str, Any]:
    """The body of the one `cluster` or `user` a reduced kubeconfig holds ({} if none)."""
    entry = next(iter(reduced.get(f"{section}s") or []), {})
    body = entry.get(section)
    return body if isinstance(body, dict) else {}


def kubeconfig_problems(c: ClusterSpec) -> Iterator[Problem]:
    """The existing cluster's kubeconfig as client-go v0.36.4 loads it (tools/clientcmd:
    loader.go resolves file paths against the kubeconfig's folder, validation.go
    validateClusterInfo and validateAuthInfo refuse the rest, transport/transport.go refuses
    a CA beside insecure-skip-tls-verify): what `up` would otherwise fail on half-way, one
    problem each. A missing file is left to `up` (a CI runner writes it later); a missing
    context is context_problem's."""
    assert c.existing is not None
    path = existing_kubeconfig_path(c.existing)
    where = key_path(
        c.path, "existing.kubeconfigPath" if c.existing.kubeconfig_path else "existing"
    )
    if not path.exists() and not path.is_symlink():
        return
    try:
        text = read_kubeconfig_file(path)
    except ValueError as exc:
        yield Problem(where, f"the kubeconfig {path} cannot be used: {exc}", KUBECONFIG_FILE_FIX)
        return
    try:
        # The context with its cluster and user alone, as the stack keeps it.
        reduced = yaml.safe_load(reduce_to_context(text, c.existing.context))
    except ValueError:
        return  # a missing context is context_problem's to say
    folder = path.resolve().parent
    names = reduced["contexts"][0]["context"]
    cluster_said = f"the kubeconfig {path}: cluster '{names.get('cluster')}'"
    for message, fix in _cluster_problems(_body(reduced, "cluster"), folder, cluster_said):
        yield Problem(where, message, fix)
    user_said = f"the kubeconfig {path}: user '{names.get('user')}'"
    for message, fix in _user_problems(_body(reduced, "user"), folder, user_said):
        yield Problem(where, message, fix)


def _cluster_problems(cluster: dict[str, Any], folder: Path, said: str) -> Iterator[Fault]:
    """client-go v0.36.4 tools/clientcmd/validation.go validateClusterInfo (and helpers.go
    parseProxyURL), and the base64 its loader decodes certificate-authority-data with."""
    if not cluster.get("server"):
        yield f"{said} has no server", "add the cluster's `server: https://...`"
    if cluster.get("proxy-url"):
        yield from _proxy_problems(str(cluster["proxy-url"]), said)
    ca_file, ca_data = (
        cluster.get("certificate-authority"),
        cluster.get("certificate-authority-data"),
    )
    if ca_file and ca_data:
        yield (
            f"{said} has both certificate-authority and certificate-authority-data",
            "keep one of them (client-go refuses both)",
        )
    if ca_file and not _readable(folder / str(ca_file)):
        yield (
            f"{said} reads its CA from {folder / str(ca_file)}, which cannot be read",
            "fix the path (relative paths are taken from the kubeconfig's folder) or inline "
            "the CA as certificate-authority-data",
        )
    if cluster.get("insecure-skip-tls-verify") is True and (ca_file or ca_data):
        yield (
            f"{said} sets insecure-skip-tls-verify beside a CA, which client-go refuses "
            "('specifying a root certificates file with the insecure flag is not allowed')",
            "remove insecure-skip-tls-verify (the CA is the safe way)",
        )
    yield from _base64_problems(cluster, ("certificate-authority-data",), said)


def _proxy_problems(proxy: str, said: str) -> Iterator[Fault]:
    """client-go v0.36.4 tools/clientcmd/helpers.go parseProxyURL: Go's url.Parse, then an
    http, https or socks5 scheme. A URL that does not split (an unclosed IPv6 bracket, a
    port that is not a number) is named here, not left to end `validate` in a traceback."""
    url = split_url(proxy)
    if url is None:
        yield (
            f"{said} has proxy-url {proxy!r}, which does not parse as a URL (client-go refuses it)",
            "write proxy-url as http://HOST:PORT, https://HOST:PORT or socks5://HOST:PORT, "
            "an IPv6 address in brackets",
        )
    elif url.scheme not in ("http", "https", "socks5"):
        yield (
            f"{said} has proxy-url {proxy!r}, whose scheme client-go refuses",
            "use an http://, https:// or socks5:// proxy URL",
        )


def _user_problems(user: dict[str, Any], folder: Path, said: str) -> Iterator[Fault]:
    """client-go v0.36.4 tools/clientcmd/validation.go validateAuthInfo."""
    methods = [m for m, keys in AUTH_METHODS.items() if any(user.get(k) for k in keys)]
    if len(methods) > 1:
        yield (
            f"{said} has more than one authentication method ({', '.join(methods)})",
            "keep one: client-go allows only one",
        )
    cert = user.get("client-certificate") or user.get("client-certificate-data")
    if cert and not (user.get("client-key") or user.get("client-key-data")):
        yield f"{said} has a client certificate and no key", "add client-key"
    for key in ("client-certificate", "client-key", "tokenFile"):
        if user.get(key) and not _readable(folder / str(user[key])):
            yield (
                f"{said} reads its {key} from {folder / str(user[key])}, which cannot be read",
                "fix the path (relative paths are taken from the kubeconfig's folder)",
            )
    yield from _base64_problems(user, ("client-certificate-data", "client-key-data"), said)
    if isinstance(user.get("exec"), dict):
        yield from _exec_problems(user["exec"], said)


def _exec_problems(plugin: dict[str, Any], said: str) -> Iterator[Fault]:
    """client-go v0.36.4 tools/clientcmd/validation.go validateAuthInfo on `exec`, after
    api/v1/defaults.go SetDefaults_ExecConfig: only v1beta1 and v1alpha1 plugins get
    interactiveMode IfAvailable by default; a v1 plugin (any other) must say it."""
    if not plugin.get("command"):
        yield (
            f"{said} runs an exec plugin without command, which client-go requires",
            "add the plugin's command (e.g. kubelogin, gke-gcloud-auth-plugin)",
        )
    version = plugin.get("apiVersion")
    if not version:
        yield (
            f"{said} runs an exec plugin without apiVersion, which client-go requires",
            "add the plugin's apiVersion (e.g. client.authentication.k8s.io/v1beta1)",
        )
        return
    mode = plugin.get("interactiveMode")
    if not mode and version not in EXEC_VERSIONS_WITH_DEFAULT_MODE:
        yield (
            f"{said} runs an exec plugin of apiVersion {version} without interactiveMode, "
            "which client-go requires (only v1beta1 plugins get a default)",
            f"add interactiveMode: one of {', '.join(EXEC_INTERACTIVE_MODES)} "
            "(IfAvailable is what older versions default to)",
        )
    elif mode and mode not in EXEC_INTERACTIVE_MODES:
        yield (
            f"{said} runs an exec plugin with interactiveMode {mode!r}, which client-go refuses",
            f"set interactiveMode to one of {', '.join(EXEC_INTERACTIVE_MODES)}",
        )


def _base64_problems(body: dict[str, Any], keys: tuple[str, ...], said: str) -> Iterator[Fault]:
    """The *-data fields are []byte in client-go's kubeconfig types (api/v1/types.go), which
    its loader decodes as JSON does: standard base64, padded, line breaks ignored (Go's
    encoding/base64 StdEncoding); anything else fails the load."""
    for key in keys:
        data = body.get(key)
        if not data:
            continue
        try:
            base64.b64decode(re.sub(r"[\r\n]", "", str(data)), validate=True)
        except (binascii.Error, ValueError):
            yield (
                f"{said} has {key} that is not base64 (a pasted PEM?), which client-go cannot load",
                f"write {key} as the base64 of the PEM file: base64 -w0 FILE",
            )


# client-go v0.36.4 validateAuthInfo: one of these per user.
AUTH_METHODS = {"token": ("token",), "basicAuth": ("username", "password")}
# client-go v0.36.4 tools/clientcmd/api/types.go (ExecInteractiveMode) and
# api/v1/defaults.go (the versions that default it).
EXEC_INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
EXEC_VERSIONS_WITH_DEFAULT_MODE = (
    "client.authentication.k8s.io/v1beta1",
    "client.authentication.k8s.io/v1alpha1",
)
KUBECONFIG_FILE_FIX = "point existing.kubeconfigPath at the cluster's kubeconfig file"


def _readable(path: Path) -> bool:
    try:
        with path.open("rb"):
            return True
    except OSError:
        return False


def _existing_contexts(c: ClusterSpec) -> Iterator[Problem]:
    """Only for a kubeconfigPath the stack names: the default (KUBECONFIG, ~/.kube/config)
    is whatever the machine running `validate` has, which for a stack reviewed elsewhere
    (CI, a colleague's laptop) is not the deploying machine's; the pre-flight of `mkf up`
    checks that one (components/cli/automation.py)."""
    assert c.existing is not None
    if c.existing.kubeconfig_path:
        problem = context_problem(c)
        if problem is not None:
            yield problem
        yield from kubeconfig_problems(c)


def _worker_server(c: ClusterSpec, this_machine: bool) -> tuple[str, str] | None:
    """(server the manager's pods use, the config path that chose it), when known here:
    `existing.server`, else the context's server in a kubeconfigPath the stack names, or
    (`this_machine`: the pre-flight of `mkf up`) in the default kubeconfig too."""
    assert c.existing is not None
    if c.existing.server:
        return c.existing.server, key_path(c.path, "existing.server")
    if not (c.existing.kubeconfig_path or this_machine):
        return None
    path = existing_kubeconfig_path(c.existing)
    try:
        server, _ = context_cluster(read_kubeconfig_file(path), c.existing.context)
    except (ValueError, yaml.YAMLError):
        return None
    return (server, key_path(c.path, "existing.context")) if server else None


def _server_problems(server: str, path: str, what: str, pods: list[str]) -> Iterator[Problem]:
    if not kueue_trusts_server(server):
        # Kueue v0.19.2 pkg/controller/admissionchecks/multikueue/multikueuecluster.go,
        # validateRestConfig -> isValidHostname: the MultiKueueCluster stays inactive.
        yield Problem(
            path,
            f"{what} {server}: MultiKueue refuses its host as an untrusted server endpoint "
            "(neither an IP address nor a DNS name)",
            "use an https URL whose host is an IP address (IPv6 in brackets with a port) or "
            "a lower-case DNS name",
        )
    elif pods and is_loopback_host(server_host(server)):
        yield Problem(
            path,
            f"{what} {server} is a loopback address, which inside a pod on the manager is "
            f"the pod itself: {' and '.join(pods)} could never reach the worker",
            "set existing.server to the address the manager's pods reach this worker at "
            f"({KIND_SERVER_HINT}), or a routable address",
        )


def existing_worker_servers(spec: FleetSpec, this_machine: bool = False) -> Iterator[Problem]:
    """Each existing worker's API server as MultiKueue and the dispatcher on the manager
    will use it (see _worker_server for which kubeconfig is read)."""
    pods = _pods_reach_workers(spec)
    for c in spec.workers:
        if c.existing is not None:
            found = _worker_server(c, this_machine)
            if found is not None:
                yield from _server_problems(found[0], found[1], "the API server", pods)


def worker_servers(spec: FleetSpec) -> Iterator[Problem]:
    """Existing clusters' contexts, and each worker's API server as MultiKueue and the
    dispatcher on the manager will use it."""
    for c in spec.clusters:
        if c.existing is not None:
            yield from _existing_contexts(c)
    yield from existing_worker_servers(spec)
    pods = _pods_reach_workers(spec)
    for name, secret in spec.worker_kubeconfigs.items():
        server = kubeconfig_server(secret.value or "")
        loopback = server and kueue_trusts_server(server) and is_loopback_host(server_host(server))
        if loopback and pods:
            yield Problem(
                key_path("workerKubeconfigs", name),
                f"its server {server} is a loopback address, which inside a pod on the "
                f"manager is the pod itself: {' and '.join(pods)} could never reach '{name}'",
                "write the address the manager's pods reach this worker at "
                f"({KIND_SERVER_HINT}), or a routable address",
            )
