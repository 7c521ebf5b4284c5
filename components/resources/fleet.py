"""The Fleet: every cluster, and on each the objects the builders produce, registered in
the order the fleet needs. The components add no objects of their own: they take the
builders' lists and hand them to Pulumi. Upstream installs stay grouped (ConfigGroup,
ConfigFile, kustomize Directory); the project's own objects are one resource each
(components/resources/kube_objects.py), so a preview lists them all with their fields.

Order on each cluster: job frameworks, each bundle after the one before it (Trainer's
runtimes after the Trainer manager whose webhook guards them) and each framework after
those it requires (Trainer after JobSet), and (the ClusterProfile
CRD, on the manager in that mode) -> Kueue, waited for until its Deployment and webhook
Service are ready -> worker identities and queues; then the manager's MultiKueue objects
once every worker's token exists and every worker's frameworks are installed; the
dispatcher last. The frameworks come before Kueue because Kueue sets up a framework's
integration from the CRDs it finds served, and not every integration recovers when they
appear later (Fleet._kueue_after_frameworks). With `kueue.install: existing`, nothing of
Kueue's is applied: a check that the cluster serves Kueue's API takes its place
(components/resources/existing_kueue.py), and the frameworks come after that check.

On a cluster the stack creates (kind, GKE, EKS), every in-cluster resource is
`deleted_with` that cluster: destroying the fleet, or replacing a cluster, never deletes
objects one by one into Kueue's finalizers,
where pulumi-kubernetes waits up to 10 minutes per object for it to be gone
(pulumi/pulumi-kubernetes v4.32.0 provider/pkg/await/await.go, Deletion)
(pulumi/pulumi v3.259.0 pkg/resource/deploy/step.go `isDeletedWith`: the provider's
Delete is skipped when that resource is deleted too; the cascade on replace arrived after
v3.259.0, pulumi/pulumi#23818, hence `requiredPulumiVersion` in Pulumi.yaml).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi_kubernetes.kustomize.v2 import Directory
from pulumi_kubernetes.yaml.v2 import ConfigFile, ConfigGroup

from components.checks.existing_kueue import required_apis
from components.model.frameworks import FRAMEWORKS
from components.model.spec import ClusterSpec, FleetSpec
from components.model.versions import kueue_bundle
from components.objects import dispatcher
from components.objects.fleet import bundles, cluster_objects
from components.objects.kind_config import fit_kind_node
from components.objects.kubeconfig import context_cluster, with_host_context, worker_kubeconfig
from components.objects.kueue_install import KUEUE_DEPLOYMENT, kueue_objects
from components.objects.labels import KUEUE_NAMESPACE, with_fleet_labels
from components.objects.manifests import yaml_text
from components.objects.monitoring import monitoring_kinds, monitoring_objects
from components.objects.multikueue import manager_multikueue_objects
from components.objects.queues import queue_objects
from components.objects.worker_access import (
    FLEET_NAMESPACE,
    MULTIKUEUE_TOKEN,
    READER_TOKEN,
    external_framework_rbac,
    worker_access_objects,
)
from components.resources.api_check import CHECK_TIMEOUT
from components.resources.clusters import ClusterHandle, KindClusterComponent, make_cluster
from components.resources.drain import DRAIN_TIMEOUT, QueueDrain
from components.resources.existing_kueue import ExistingKueue
from components.resources.immutable import ImmutableFields, guarded_fields
from components.resources.kube_objects import KubeObject, ObjectSet, with_deploy_time_values
from components.resources.kueue_webhooks import (
    PROBE_TIMEOUT,
    KueueWebhookProbe,
    pod_template_digest,
)
from components.resources.monitoring import MonitoringApiCheck
from components.resources.providers import (
    IMAGE_PLATFORM,
    ControllerImage,
    ServiceAccountToken,
    source_hash,
)
from components.upstream.releases import fetch, verified_file, verified_kustomization

ROOT = Path(__file__).resolve().parents[2]


def kind_cluster_of(handle: ClusterHandle) -> pulumi.Resource | None:
    """The kind cluster of a kind handle (its CA tells one kind cluster from the next of
    the same name; its image is loaded there), None elsewhere. What deletes the objects on
    a cluster with it is created_cluster_of."""
    if isinstance(handle.component, KindClusterComponent):
        return handle.component.cluster
    return None


def created_cluster_of(handle: ClusterHandle) -> pulumi.Resource | None:
    """The resource whose deletion takes every object on the cluster with it: a kind, GKE
    or EKS cluster the stack created. None on an `existing` cluster, the only kind that
    outlives the fleet, whose objects are deleted one by one."""
    return handle.created


def kind_node_transform(
    args: pulumi.ResourceTransformArgs,
) -> pulumi.ResourceTransformResult | None:
    """An upstream install's Deployments as they run on kind (objects/kind_config.py
    fit_kind_node); a transform reaches the children a remote component registers."""
    if args.type_ != "kubernetes:apps/v1:Deployment":
        return None
    return pulumi.ResourceTransformResult(fit_kind_node(dict(args.props)), args.opts)


def deleted_with_transform(cluster: pulumi.Resource) -> pulumi.ResourceTransform:
    """Sets `deleted_with` on a resource and on all its descendants, including the children
    a remote component (yaml/v2 ConfigGroup, kustomize Directory) registers in the
    provider: pulumi-kubernetes v4.32.0 provider/pkg/provider/yaml/v2/configgroup.go gives
    them only a parent, and the SDKs do not inherit `deleted_with` from a parent
    (pulumi v3.272.0 sdk/python/lib/pulumi/resource.py inherits only protect and
    providers), while transforms do reach a remote component's children."""

    def transform(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult:
        opts = pulumi.ResourceOptions.merge(args.opts, pulumi.ResourceOptions(deleted_with=cluster))
        return pulumi.ResourceTransformResult(args.props, opts)

    return transform


def cluster_identity(ca_data: pulumi.Input[str]) -> pulumi.Output[str]:
    """What tells one kind cluster from the next with the same name: kind makes a new CA
    for every cluster it creates."""
    return pulumi.Output.from_input(ca_data).apply(
        lambda ca: hashlib.sha256((ca or "").encode()).hexdigest()[:16]
    )


def token_identity(handle: ClusterHandle) -> pulumi.Input[str]:
    """What a ServiceAccountToken of this cluster is read again for: a kind cluster's CA
    (a new cluster of the same name is another cluster), else the handle's identity."""
    kind = kind_cluster_of(handle)
    if kind is not None:
        return cluster_identity(kind.ca_data)  # type: ignore[attr-defined]
    return handle.identity


def with_its_secret(
    opts: pulumi.ResourceOptions, objects: pulumi.Resource, namespace: str, secret: str
) -> pulumi.ResourceOptions:
    """A token read from a Secret of `objects` is replaced whenever that Secret is: a
    rotation (`pulumi up --replace` of the Secret, docs/operations.md) makes a new token, and
    the kubeconfigs built from it must carry that one, not the revoked one."""
    found = (
        objects.resources.get(f"Secret {namespace}/{secret}")
        if isinstance(objects, ObjectSet)
        else None
    )
    if found is None:
        return opts
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(replace_with=[found]))


