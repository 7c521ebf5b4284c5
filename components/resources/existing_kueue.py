"""Kueue installed by someone else (`kueue.install: existing`): nothing of Kueue's is
applied, and a dynamic resource checks, before anything that needs Kueue's API is created
on the cluster, that the cluster serves it (components/checks/existing_kueue.py says what
is needed and words what is missing).

The check runs when the resource is created: on the first `up`, and again when the cluster,
the expected Kueue version or the kinds the fleet needs there change. An unchanged stack
leaves it alone, so a second `up` shows no change."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import pulumi
import yaml
from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider

from components.checks.existing_kueue import unserved
from components.model.spec import FleetSpec
from components.objects.labels import KUEUE_NAMESPACE
from components.resources.clusters import ClusterHandle
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


def check_existing_kueue(
    cluster: str,
    version: str,
    required: Mapping[str, list[str]],
    api: ClusterApi,
    timeout: float = CHECK_TIMEOUT,
    interval: float = 2.0,
    server: str = "",
) -> None:
    """Returns once the cluster serves every required kind and has Kueue's namespace;
    CommandFailed with one line per missing thing once `timeout` has passed."""

    def problems_now() -> list[str]:
        served = {api_version: api.kinds(api_version) for api_version in required}
        return unserved(cluster, version, required, served, api.has_namespace(KUEUE_NAMESPACE))

    wait_until_served(problems_now, cluster, timeout, interval, server)


class KueueApiCheckProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        api = KubernetesApi(props["kubeconfig"], props.get("context"))
        check_existing_kueue(
            props["cluster_name"],
            props["version"],
            props["required"],
            api,
            float(props.get("timeout") or CHECK_TIMEOUT),
            server=api.server,
        )
        return CreateResult(id_=props["cluster_name"], outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # Checked again for another cluster (known by its identity when both sides have
        # one, so new credentials for the same cluster are not another cluster), another
        # expected version, or kinds the fleet did not need there before.
        cluster = "cluster" if olds.get("cluster") and news.get("cluster") else "kubeconfig"
        keys = (cluster, "cluster_name", "version", "required")
        replaces = [k for k in keys if olds.get(k) != news.get(k)]
        return DiffResult(changes=bool(replaces), replaces=replaces)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Nothing was created: Kueue stays as its owner installed it."""


class KueueApiCheck(pulumi.dynamic.Resource, module="multikueue-fleet", name="KueueApi"):
    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions) -> None:
        super().__init__(
            KueueApiCheckProvider(),
            name,
            props,
            pulumi.ResourceOptions.merge(
                opts, pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"])
            ),
        )


class ExistingKueue(pulumi.ComponentResource):
    """Kueue on a cluster as someone else installed it: what the fleet's objects on that
    cluster wait for instead of an install."""

    def __init__(
        self,
        name: str,
        spec: FleetSpec,
        handle: ClusterHandle,
        required: Mapping[str, list[str]],
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__("multikueue-fleet:kueue:Existing", name, None, opts)
        self.check = KueueApiCheck(
            f"{name}-api",
            {
                "kubeconfig": handle.kubeconfig,
                "context": handle.context,
                "cluster": handle.identity,
                "cluster_name": handle.spec.name,
                "version": spec.kueue.version,
                "required": {k: list(v) for k, v in required.items()},
                "timeout": CHECK_TIMEOUT,
            },
            # A component's depends_on does not hold back its children: passed on.
            pulumi.ResourceOptions(parent=self, depends_on=opts.depends_on),
        )
        self.register_outputs({})
