"""Kueue installed by someone else (`kueue.install: existing`): nothing of Kueue's is
applied, and a dynamic resource checks, before anything that needs Kueue's API is created
on the cluster, that the cluster serves it (components/checks/existing_kueue.py says what
is needed and words what is missing).

The check (components/resources/api_check.py) runs again when the cluster, the expected
Kueue version or the kinds the fleet needs there change."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

from components.checks.existing_kueue import unserved
from components.model.spec import FleetSpec
from components.objects.labels import KUEUE_NAMESPACE
from components.resources.api_check import (
    CHECK_TIMEOUT,
    ApiCheckProvider,
    ClusterApi,
    KubernetesApi,
    wait_until_served,
    with_secret_kubeconfig,
)
from components.resources.clusters import ClusterHandle


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


class KueueApiCheckProvider(ApiCheckProvider):
    # Another expected version, or kinds the fleet did not need there before.
    recheck_on = ("version", "required")

    def verify(self, props: dict[str, Any], api: KubernetesApi) -> None:
        check_existing_kueue(
            props["cluster_name"],
            props["version"],
            props["required"],
            api,
            float(props.get("timeout") or CHECK_TIMEOUT),
            server=api.server,
        )


class KueueApiCheck(pulumi.dynamic.Resource, module="multikueue-fleet", name="KueueApi"):
    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions) -> None:
        super().__init__(KueueApiCheckProvider(), name, props, with_secret_kubeconfig(opts))


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
