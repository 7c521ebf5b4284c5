"""Pulumi dynamic providers for what no provider package does (kind clusters: clusters.py):
waiting for a ServiceAccount token the worker fills in asynchronously, and the dispatcher
image (built, then loaded into kind or pushed). Each runs a CLI or an API call and is unit-tested by
calling create/diff/delete directly with the subprocess or the API faked."""

from __future__ import annotations

import base64
import hashlib
import tempfile
import time
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider, UpdateResult

from components.resources.commands import CommandFailed, run

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

# Cloud nodes are amd64 unless a stack says otherwise; a laptop builds for its own
# architecture when not told, and an arm64 image does not start on amd64 nodes. A kind
# cluster's nodes are containers of the Docker engine that builds the image: its
# architecture (docker_platform) is theirs.
IMAGE_PLATFORM = "linux/amd64"
_DOCKER_ARCH = {"x86_64": "linux/amd64", "amd64": "linux/amd64", "aarch64": "linux/arm64",
                "arm64": "linux/arm64"}  # fmt: skip


def docker_platform() -> str:
    """The platform of the Docker engine's own machine (`docker info`: Go's runtime.GOARCH
    names as uname reports them), where kind runs its nodes."""
    arch = run(["docker", "info", "--format", "{{.Architecture}}"]).strip()
    if arch not in _DOCKER_ARCH:
        raise CommandFailed(
            f"Docker runs on '{arch}', which the dispatcher image is not built for: set "
            "dispatcher.platform (linux/amd64 or linux/arm64) to what the kind nodes run"
        )
    return _DOCKER_ARCH[arch]


def source_hash(root: Path, folder: str = "controller") -> str:
    """A content hash of the controller's sources: the image tag, so a change rolls out."""
    digest = hashlib.sha256()
    for path in sorted((root / folder).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _kind_load(kind: str, image: str, cluster: str, platform: str) -> None:
    """`kind load docker-image`; with Docker's containerd image store (the default since
    Docker 29) that fails with "content digest ... not found" (kubernetes-sigs/kind issue
    3795), and the workaround kind documents is a single-platform archive loaded with
    `kind load image-archive`."""
    try:
        run([kind, "load", "docker-image", image, "--name", cluster])
        return
    except CommandFailed as exc:
        if "content digest" not in str(exc):
            raise
    with tempfile.TemporaryDirectory(prefix="mkf-image-") as folder:
        archive = str(Path(folder) / "image.tar")
        try:
            run(["docker", "image", "save", "--platform", platform, "-o", archive, image])
        except CommandFailed as exc:
            raise CommandFailed(
                f"{exc}\nkind could not load {image} from Docker's containerd image store and "
                "this Docker cannot save one platform of it (docker image save --platform needs "
                "Docker 28 or newer): upgrade Docker, or turn the containerd image store off "
                '("features": {"containerd-snapshotter": false} in /etc/docker/daemon.json)'
            ) from exc
        run([kind, "load", "image-archive", archive, "--name", cluster])


class ControllerImageProvider(ResourceProvider):
    """docker build; then `kind load` into each kind cluster, or push to a registry and
    refer to the image by digest."""

    def _build(self, props: dict[str, Any]) -> dict[str, Any]:
        local = f"{props['repository']}:{props['tag']}"
        # No platform named: the kind manager's nodes (the Docker engine's machine), or the
        # usual cloud node's.
        platform = props.get("platform") or (
            docker_platform() if props.get("kind_clusters") else IMAGE_PLATFORM
        )
        args = ["docker", "build", "--platform", platform, "-f", props["dockerfile"]]
        if props.get("base"):
            args += ["--build-arg", f"BASE={props['base']}"]
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
            _kind_load(props["kind_binary"], local, cluster, platform)
        return {**props, "image": local}

    def create(self, props: dict[str, Any]) -> CreateResult:
        outs = self._build(props)
        return CreateResult(id_=outs["image"], outs=outs)

    # The identity of each kind cluster is among them: a replaced cluster (same name, new
    # cluster) starts without the image, so it is loaded again.
    KEYS = (
        "tag",
        "registry",
        "kind_clusters",
        "kind_cluster_ids",
        "repository",
        "platform",
        "base",
    )

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
