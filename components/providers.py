"""Pulumi dynamic providers for what no provider package does: kind clusters, waiting for a
ServiceAccount token the worker fills in asynchronously, and the dispatcher image (built,
then loaded into kind or pushed). Each runs a CLI or an API call and is unit-tested by
calling create/diff/delete directly with the subprocess or the API faked."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import time
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider, UpdateResult


class CommandFailed(Exception):
    pass


def run(args: list[str], stdin: str | None = None, timeout: float = 900) -> str:
    """Run a CLI; its stdout, or CommandFailed naming the command and the end of stderr."""
    try:
        result = subprocess.run(
            args, input=stdin, capture_output=True, text=True, timeout=timeout, check=False
        )
    except FileNotFoundError as exc:
        raise CommandFailed(
            f"{args[0]} is not installed or not on PATH "
            "(scripts/up.sh installs the pinned kind and Pulumi CLI)"
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise CommandFailed(f"`{' '.join(args[:4])}` did not finish in {timeout:.0f}s") from exc
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-8:])
        raise CommandFailed(f"`{' '.join(args[:4])}` failed (exit {result.returncode}):\n{tail}")
    return result.stdout


def kubeconfig_ca(kubeconfig: str) -> str:
    config = yaml.safe_load(kubeconfig) or {}
    clusters = config.get("clusters") or [{}]
    return (clusters[0].get("cluster") or {}).get("certificate-authority-data", "")


# --- kind ----------------------------------------------------------------------------------


class KindClusterProvider(ResourceProvider):
    """A kind cluster: created from a generated config, replaced when the config changes,
    deleted with `kind delete cluster`."""

    def _outputs(self, props: dict[str, Any]) -> dict[str, Any]:
        kind, name = props["kind_binary"], props["name"]
        kubeconfig = run([kind, "get", "kubeconfig", "--name", name])
        return {
            **props,
            "kubeconfig": kubeconfig,
            "context": f"kind-{name}",
            "ca_data": kubeconfig_ca(kubeconfig),
            "internal_server": f"https://{name}-control-plane:6443",
        }

    def create(self, props: dict[str, Any]) -> CreateResult:
        kind, name = props["kind_binary"], props["name"]
        if name in run([kind, "get", "clusters"]).split():
            raise CommandFailed(
                f"a kind cluster named {name} already exists and this stack did not create "
                f"it; delete it (`kind delete cluster --name {name}`) or choose another "
                "fleetName"
            )
        run(
            [kind, "create", "cluster", "--name", name, "--config", "-", "--wait", "5m"],
            stdin=props["config"],
        )
        return CreateResult(id_=name, outs=self._outputs(props))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = [k for k in ("name", "config") if olds.get(k) != news.get(k)]
        return DiffResult(changes=bool(replaces), replaces=replaces, delete_before_replace=True)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        # Deleting a cluster that is already gone succeeds: destroy stays safe to repeat.
        run([props["kind_binary"], "delete", "cluster", "--name", props["name"]])


class KindCluster(pulumi.dynamic.Resource, module="kind", name="Cluster"):
    kubeconfig: pulumi.Output[str]
    context: pulumi.Output[str]
    ca_data: pulumi.Output[str]
    internal_server: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        cluster_name: str,
        config: str,
        kind_binary: str = "kind",
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(
            KindClusterProvider(),
            name,
            {
                "name": cluster_name,
                "config": config,
                "kind_binary": kind_binary,
                "kubeconfig": None,
                "context": None,
                "ca_data": None,
                "internal_server": None,
            },
            pulumi.ResourceOptions.merge(
                opts,
                pulumi.ResourceOptions(
                    additional_secret_outputs=["kubeconfig"],
                    custom_timeouts=pulumi.CustomTimeouts(create="15m", delete="5m"),
                ),
            ),
        )


# --- ServiceAccount tokens -------------------------------------------------------------------


def read_token(
    kubeconfig: str,
    context: str | None,
    namespace: str,
    name: str,
    timeout: float,
    interval: float = 1.0,
    api: Any = None,
) -> tuple[str, str]:
    """(token, CA data) of a service-account-token Secret, once the token controller has
    filled it in. `api` is a CoreV1Api; made from the kubeconfig when not given."""
    if api is None:
        from kubernetes import client, config

        api = client.CoreV1Api(
            config.new_client_from_config_dict(yaml.safe_load(kubeconfig), context=context or None)
        )
    deadline = time.monotonic() + timeout
    while True:
        secret = api.read_namespaced_secret(name, namespace)
        data = secret.data or {}
        if data.get("token"):
            return base64.b64decode(data["token"]).decode(), data.get("ca.crt", "")
        if time.monotonic() > deadline:
            raise CommandFailed(
                f"Secret {namespace}/{name} got no token in {timeout:.0f}s: is "
                "the token controller running on that cluster?"
            )
        time.sleep(interval)


class ServiceAccountTokenProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        token, ca = read_token(
            props["kubeconfig"],
            props.get("context"),
            props["namespace"],
            props["secret"],
            float(props.get("timeout") or 180),
        )
        return CreateResult(
            id_=f"{props['namespace']}/{props['secret']}",
            outs={**props, "token": token, "ca_data": ca},
        )

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # A new cluster or another Secret means another token. The cluster is known by its
        # identity when both sides have one (new credentials or endpoint of the same cluster
        # after an in-place update are not a new token), else by its kubeconfig.
        cluster = "cluster" if olds.get("cluster") and news.get("cluster") else "kubeconfig"
        replaces = [k for k in (cluster, "namespace", "secret") if olds.get(k) != news.get(k)]
        return DiffResult(changes=bool(replaces), replaces=replaces)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """The Secret itself belongs to the worker's objects, deleted with them."""