def token_kubeconfig(
    cluster: str,
    server: pulumi.Input[str],
    token: ServiceAccountToken,
    user: str = "",
    sort_keys: bool = True,
    host_server: pulumi.Input[str] | None = None,
) -> pulumi.Output[str]:
    """A kubeconfig (secret) with the token's user for `cluster` at `server`, and with
    `host_server` a FROM_HOST_CONTEXT as well. `sort_keys` stays as each kubeconfig was first
    written: another order is a change of its Secret."""

    def text(a: list[str]) -> str:
        config = worker_kubeconfig(cluster, a[0], a[1], a[2], user=user)
        if a[3]:
            config = with_host_context(config, a[3])
        return yaml.safe_dump(config, sort_keys=sort_keys)

    return pulumi.Output.secret(
        pulumi.Output.all(server, token.ca_data, token.token, host_server or "").apply(text)
    )


def host_server_of(handle: ClusterHandle) -> pulumi.Output[str] | None:
    """Where this machine reaches a kind cluster's API server (its kubeconfig's server)."""
    kind = kind_cluster_of(handle)
    if kind is None:
        return None
    return kind.kubeconfig.apply(  # type: ignore[attr-defined]
        lambda text: (
            (yaml.safe_load(text or "{}").get("clusters") or [{}])[0]
            .get("cluster", {})
            .get("server", "")
        )
    )


