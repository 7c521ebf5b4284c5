"""The Fleet: every cluster, and on each the objects the builders produce, registered in
the order the fleet needs. The components add no objects of their own: they take the
builders' lists and hand them to Pulumi, with credentials as secret resources.

Order on each cluster: (the ClusterProfile CRD, on the manager in that mode) -> Kueue,
waited for until its Deployment and webhook Service are ready -> job frameworks (their
Pods pass Kueue's webhooks) and everything Kueue guards: worker identities, queues; then
the manager's MultiKueue objects once every worker's token exists; the dispatcher last.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml
from pulumi_kubernetes.kustomize.v2 import Directory
from pulumi_kubernetes.yaml.v2 import ConfigFile, ConfigGroup

from components import dispatcher_objects as dispatcher
from components.clusters import ClusterHandle, make_cluster
from components.fleet_objects import bundles
from components.immutable import replacement_options
from components.kubeconfig import worker_kubeconfig
from components.labels import KUEUE_NAMESPACE
from components.multikueue import (
    kubeconfig_secret_name,
    manager_multikueue_objects,
    profile_token_secret_name,
)
from components.providers import ControllerImage, ServiceAccountToken, source_hash
from components.queues import queue_objects
from components.spec import ClusterSpec, FleetSpec
from components.upstream import fetch, kueue_objects, kustomize_directory
from components.versions import kueue_bundle
from components.worker_access import (
    FLEET_NAMESPACE,
    MULTIKUEUE_TOKEN,
    READER_TOKEN,
    external_framework_rbac,
    worker_access_objects,
)

ROOT = Path(__file__).resolve().parent.parent


def is_credential(obj: dict[str, Any]) -> bool:
    """Secrets whose content is a credential: registered as secret resources, never in a
    plain object group (service-account-token Secrets are empty shells the worker fills)."""
    return obj["kind"] == "Secret" and obj.get("type") != "kubernetes.io/service-account-token"


def register_secret(
    name: str, obj: dict[str, Any], value: pulumi.Input[str], opts: pulumi.ResourceOptions
) -> k8s.core.v1.Secret:
    (key,) = obj["stringData"]
    return k8s.core.v1.Secret(
        name,
        metadata=obj["metadata"],
        type=obj["type"],
        string_data={key: pulumi.Output.secret(value)},
        opts=opts,
    )


class KueueInstall(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        spec: FleetSpec,
        cluster: ClusterSpec,
        fetcher: Callable,
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__("multikueue-fleet:kueue:Install", name, None, opts)
        objs = kueue_objects(fetcher(kueue_bundle(spec.kueue.version).url), spec, cluster)
        # ConfigGroup applies CRDs and namespaces first and waits for every object to be
        # ready: the Deployment available, the webhook Service with endpoints.
        self.group = ConfigGroup(
            f"{name}-manifests", objs=objs, opts=pulumi.ResourceOptions(parent=self)
        )
        self.register_outputs({})


def _replace_on_immutable_change(
    args: pulumi.ResourceTransformArgs,
) -> pulumi.ResourceTransformResult | None:
    """Objects whose immutable fields changed are replaced (components/immutable.py)."""
    extra = replacement_options(args.type_)
    if extra is None:
        return None
    merged = pulumi.ResourceOptions.merge(args.opts, pulumi.ResourceOptions(**extra))
    return pulumi.ResourceTransformResult(args.props, merged)


class Frameworks(pulumi.ComponentResource):
    def __init__(
        self, name: str, spec: FleetSpec, cluster: ClusterSpec, opts: pulumi.ResourceOptions
    ) -> None:
        super().__init__("multikueue-fleet:frameworks:Install", name, None, opts)
        self.installs: list[pulumi.Resource] = []
        child = pulumi.ResourceOptions(parent=self)
        for bundle in bundles(spec, cluster)[1:]:  # [0] is Kueue, installed on its own
            if bundle.name == "clusterprofile-crd":
                continue
            if bundle.method == "kustomize":
                self.installs.append(
                    Directory(
                        f"{name}-{bundle.name}", directory=kustomize_directory(bundle), opts=child
                    )
                )
            else:
                self.installs.append(
                    ConfigFile(f"{name}-{bundle.name}", file=bundle.url, opts=child)
                )
        self.register_outputs({})


class WorkerAccess(pulumi.ComponentResource):
    """The worker's MultiKueue and dispatcher identities, and the kubeconfigs (secret)
    assembled from their tokens once the worker has filled them in."""

    def __init__(
        self, name: str, spec: FleetSpec, handle: ClusterHandle, opts: pulumi.ResourceOptions
    ) -> None:
        super().__init__("multikueue-fleet:access:Worker", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.group = ConfigGroup(f"{name}-identities", objs=worker_access_objects(spec), opts=child)
        after = pulumi.ResourceOptions(parent=self, depends_on=[self.group])
        worker = handle.spec

        def kubeconfig_from(token: ServiceAccountToken) -> pulumi.Output[str]:
            return pulumi.Output.secret(
                pulumi.Output.all(handle.server, token.ca_data, token.token).apply(
                    lambda a: yaml.safe_dump(worker_kubeconfig(worker.name, a[0], a[1], a[2]))
                )
            )

        self.multikueue_token = ServiceAccountToken(
            f"{name}-multikueue-token",
            handle.kubeconfig,
            handle.context,
            KUEUE_NAMESPACE,
            MULTIKUEUE_TOKEN,
            after,
        )
        self.multikueue_kubeconfig = kubeconfig_from(self.multikueue_token)
        self.reader_kubeconfig: pulumi.Output[str] | None = None
        if spec.dispatcher.enabled:
            reader = ServiceAccountToken(
                f"{name}-reader-token",
                handle.kubeconfig,
                handle.context,
                FLEET_NAMESPACE,
                READER_TOKEN,
                after,
            )
            self.reader_kubeconfig = kubeconfig_from(reader)
        self.register_outputs({})


class Fleet(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        spec: FleetSpec,
        fetcher: Callable[[str], str] = fetch,
        kind_binary: str = "kind",
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("multikueue-fleet:index:Fleet", name, None, opts)
        self.spec = spec
        self.handles: dict[str, ClusterHandle] = {}
        kueue: dict[str, KueueInstall] = {}
        for cluster in spec.clusters:
            handle = make_cluster(spec, cluster, kind_binary, pulumi.ResourceOptions(parent=self))
            self.handles[cluster.name] = handle
            kueue[cluster.name] = self._kueue(cluster, handle, fetcher)
        access: dict[str, WorkerAccess] = {}
        for cluster in spec.clusters:
            handle = self.handles[cluster.name]
            on_kueue = self._on(handle, [kueue[cluster.name]])
            Frameworks(f"{cluster.name}-frameworks", spec, cluster, on_kueue)
            if cluster.role == "worker":
                access[cluster.name] = WorkerAccess(
                    f"{cluster.name}-access", spec, handle, on_kueue
                )
            ConfigGroup(f"{cluster.name}-queues", objs=queue_objects(spec, cluster), opts=on_kueue)
        self._manager(kueue[spec.manager.name], access)
        self.register_outputs({})

    def _on(self, handle: ClusterHandle, after: list[pulumi.Resource]) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(
            parent=self,
            provider=handle.provider,
            depends_on=after,
            transforms=[_replace_on_immutable_change],
        )

    def _kueue(
        self, cluster: ClusterSpec, handle: ClusterHandle, fetcher: Callable[[str], str]
    ) -> KueueInstall:
        before: list[pulumi.Resource] = []
        if cluster.role == "manager" and self.spec.credentials.mode == "clusterProfile":
            # Kueue looks for the ClusterProfile CRD once, at start-up.
            crd = next(b for b in bundles(self.spec, cluster) if b.name == "clusterprofile-crd")
            before.append(
                ConfigFile(
                    f"{cluster.name}-clusterprofile-crd", file=crd.url, opts=self._on(handle, [])
                )
            )
        return KueueInstall(
            f"{cluster.name}-kueue", self.spec, cluster, fetcher, self._on(handle, before)
        )

    def _manager(self, kueue: KueueInstall, access: dict[str, WorkerAccess]) -> None:
        spec = self.spec
        handle = self.handles[spec.manager.name]
        profile_mode = spec.credentials.mode == "clusterProfile"
        tokens = [a.multikueue_token for a in access.values()]
        opts = self._on(handle, [kueue, *tokens])
        credentials: dict[str, pulumi.Output[str]] = {
            name: (a.multikueue_token.token if profile_mode else a.multikueue_kubeconfig)
            for name, a in access.items()
        }
        given = {n: s.value for n, s in spec.worker_kubeconfigs.items() if s.value is not None}
        objects = external_framework_rbac(spec) + manager_multikueue_objects(spec)
        owner = {
            name(w): w.name
            for w in spec.workers
            for name in (kubeconfig_secret_name, profile_token_secret_name)
        }
        secrets = []
        for obj in objects:
            if is_credential(obj):
                worker = owner[obj["metadata"]["name"]]
                value = given.get(worker) or credentials[worker]
                secrets.append(
                    register_secret(f"manager-{obj['metadata']['name']}", obj, value, opts)
                )
        # MultiKueueClusters come after the credentials they point at.
        ConfigGroup(
            "manager-multikueue",
            objs=[o for o in objects if not is_credential(o)],
            opts=self._on(handle, [kueue, *secrets]),
        )
        if spec.dispatcher.enabled:
            self._dispatcher(handle, kueue, access)

    def _dispatcher(
        self, handle: ClusterHandle, kueue: KueueInstall, access: dict[str, WorkerAccess]
    ) -> None:
        spec = self.spec
        if spec.dispatcher.image:
            image: pulumi.Output[str] = pulumi.Output.from_input(spec.dispatcher.image)
        else:
            kind_clusters = [
                h.spec.physical_name(spec.fleet_name)
                for h in self.handles.values()
                if h.spec.role == "manager" and h.spec.provider == "kind"
            ]
            built = ControllerImage(
                "dispatcher-image",
                {
                    "repository": dispatcher.NAME,
                    "tag": source_hash(ROOT),
                    "context": str(ROOT),
                    "dockerfile": str(ROOT / "controller" / "Dockerfile"),
                    "registry": spec.dispatcher.registry,
                    "kind_clusters": kind_clusters,
                    "kind_binary": "kind",
                },
                pulumi.ResourceOptions(parent=self, depends_on=[handle.component]),
            )
            image = built.image
        endpoints = pulumi.Output.all(
            **{
                name: pulumi.Output.all(self.handles[name].server, a.multikueue_token.ca_data)
                for name, a in access.items()
            }
        )

        def without_credentials(values: list[Any]) -> list[dict[str, Any]]:
            image_ref, ends = values
            built = dispatcher.dispatcher_objects(
                spec, image_ref, {k: tuple(v) for k, v in ends.items()}
            )
            return [o for o in built if not is_credential(o) and o["kind"] != "Namespace"]

        # The namespace first: the reader Secrets live in it, and the rest needs them.
        namespace = ConfigGroup(
            "manager-dispatcher-namespace",
            objs=[o for o in dispatcher.dispatcher_objects(spec, "") if o["kind"] == "Namespace"],
            opts=self._on(handle, [kueue]),
        )
        secrets = [
            register_secret(
                f"manager-{dispatcher.reader_secret_name(w)}",
                dispatcher.reader_secret(spec, w, ""),
                access[w.name].reader_kubeconfig or "",
                self._on(handle, [namespace]),
            )
            for w in spec.workers
        ]
        ConfigGroup(
            "manager-dispatcher",
            objs=pulumi.Output.all(image, endpoints).apply(without_credentials),
            opts=self._on(handle, [kueue, *secrets]),
        )
