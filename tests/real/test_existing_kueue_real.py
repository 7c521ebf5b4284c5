"""The existing-Kueue check against a real kube-apiserver."""

from __future__ import annotations

import time
from typing import Any

import pytest
import yaml

from components.checks.existing_kueue import (
    KUEUE_API,
    unserved,
)
from components.resources.api_check import KubernetesApi
from components.resources.commands import CommandFailed
from components.resources.existing_kueue import check_existing_kueue
from tests.helpers.apiserver import missing, open_crd


@pytest.mark.skipif(bool(missing()), reason=missing() or "ok")
def test_the_check_against_a_real_api_server(apiserver: dict[str, Any]) -> None:
    """A cluster without Kueue, then with part of its API, then with all it needs."""
    from kubernetes import client, config

    text = yaml.safe_dump(apiserver)
    api = KubernetesApi(text, None)
    required = {KUEUE_API: ["ClusterQueue", "Workload"]}

    def check() -> None:
        check_existing_kueue("lab", "v0.19.2", required, api, timeout=20, interval=0.5)

    with pytest.raises(CommandFailed) as failed:
        check_existing_kueue("lab", "v0.19.2", required, api, timeout=0, server=api.server)
    assert str(failed.value).splitlines() == [
        unserved("lab", "v0.19.2", required, {KUEUE_API: None}, False)[0],
        unserved("lab", "v0.19.2", {}, {}, False)[0],
    ]
    kube = config.new_client_from_config_dict(apiserver)
    extensions = client.ApiextensionsV1Api(kube)
    extensions.create_custom_resource_definition(_crd("Workload", "kueue.x-k8s.io", "v1beta2"))
    # An older Kueue's API: a v1beta1 ClusterQueue does not do.
    extensions.create_custom_resource_definition(_crd("ClusterQueue", "kueue.x-k8s.io", "v1beta1"))
    client.CoreV1Api(kube).create_namespace({"metadata": {"name": "kueue-system"}})
    with pytest.raises(
        CommandFailed, match=r"serves kueue\.x-k8s\.io/v1beta2 without ClusterQueue"
    ):
        check()
    extensions.delete_custom_resource_definition("clusterqueues.kueue.x-k8s.io")
    deleted = False
    for _ in range(100):  # a CRD is gone once its instances are (there are none)
        try:
            extensions.read_custom_resource_definition("clusterqueues.kueue.x-k8s.io")
        except client.exceptions.ApiException as exc:
            deleted = exc.status == 404
            break
        time.sleep(0.2)
    assert deleted
    extensions.create_custom_resource_definition(_crd("ClusterQueue", "kueue.x-k8s.io", "v1beta2"))
    check()


def _crd(kind: str, group: str, version: str) -> dict[str, Any]:
    return open_crd(group, kind, kind.lower() + "s", "Cluster", version)