def previously_in_group(
    group: str, parent: pulumi.Resource, fleet: pulumi.Resource
) -> Callable[[Mapping[str, Any]], list[pulumi.Alias]]:
    """Where the layout before one-resource-per-object registered an object: a child of the
    yaml/v2 ConfigGroup `group` (named `<group>:<namespace>/<name>`, pulumi-kubernetes
    v4.32.0 provider/pkg/provider/yaml/v2/yaml.go), the dispatcher's namespace in a group of
    its own, a credential Secret as `manager-<name>` below the Fleet. Without the alias, a
    deployed stack would create each object again and fail on "already exists"."""

    def aliases(obj: Mapping[str, Any]) -> list[pulumi.Alias]:
        meta = obj["metadata"]
        if obj["kind"] == "Secret" and "stringData" in obj:
            return [pulumi.Alias(name=f"manager-{meta['name']}", parent=fleet)]
        where = group
        if group == "manager-dispatcher" and obj["kind"] == "Namespace":
            where = "manager-dispatcher-namespace"
        path = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]
        old_group = pulumi.create_urn(where, "kubernetes:yaml/v2:ConfigGroup", parent)
        return [pulumi.Alias(name=f"{where}:{path}", parent=old_group)]

    return aliases


class KueueInstall(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        spec: FleetSpec,
        handle: ClusterHandle,
        fetcher: Callable,
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__("multikueue-fleet:kueue:Install", name, None, opts)
        cluster = handle.spec
        objs = kueue_objects(fetcher(kueue_bundle(spec.kueue.version).url), spec, cluster)
        # ConfigGroup applies CRDs and namespaces first and waits for every object to be
        # ready: the Deployment available, the webhook Service with endpoints.
        self.group = ConfigGroup(
            f"{name}-manifests",
            objs=objs,
            # A component's depends_on does not hold back its children: passed on.
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=opts.depends_on, transforms=opts.transforms
            ),
        )
        # Everything that depends on this install waits for Kueue's webhooks to answer
        # through the API server too (components/resources/kueue_webhooks.py).
        self.webhooks = KueueWebhookProbe(
            f"{name}-webhooks",
            {
                "kubeconfig": handle.kubeconfig,
                "context": handle.context,
                "cluster": handle.identity,
                "cluster_name": cluster.name,
                "version": spec.kueue.version,
                "pod_template": pod_template_digest(objs, KUEUE_DEPLOYMENT),
                "timeout": PROBE_TIMEOUT,
            },
            pulumi.ResourceOptions(
                parent=self, depends_on=[self.group], deleted_with=handle.created
            ),
        )
        self.register_outputs({})


def _as_list(depends_on: Any) -> list[Any]:
    if depends_on is None:
        return []
    return list(depends_on) if isinstance(depends_on, (list, tuple)) else [depends_on]


def verified_manifests(spec: FleetSpec, fetcher: Callable[[str], str]) -> dict[str, str]:
    """Bundle URL -> what Pulumi applies instead: the verified local file of a manifest
    bundle, the verified local kustomization of a kustomize bundle (Kueue's own text is
    read through `fetcher` by KueueInstall, from the same cache). A fetch or digest failure
    is one line naming the bundle (a RunError: no traceback)."""
    files: dict[str, str] = {}
    for bundle in [b for c in spec.clusters for b in bundles(spec, c)]:
        if bundle.url in files:
            continue
        try:
            if bundle.name == "kueue":
                fetcher(bundle.url)
                continue
            if bundle.method == "kustomize":
                files[bundle.url] = verified_kustomization(bundle)
            else:
                files[bundle.url] = verified_file(bundle.url, fetcher)
        except (RuntimeError, OSError) as exc:
            raise pulumi.RunError(
                f"upstream {bundle.name} {bundle.version} ({bundle.url}): {exc}; nothing was "
                "changed on any cluster"
            ) from None
    return files


