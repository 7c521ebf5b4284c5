"""What the fleet's checks of a cluster's API share: a look at the cluster through one
context of its kubeconfig (discovery and namespaces), a wait until it serves what a check
wants, and a dynamic resource that runs such a check before the objects that need it are
applied (components/resources/existing_kueue.py for Kueue's API, monitoring.py for the
Prometheus Operator's).

A check runs when its resource is created: on the first `up`, and again when the cluster or
what it must serve changes. An unchanged stack leaves it alone, so a second `up` shows no
change. It creates nothing, so it deletes nothing."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Protocol

import pulumi
import yaml
from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider

from components.objects.labels import KUEUE_NAMESPACE
from components.resources.commands import CommandFailed

# Long enough for CRDs a platform pipeline applied just before to be established.
CHECK_TIMEOUT = 60.0


class ClusterApi(Protocol):
    def kinds(self, api_version: str) -> set[str] | None:
        """The kinds discovery lists for an apiVersion; None when it is not served."""

    def has_namespace(self, name: str) -> bool: ...


class KubernetesApi:
    """ClusterApi over the Kubernetes client, from one context of a kubeconfig."""

    def __init__(self, kubeconfig: str, context: str | None) -> None:
        from kubernetes import client, config

        api_client = config.new_client_from_config_dict(
            yaml.safe_load(kubeconfig), context=context or None
        )
        self.server = api_client.configuration.host
        self._custom = client.CustomObjectsApi(api_client)
        self._core = client.CoreV1Api(api_client)

    def kinds(self, api_version: str) -> set[str] | None:
        from kubernetes.client.exceptions import ApiException

        group, _, version = api_version.rpartition("/")
        try:
            listing = self._custom.get_api_resources(group, version, _request_timeout=10)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        # Subresources (workloads/status) are listed too; only the kinds matter.
        return {r.kind for r in listing.resources if "/" not in r.name}

    def has_namespace(self, name: str) -> bool:
        from kubernetes.client.exceptions import ApiException

        try:
            self._core.read_namespace(name, _request_timeout=10)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True


def _failure(cluster: str, server: str, exc: Exception) -> str:
    status = getattr(exc, "status", None)
    if status in (401, 403):
        return (
            f"cluster '{cluster}' ({server}) refused to show its APIs ({status} "
            f"{getattr(exc, 'reason', '')}): the stack's kubeconfig for it needs a user that "
            f"may read API discovery and namespace {KUEUE_NAMESPACE}"
        )
    return (
        f"cluster '{cluster}' ({server}) did not answer: {type(exc).__name__}: "
        f"{str(exc).splitlines()[0] if str(exc) else ''}; check that its API server is up "
        "and reachable with the stack's kubeconfig"
    )


def wait_until_served(
    problems_now: Callable[[], list[str]],
    cluster: str,
    timeout: float,
    interval: float,
    server: str = "",
) -> None:
    """Returns once `problems_now()` finds nothing missing; CommandFailed with its lines (or
    why the cluster did not answer) once `timeout` has passed."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    deadline = time.monotonic() + timeout
    while True:
        try:
            problems = problems_now()
        # An API server still starting, refusing this user, or not reachable at all.
        except (ApiException, HTTPError, OSError) as exc:
            problems = [_failure(cluster, server, exc)]
        if not problems:
            return
        if time.monotonic() > deadline:
            raise CommandFailed("\n".join(problems))
        time.sleep(interval)


class ApiCheckProvider(ResourceProvider, ABC):
    """A check of a cluster's API as a dynamic resource. A subclass says what it checks
    (`verify`; not `check`, which is every dynamic provider's input-validation hook that the
    engine calls, and stays Pulumi's) and which of its inputs, besides the cluster, call for
    checking again (`recheck_on`)."""

    recheck_on: tuple[str, ...] = ()

    @abstractmethod
    def verify(self, props: dict[str, Any], api: KubernetesApi) -> None:
        """Returns once the cluster serves what this check wants; CommandFailed otherwise."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        self.verify(props, KubernetesApi(props["kubeconfig"], props.get("context")))
        return CreateResult(id_=props["cluster_name"], outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # Checked again for another cluster (known by its identity when both sides have
        # one, so new credentials for the same cluster are not another cluster), or for
        # another thing it must serve.
        cluster = "cluster" if olds.get("cluster") and news.get("cluster") else "kubeconfig"
        keys = (cluster, "cluster_name", *self.recheck_on)
        replaces = [k for k in keys if olds.get(k) != news.get(k)]
        return DiffResult(changes=bool(replaces), replaces=replaces)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Nothing was created: what the cluster serves stays as its owner installed it."""


def with_secret_kubeconfig(opts: pulumi.ResourceOptions) -> pulumi.ResourceOptions:
    """A check's kubeconfig input kept secret in its outputs (the state) too."""
    return pulumi.ResourceOptions.merge(
        opts, pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"])
    )