class ServiceAccountToken(pulumi.dynamic.Resource, module="multikueue-fleet", name="Token"):
    token: pulumi.Output[str]
    ca_data: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        kubeconfig: pulumi.Input[str],
        context: pulumi.Input[str],
        namespace: str,
        secret: str,
        opts: pulumi.ResourceOptions | None = None,
        cluster: pulumi.Input[str] | None = None,
    ) -> None:
        super().__init__(
            ServiceAccountTokenProvider(),
            name,
            {
                "kubeconfig": kubeconfig,
                "context": context,
                "cluster": cluster,
                "namespace": namespace,
                "secret": secret,
                "token": None,
                "ca_data": None,
            },
            pulumi.ResourceOptions.merge(
                opts, pulumi.ResourceOptions(additional_secret_outputs=["token", "kubeconfig"])
            ),
        )


# --- the dispatcher image --------------------------------------------------------------------

# Cluster nodes are amd64 unless a stack says otherwise; a laptop builds for its own
# architecture when not told, and an arm64 image does not start on amd64 nodes.
IMAGE_PLATFORM = "linux/amd64"


def source_hash(root: Path, folder: str = "controller") -> str:
    """A content hash of the controller's sources: the image tag, so a change rolls out."""
    digest = hashlib.sha256()
    for path in sorted((root / folder).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


class ControllerImageProvider(ResourceProvider):
    """docker build; then `kind load` into each kind cluster, or push to a registry and
    refer to the image by digest."""

    def _build(self, props: dict[str, Any]) -> dict[str, Any]:
        local = f"{props['repository']}:{props['tag']}"
        platform = props.get("platform") or IMAGE_PLATFORM
        args = ["docker", "build", "--platform", platform, "-f", props["dockerfile"]]
        run([*args, "-t", local, props["context"]])
        if props.get("registry"):
            remote = f"{props['registry'].rstrip('/')}/{props['repository']}:{props['tag']}"
            run(["docker", "tag", local, remote])
            run(["docker", "push", remote])
            digest = run(
                ["docker", "image", "inspect", "--format", "{{index .RepoDigests 0}}", remote]
            ).strip()
            return {**props, "image": digest}
        for cluster in props.get("kind_clusters") or []:
            run([props["kind_binary"], "load", "docker-image", local, "--name", cluster])
        return {**props, "image": local}

    def create(self, props: dict[str, Any]) -> CreateResult:
        outs = self._build(props)
        return CreateResult(id_=outs["image"], outs=outs)

    # The identity of each kind cluster is among them: a replaced cluster (same name, new
    # cluster) starts without the image, so it is loaded again.
    KEYS = ("tag", "registry", "kind_clusters", "kind_cluster_ids", "repository", "platform")

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # An input unknown in a preview (a cluster being replaced) differs from any old value.
        changed = [k for k in self.KEYS if olds.get(k) != news.get(k)]
        return DiffResult(changes=bool(changed))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=self._build(news))

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Images stay in the local Docker and registry; kind nodes go with their cluster."""


class ControllerImage(pulumi.dynamic.Resource, module="multikueue-fleet", name="Image"):
    image: pulumi.Output[str]

    def __init__(
        self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__(ControllerImageProvider(), name, {**props, "image": None}, opts)