class Frameworks(pulumi.ComponentResource):
    """A cluster's job frameworks. A framework's bundles go in their listed order, each after
    the one before is ready: Trainer's ClusterTrainingRuntimes pass a validating webhook
    (failurePolicy Fail) that the Trainer manager serves. None of them needs Kueue: no
    bundle holds a Kueue object, and Kueue's webhooks guard the jobs and pods of its
    integrations, none of which a bundle installs (a framework's Deployment is Kueue's only
    with a queue name, or `manageJobsWithoutQueueName` in the namespaces of
    `managedJobsNamespaceSelector`), so they go before a managed Kueue
    (Fleet._kueue_after_frameworks)."""

    def __init__(
        self,
        name: str,
        spec: FleetSpec,
        cluster: ClusterSpec,
        files: Mapping[str, str],
        opts: pulumi.ResourceOptions,
    ) -> None:
        """`files`: release URL -> the verified local copy Pulumi applies."""
        super().__init__("multikueue-fleet:frameworks:Install", name, None, opts)
        self.installs: list[pulumi.Resource] = []
        framework_of = {b.name: key for key, f in FRAMEWORKS.items() for b in f.bundles}
        previous: dict[str, pulumi.Resource] = {}
        for bundle in bundles(spec, cluster):
            if bundle.name in ("kueue", "clusterprofile-crd"):  # installed on their own
                continue
            framework = framework_of[bundle.name]
            before = previous.get(framework)
            # A component's depends_on does not hold back its children: the first bundle of
            # a framework waits for what the component waits for (nothing, or the check of
            # an existing Kueue) and for the frameworks it requires (Trainer for JobSet,
            # which `bundles` puts first), the next ones for the bundle before.
            required = [previous[r] for r in FRAMEWORKS[framework].requires if r in previous]
            child = pulumi.ResourceOptions(
                parent=self,
                depends_on=[before] if before else [*_as_list(opts.depends_on), *required],
                transforms=opts.transforms,
            )
            if bundle.method == "kustomize":
                install: pulumi.Resource = Directory(
                    f"{name}-{bundle.name}", directory=files[bundle.url], opts=child
                )
            else:
                install = ConfigFile(f"{name}-{bundle.name}", file=files[bundle.url], opts=child)
            previous[framework_of[bundle.name]] = install
            self.installs.append(install)
        self.register_outputs({})


