"""The launcher's few calls to an API server, through the kubernetes client's dynamic
client: server-side apply, list, a dry-run create, and a ServiceAccount's token."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes import config as kube_config
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

FIELD_MANAGER = "loopback-launcher"


class Client:
    def __init__(self, kubeconfig: Path) -> None:
        api = kube_config.new_client_from_config_dict(yaml.safe_load(kubeconfig.read_text()))
        # Discovery's cache beside the kubeconfig, in the fleet's folder that `down` removes:
        # by default the client keeps it as $TMPDIR/osrcp-<hash of the server>.json for ever
        # (kubernetes 37.0.2 kubernetes/dynamic/discovery.py), one per server a fleet ran.
        cache = kubeconfig.with_name(f"{kubeconfig.stem}.discovery.json")
        self.dynamic = DynamicClient(api, cache_file=str(cache))

    def _resource(self, api_version: str, kind: str) -> Any:
        try:
            return self.dynamic.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError:
            # A CRD applied since discovery was read.
            self.dynamic.resources.invalidate_cache()
            return self.dynamic.resources.get(api_version=api_version, kind=kind)

    def apply(self, obj: dict[str, Any]) -> None:
        resource = self._resource(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        self.dynamic.server_side_apply(
            resource,
            body=obj,
            name=meta["name"],
            namespace=meta.get("namespace") if resource.namespaced else None,
            field_manager=FIELD_MANAGER,
            force_conflicts=True,
        )

    def wait_established(self, crd: str, timeout: float = 30) -> None:
        resource = self._resource("apiextensions.k8s.io/v1", "CustomResourceDefinition")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = resource.get(name=crd).to_dict().get("status") or {}
            conditions = status.get("conditions") or []
            if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                return
            time.sleep(0.2)
        raise TimeoutError(f"CRD {crd} not Established after {timeout:.0f} s")

    def list(
        self, api_version: str, kind: str, namespace: str | None = None
    ) -> list[dict[str, Any]]:
        resource = self._resource(api_version, kind)
        return [i for i in resource.get(namespace=namespace).to_dict().get("items", [])]

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        resource = self._resource(api_version, kind)
        try:
            return resource.get(name=name, namespace=namespace).to_dict()
        except NotFoundError:
            return None

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        resource = self._resource(obj["apiVersion"], obj["kind"])
        namespace = obj["metadata"].get("namespace") if resource.namespaced else None
        return resource.create(body=obj, namespace=namespace).to_dict()

    def delete(self, obj: dict[str, Any], propagation: str | None = None) -> None:
        """Deletes the object if it is there. `propagation` ("Background", "Foreground")
        overrides the kind's default, which for a batch/v1 Job is to orphan its pods."""
        resource = self._resource(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        namespace = meta.get("namespace") if resource.namespaced else None
        body = {"propagationPolicy": propagation} if propagation else None
        with contextlib.suppress(NotFoundError):
            resource.delete(name=meta["name"], namespace=namespace, body=body)

    def service_account_token(self, name: str, namespace: str, seconds: int) -> str:
        """A token of the ServiceAccount from the TokenRequest API: what the kubelet
        projects into a pod that runs as it."""
        answer = client.CoreV1Api(self.dynamic.client).create_namespaced_service_account_token(
            name,
            namespace,
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": seconds},
            },
        )
        return str(answer.status.token)

    def dry_run_create(self, obj: dict[str, Any]) -> None:
        resource = self._resource(obj["apiVersion"], obj["kind"])
        resource.create(body=obj, dry_run="All")

    def patch_status(
        self, api_version: str, kind: str, name: str, namespace: str | None, status: dict[str, Any]
    ) -> None:
        """A merge patch of the object's status subresource: what a kubelet writes for a pod
        (loopback has none: a test that needs a pod to have run says so this way)."""
        resource = self._resource(api_version, kind).subresources["status"]
        resource.patch(
            body={"status": status},
            name=name,
            namespace=namespace,
            content_type="application/merge-patch+json",
        )