class WorkerAccess(pulumi.ComponentResource):
    """The worker's MultiKueue and dispatcher identities, and the kubeconfigs (secret)
    assembled from their tokens once the worker has filled them in."""

    def __init__(
        self,
        name: str,
        spec: FleetSpec,
        handle: ClusterHandle,
        object_opts: pulumi.ResourceOptions,
        known: dict[str, tuple[Mapping[str, Any], KubeObject]],
        fleet: pulumi.Resource,
    ) -> None:
        super().__init__(
            "multikueue-fleet:access:Worker", name, None, pulumi.ResourceOptions(parent=fleet)
        )
        self.objects = ObjectSet(
            "WorkerIdentities",
            f"{name}-identities",
            handle.spec.name,
            with_fleet_labels(spec, worker_access_objects(spec)),
            object_opts,
            known,
            pulumi.ResourceOptions(parent=self),
            previously_in_group(f"{name}-identities", self, fleet),
        )
        # Read each token once its Secret exists (the Secret after its ServiceAccount).
        after = pulumi.ResourceOptions(
            parent=self, depends_on=[self.objects], deleted_with=object_opts.deleted_with
        )
        worker = handle.spec

        def kubeconfig_from(token: ServiceAccountToken) -> pulumi.Output[str]:
            return token_kubeconfig(worker.name, handle.server, token)

        identity = token_identity(handle)

        def token(suffix: str, namespace: str, secret: str) -> ServiceAccountToken:
            return ServiceAccountToken(
                f"{name}-{suffix}",
                handle.kubeconfig,
                handle.context,
                namespace,
                secret,
                with_its_secret(after, self.objects, namespace, secret),
                identity,
            )

        self.multikueue_token = token("multikueue-token", KUEUE_NAMESPACE, MULTIKUEUE_TOKEN)
        self.multikueue_kubeconfig = kubeconfig_from(self.multikueue_token)
        self.reader_kubeconfig: pulumi.Output[str] | None = None
        if spec.dispatcher.enabled:
            reader = token("reader-token", FLEET_NAMESPACE, READER_TOKEN)
            self.reader_kubeconfig = token_kubeconfig(
                worker.name, handle.server, reader, host_server=host_server_of(handle)
            )
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
        # Per cluster: object key -> its resource, so an object two sets need is one resource.
        self.known: dict[str, dict[str, tuple[Mapping[str, Any], KubeObject]]] = {}
        # With dispatcher.run: local, what the process is run with (stack outputs).
        self.dispatcher_kubeconfig: pulumi.Output[str] | None = None
        self.dispatcher_settings: pulumi.Output[str] | None = None
        # Every upstream manifest fetched and checked against its pinned digest before any
        # resource is registered: a mismatch stops the program with nothing changed.
        self.files = verified_manifests(spec, fetcher)
        kueue: dict[str, pulumi.Resource] = {}
        frameworks: dict[str, Frameworks] = {}
        for cluster in spec.clusters:
            handle = make_cluster(spec, cluster, kind_binary, pulumi.ResourceOptions(parent=self))
            self.handles[cluster.name] = handle
            self.known[cluster.name] = {}
            kueue[cluster.name], frameworks[cluster.name] = self._kueue_after_frameworks(
                cluster, handle, fetcher
            )
        access: dict[str, WorkerAccess] = {}
        queues: dict[str, pulumi.Resource] = {}
        # Per cluster, the fields Kueue refuses to change, checked against what the stack
        # deployed before any object there is applied (components/resources/immutable.py).
        self.guards: dict[str, pulumi.Resource] = {}
        for cluster in spec.clusters:
            handle = self.handles[cluster.name]
            self.guards[cluster.name] = ImmutableFields(
                f"{cluster.name}-immutable-fields",
                cluster.name,
                guarded_fields(spec, cluster_objects(spec, cluster).objects),
                pulumi.ResourceOptions(parent=self, deleted_with=created_cluster_of(handle)),
                # What is deployed is read from the cluster, as its provider reaches it (a
                # context only on an `existing` cluster; the others' kubeconfigs have one).
                kubeconfig=handle.kubeconfig,
                context=handle.context if cluster.provider == "existing" else None,
            )
            on_kueue = self._on(handle, [kueue[cluster.name], self.guards[cluster.name]])
            if cluster.role == "worker":
                access[cluster.name] = WorkerAccess(
                    f"{cluster.name}-access",
                    spec,
                    handle,
                    on_kueue,
                    self.known[cluster.name],
                    self,
                )
                queues[cluster.name] = self._queues(cluster, on_kueue)
        worker_frameworks = [frameworks[w.name] for w in spec.workers]
        manager = spec.manager.name
        multikueue = self._manager(kueue[manager], access, worker_frameworks)
        # The manager's ClusterQueues after the AdmissionCheck they name, so deleted before
        # it: Kueue keeps its finalizer on an AdmissionCheck while a ClusterQueue uses it
        # (kueue v0.19.2 pkg/controller/core/admissioncheck_controller.go 101-120), and a destroy
        # that deleted the check first waited the provider's ten minutes for it (found by
        # tests/real/test_real_pulumi.py on the loopback fleet; kind clusters go whole).
        queues[manager] = self._queues(
            spec.manager, self._on(self.handles[manager], [kueue[manager], multikueue])
        )
        # Deleted before the queues they follow: the workers' after the manager's, which
        # goes first while MultiKueue still reaches them (components/resources/drain.py).
        drains = [self._drain(self.handles[w.name], [queues[w.name]]) for w in spec.workers]
        self._drain(
            self.handles[spec.manager.name], [queues[spec.manager.name], multikueue, *drains]
        )
        if spec.monitoring.prometheus_operator:
            for cluster in spec.clusters:
                self._monitoring(cluster, [kueue[cluster.name], self.guards[cluster.name]])
        self.register_outputs({})

    def _queues(self, cluster: ClusterSpec, after: pulumi.ResourceOptions) -> pulumi.Resource:
        return self._objects(
            "Queues",
            f"{cluster.name}-queues",
            self.handles[cluster.name],
            queue_objects(self.spec, cluster),
            after,
            # The LocalQueues' namespaces on a cluster the stack does not create are the
            # teams' own, maybe there already: used as they are, never deleted.
            patch_kinds=frozenset({"Namespace"}) if cluster.provider == "existing" else None,
        )

    def _monitoring(self, cluster: ClusterSpec, after: list[pulumi.Resource]) -> None:
        """The cluster's monitoring objects, once a check found the Prometheus Operator's
        API served there (components/resources/monitoring.py)."""
        handle = self.handles[cluster.name]
        # Only a namespace the stack does not make is looked for: the fleet's own comes
        # with the fleet's objects, after the check.
        namespace = self.spec.monitoring.dashboard_namespace if cluster.role == "manager" else None
        check = MonitoringApiCheck(
            f"{cluster.name}-monitoring-api",
            {
                "kubeconfig": handle.kubeconfig,
                "context": handle.context,
                "cluster": handle.identity,
                "cluster_name": cluster.name,
                "kinds": list(monitoring_kinds(cluster)),
                "namespace": namespace or "",
                "timeout": CHECK_TIMEOUT,
            },
            pulumi.ResourceOptions(
                parent=self, depends_on=after, deleted_with=created_cluster_of(handle)
            ),
        )
        self._objects(
            "Monitoring",
            f"{cluster.name}-monitoring",
            handle,
            monitoring_objects(self.spec, cluster),
            self._on(handle, [*after, check]),
        )

    def _drain(
        self, handle: ClusterHandle, after: list[pulumi.Resource | None]
    ) -> pulumi.Resource | None:
        """What evicts the work holding the fleet's quota when the queues go; only on an
        `existing` cluster: on one the stack creates, the queues go with it, never one by
        one."""
        if created_cluster_of(handle) is not None:
            return None
        return QueueDrain(
            f"{handle.spec.name}-queue-drain",
            {
                "kubeconfig": handle.kubeconfig,
                "context": handle.context,
                "cluster_name": handle.spec.name,
                "fleet": self.spec.fleet_name,
                "timeout": DRAIN_TIMEOUT,
            },
            pulumi.ResourceOptions(parent=self, depends_on=[r for r in after if r is not None]),
        )

    def _on(
        self, handle: ClusterHandle, after: list[pulumi.Resource], group: bool = False
    ) -> pulumi.ResourceOptions:
        """Options for what goes on a cluster; `group`: an upstream install, whose children
        the provider registers, so `deleted_with` reaches them through a transform (only
        there: each transform is a callback the engine calls for every resource below)."""
        cluster = created_cluster_of(handle)
        transforms: list[pulumi.ResourceTransform] = []
        if cluster and group:
            transforms.append(deleted_with_transform(cluster))
        if group and handle.spec.provider == "kind":
            transforms.append(kind_node_transform)
        return pulumi.ResourceOptions(
            parent=self,
            provider=handle.provider,
            depends_on=after,
            deleted_with=cluster,
            transforms=transforms or None,
        )

    def _objects(
        self,
        typ: str,
        name: str,
        handle: ClusterHandle,
        objects: list[dict[str, Any]],
        object_opts: pulumi.ResourceOptions,
        patch_kinds: frozenset[str] | None = None,
    ) -> ObjectSet:
        return ObjectSet(
            typ,
            name,
            handle.spec.name,
            with_fleet_labels(self.spec, objects),
            object_opts,
            self.known[handle.spec.name],
            pulumi.ResourceOptions(parent=self),
            previously_in_group(name, self, self),
            patch_kinds or frozenset(),
        )

    def _kueue_after_frameworks(
        self, cluster: ClusterSpec, handle: ClusterHandle, fetcher: Callable[[str], str]
    ) -> tuple[pulumi.Resource, Frameworks]:
        """What the cluster's objects wait for (Kueue installed, or found served), and the
        cluster's job frameworks: a Kueue the stack installs starts only once every
        framework is installed, its CRDs served.

        Kueue v0.19.2 sets up an integration whose CRD is not served at its start later,
        once it is (pkg/controller/jobframework/setup.go 86-102, WaitForAPI 155-174), but
        only once: an error then is logged and never retried (setup.go 99-100), and the
        same error with the CRD served at start stops Kueue (setup.go 103-106,
        cmd/kueue/main.go 420-422). The TrainJob integration's NewReconciler
        (pkg/controller/jobs/trainjob/trainjob_controller.go 91) builds Trainer's runtimes,
        which index TrainJobs, TrainingRuntimes and ClusterTrainingRuntimes (kubeflow/trainer
        v2.2.1 pkg/runtime/core/trainingruntime.go 67-73, pkg/runtime/framework/core/
        framework.go 55, 159-170: "setting index on runtimeClass for TrainingRuntime"), so
        it fails while the runtime CRDs are not all served; and its controller owns JobSets
        (trainjob_controller.go 80), a watch that stops the manager when the JobSet CRD is
        not served within the cache sync timeout (controller-runtime v0.24.1
        pkg/internal/source/kind.go 70-80, pkg/internal/controller/controller.go 363-384).
        A MultiKueueCluster whose worker lacks a CRD retries with a fresh client after a
        backoff of up to 5m20s (pkg/controller/admissionchecks/multikueue/
        multikueuecluster.go 79-105, 228-236, 351-366, 911-918). Adding a framework later
        changes Kueue's Configuration (its integrations), and so the start-up hash on
        Kueue's pods (components/objects/kueue_config.py, kueue_pod_annotations): Kueue
        restarts after the new framework is installed.

        With `kueue.install: existing`, Kueue runs already: the frameworks come after the
        check that it is served, as everything else, and that Kueue sets them up as above,
        on its own but for a TrainJob set-up that failed ("Failed to setup controller for
        job framework" in its log), which takes a restart of Kueue.
        """

        def frameworks(after: list[pulumi.Resource]) -> Frameworks:
            return Frameworks(
                f"{cluster.name}-frameworks",
                self.spec,
                cluster,
                self.files,
                self._on(handle, after, group=True),
            )

        if self.spec.kueue.install == "existing":
            needed = required_apis(cluster_objects(self.spec, cluster).objects)
            check = ExistingKueue(
                f"{cluster.name}-kueue", self.spec, handle, needed, self._on(handle, [])
            )
            return check, frameworks([check])
        # Kueue's Deployment needs nodes, and so do the frameworks' controllers: the
        # cluster's node pools first (GKE, EKS).
        installed = frameworks(list(handle.nodes))
        before: list[pulumi.Resource] = [installed, *handle.nodes]
        if cluster.role == "manager" and self.spec.credentials.mode == "clusterProfile":
            # Kueue looks for the ClusterProfile CRD once, at start-up.
            crd = next(b for b in bundles(self.spec, cluster) if b.name == "clusterprofile-crd")
            before.append(
                ConfigFile(
                    f"{cluster.name}-clusterprofile-crd",
                    file=self.files[crd.url],
                    opts=self._on(handle, [], group=True),
                )
            )
        kueue = KueueInstall(
            f"{cluster.name}-kueue", self.spec, handle, fetcher, self._on(handle, before, True)
        )
        return kueue, installed

    def _manager(
        self,
        kueue: pulumi.Resource,
        access: dict[str, WorkerAccess],
        worker_frameworks: list[Frameworks],
    ) -> pulumi.Resource:
        spec = self.spec
        handle = self.handles[spec.manager.name]
        profile_mode = spec.credentials.mode == "clusterProfile"
        given = {n: s.value for n, s in spec.worker_kubeconfigs.items() if s.value is not None}
        credentials: dict[str, pulumi.Input[str]] = {
            name: pulumi.Output.secret(
                given.get(name)
                or (a.multikueue_token.token if profile_mode else a.multikueue_kubeconfig)
            )
            for name, a in access.items()
        }

        def build(values: Mapping[str, str]) -> list[dict[str, Any]]:
            return external_framework_rbac(spec) + manager_multikueue_objects(spec, values)

        tokens = [a.multikueue_token for a in access.values()]
        # A MultiKueueCluster goes inactive when a worker lacks a CRD of the manager's
        # frameworks: every worker's frameworks first.
        multikueue = self._objects(
            "MultiKueue",
            "manager-multikueue",
            handle,
            with_deploy_time_values(build, credentials),
            self._on(handle, [kueue, self.guards[spec.manager.name], *tokens, *worker_frameworks]),
        )
        if spec.dispatcher.enabled:
            self._dispatcher(handle, kueue, access)
        return multikueue

    def _dispatcher(
        self, handle: ClusterHandle, kueue: pulumi.Resource, access: dict[str, WorkerAccess]
    ) -> None:
        spec = self.spec
        after: list[pulumi.Resource] = [kueue]
        if spec.dispatcher.run == "local":
            image: pulumi.Input[str] = ""  # no Deployment: nothing runs an image
        elif spec.dispatcher.image:
            image = spec.dispatcher.image
        else:
            tag = source_hash(ROOT)
            kind_managers = [h for h in self.handles.values() if h.spec.role == "manager"]
            kind_managers = [h for h in kind_managers if kind_cluster_of(h) is not None]
            built = ControllerImage(
                "dispatcher-image",
                {
                    "repository": dispatcher.NAME,
                    "tag": tag,
                    "context": str(ROOT),
                    "dockerfile": str(ROOT / "controller" / "Dockerfile"),
                    # Unnamed, a kind manager's is asked of Docker at build time.
                    "platform": spec.dispatcher.platform
                    or (None if kind_managers else IMAGE_PLATFORM),
                    "registry": spec.dispatcher.registry,
                    "base": spec.dispatcher.base_image,
                    "kind_clusters": [h.spec.physical_name(spec.fleet_name) for h in kind_managers],
                    # A replaced kind manager is a new cluster under the same name: its
                    # identity changing loads the image again.
                    "kind_cluster_ids": [
                        cluster_identity(h.component.cluster.ca_data)  # type: ignore[attr-defined]
                        for h in kind_managers
                    ],
                    "kind_binary": "kind",
                },
                pulumi.ResourceOptions(
                    parent=self,
                    depends_on=[handle.component],
                    deleted_with=kind_cluster_of(handle),
                ),
            )
            after.append(built)
            # Loaded into kind under its tag, known before anything is built; pushed to a
            # registry, pulled by the digest the push returns.
            image = built.image if spec.dispatcher.registry else f"{dispatcher.NAME}:{tag}"
        values: dict[str, pulumi.Input[str]] = {"image": image}
        for w in spec.workers:
            values[f"server {w.name}"] = self.handles[w.name].server
            values[f"ca {w.name}"] = access[w.name].multikueue_token.ca_data
            values[f"reader {w.name}"] = pulumi.Output.secret(
                access[w.name].reader_kubeconfig or ""
            )

        def build(v: Mapping[str, str]) -> list[dict[str, Any]]:
            endpoints = {w.name: (v[f"server {w.name}"], v[f"ca {w.name}"]) for w in spec.workers}
            readers = {w.name: v[f"reader {w.name}"] for w in spec.workers}
            return dispatcher.dispatcher_objects(spec, v["image"], endpoints, readers)

        objects = self._objects(
            "Dispatcher",
            "manager-dispatcher",
            handle,
            with_deploy_time_values(build, values),
            self._on(handle, after),
        )
        if spec.dispatcher.run == "local":
            self._local_dispatcher(handle, objects, values)

    def _local_dispatcher(
        self,
        handle: ClusterHandle,
        objects: pulumi.Resource,
        values: Mapping[str, pulumi.Input[str]],
    ) -> None:
        """What `python -m controller run` needs to run as the pod would: its settings (the
        ConfigMap's text) and the manager's kubeconfig with the dispatcher ServiceAccount's
        own token (a secret), as stack outputs."""
        spec = self.spec
        token = ServiceAccountToken(
            "manager-dispatcher-token",
            handle.kubeconfig,
            handle.context,
            FLEET_NAMESPACE,
            dispatcher.TOKEN_SECRET,
            with_its_secret(
                pulumi.ResourceOptions(
                    parent=self, depends_on=[objects], deleted_with=created_cluster_of(handle)
                ),
                objects,
                FLEET_NAMESPACE,
                dispatcher.TOKEN_SECRET,
            ),
            token_identity(handle),
        )
        # The server as this machine reaches it (the local kubeconfig's), not as the
        # manager's pods do (handle.server: a kind node's in-network name).
        local_server = pulumi.Output.all(handle.kubeconfig, handle.context).apply(
            lambda a: context_cluster(a[0], a[1])[0]
        )
        self.dispatcher_kubeconfig = token_kubeconfig(
            spec.manager.name, local_server, token, user=dispatcher.NAME, sort_keys=False
        )
        endpoints = {
            w.name: pulumi.Output.all(values[f"server {w.name}"], values[f"ca {w.name}"])
            for w in spec.workers
        }
        self.dispatcher_settings = pulumi.Output.all(**endpoints).apply(
            lambda e: yaml_text(dispatcher.settings(spec, {n: (v[0], v[1]) for n, v in e.items()}))
        )
