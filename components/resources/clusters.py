"""The clusters of a fleet, behind one interface: a Kubernetes provider for the cluster, the
kubeconfig (secret) and context the stack uses to reach it, and the API server URL the
manager's pods use. kind, existing contexts, GKE and EKS (cloud SDKs imported only when
a stack has such a cluster, from requirements-cloud.txt)."""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from components.model.spec import GPU_TAINT, ClusterSpec, FleetSpec
from components.objects.kind_config import (
    CERTS_DIR,
    OWNER_LABEL,
    apart_from_mirrors,
    hosts_toml,
    kind_config,
    mirror_ca_path,
    mirror_props,
    reads_mirrors,
)
from components.objects.kubeconfig import (
    context_cluster,
    existing_kubeconfig_path,
    read_kubeconfig_file,
    reduce_to_context,
)
from components.resources.commands import CommandFailed, kubeconfig_ca, run
from components.resources.kind_creates import (
    KIND_DELETE_TIMEOUT,
    creating,
    mark_of,
    stack_folder,
)
from components.resources.program_env import CLOUD_SDKS, missing_message

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class ClusterHandle:
    spec: ClusterSpec
    component: pulumi.ComponentResource
    provider: k8s.Provider
    kubeconfig: pulumi.Output[str]  # secret
    context: pulumi.Output[str]
    server: pulumi.Output[str]  # as the manager reaches it
    # What stays the same across in-place updates of a long-lived cluster (its provider's
    # clusterIdentifier); None on kind, where each new cluster has a new CA.
    identity: str | None = None
    # The resource whose deletion takes the cluster, and every object on it, away: the kind,
    # GKE or EKS cluster the stack created. None on an `existing` cluster, which outlives
    # the fleet (its objects are deleted one by one).
    created: pulumi.Resource | None = None
    # The node pools Kueue and everything after it need to run on: its install waits for
    # them (a Deployment applied before any node exists waits out the provider's timeout).
    nodes: tuple[pulumi.Resource, ...] = ()


# Seconds a request of a cluster's Kubernetes provider may take (see _provider).
CLIENT_TIMEOUT_S = 120


def _provider(
    name: str,
    kubeconfig: pulumi.Input[str],
    context: pulumi.Input[str] | None,
    parent: pulumi.Resource,
    ephemeral: bool,
    identity: str | None = None,
    after: list[pulumi.Resource] | None = None,
) -> k8s.Provider:
    return k8s.Provider(
        f"{name}-k8s",
        kubeconfig=kubeconfig,
        context=context,
        # With an identity, only its change replaces the provider (and so every object on
        # the cluster); a new endpoint, CA or credential after an in-place cluster update is
        # an update (pulumi/pulumi-kubernetes v4.32.0 provider/pkg/provider/provider.go,
        # DiffConfig on clusterIdentifier).
        cluster_identifier=identity,
        # A kind cluster is gone when its container is: let destroy finish without it.
        # Never on long-lived clusters, where an outage must not drop state. Every choice the
        # fleet relies on is explicit: a None would let PULUMI_K8S_DELETE_UNREACHABLE,
        # _UPSERT_EXISTING_OBJECTS or _ENABLE_SERVER_SIDE_APPLY from the environment decide
        # (pulumi_kubernetes 4.34.2 provider.py). Creating an object that already exists
        # must fail, not take it over (what the aliases and the one-fleet-per-cluster rule
        # count on).
        delete_unreachable=ephemeral,
        enable_server_side_apply=True,
        upsert_existing_objects=False,
        # Each provider reads the cluster's discovery and its whole OpenAPI v2 document when
        # it starts, within client-go's 32 s for a discovery request when no timeout is set
        # (k8s.io/client-go discovery_client.go, defaultTimeout); a cluster that misses it
        # is taken as unreachable for the run (provider.go at v4.32.0, Configure: "unable to
        # load schema information"), and a preview or up of its Kueue install stops there
        # ("configured Kubernetes cluster is unreachable", provider_construct.go). An API
        # server that has just restarted builds that document again on the first request,
        # slowly on a loaded kind host: the kind tier's preview after a worker's restart
        # failed so. A refused connection still fails at once.
        kube_client_settings=k8s.KubeClientSettingsArgs(timeout=CLIENT_TIMEOUT_S),
        # An order, not an input: a change to what it waits for changes nothing here.
        opts=pulumi.ResourceOptions(parent=parent, depends_on=after or []),
    )


# --- kind ----------------------------------------------------------------------------------


# The bound of kind's create (its delete's is KIND_DELETE_TIMEOUT, from kind_creates). A
# dynamic provider gets no custom timeout from the engine (pulumi 3.272.0
# sdk/python/lib/pulumi/dynamic/__main__.py ignores it in Create and Delete), so they are
# enforced here; `--wait 5m` is kind's own wait for the node.
KIND_CREATE_TIMEOUT = 900.0


def node_owner(kind: str, name: str) -> str | None:
    """The owner label on a kind cluster's control-plane node ("" when unlabelled), or None
    when the node cannot be read (an unreachable or half-made cluster)."""
    import urllib3
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException

    text = run([kind, "get", "kubeconfig", "--name", name])
    try:
        api = client.CoreV1Api(config.new_client_from_config_dict(yaml.safe_load(text)))
        node = api.read_node(f"{name}-control-plane", _request_timeout=30)
    except (ApiException, ConfigException, OSError, urllib3.exceptions.HTTPError):
        return None
    return (node.metadata.labels or {}).get(OWNER_LABEL, "")


def docker_cgroup_v1(timeouts: tuple[float, ...] = (30, 120)) -> bool:
    """Whether Docker's host runs cgroup v1 (False when Docker does not answer: a preview
    elsewhere). A Docker that answers slowly is asked again, longer: on a loaded host
    `docker info` took over 30 s, and taking that for "no Docker" left kind's kubelets of 1.35+
    without failCgroupV1: false, so every node of the fleet failed to start."""
    for timeout in timeouts:
        try:
            answer = run(["docker", "info", "--format", "{{.CgroupVersion}}"], timeout=timeout)
        except CommandFailed as exc:
            if "did not finish" in str(exc):
                continue  # slow, not absent
            return False
        return answer.strip() == "1"
    return False


# The Docker network kind puts every node on (kind v0.33.0
# pkg/cluster/internal/providers/docker/network.go, fixedNetworkName).
KIND_NETWORK = "kind"


def configure_mirrors(
    kind: str, name: str, mirrors: dict[str, Any], removed: tuple[str, ...] = ()
) -> None:
    """A hosts.toml per mirrored registry on every node of the cluster (containerd reads them
    at each pull, so a running node needs no restart), and each mirror that is a container of
    this Docker joined to the kind network, where the nodes resolve it by name. The folders of
    REMOVED registries (mirrored before, not now) go, so their pulls go to the registry."""
    nodes = run([kind, "get", "nodes", "--name", name]).split()
    for registry in removed:
        for node in nodes:
            # Only the folder the stack wrote for that registry: the key was a RegistryHost
            # (components/model/fieldtypes.py), no path separator or quote in it.
            run(["docker", "exec", node, "rm", "-rf", f"{CERTS_DIR}/{registry}"])
    for registry, mirror in sorted(mirrors.items()):
        folder = f"{CERTS_DIR}/{registry}"
        ca = None if isinstance(mirror, str) else mirror.get("ca")
        for node in nodes:
            # The CA file first (hosts.toml names it; containerd reads both at each pull), or
            # gone with the option that named it.
            ca_file = mirror_ca_path(registry)
            if ca:
                run(["docker", "exec", "-i", node, "sh", "-c",
                     f"mkdir -p '{folder}' && cat > '{ca_file}'"], stdin=ca)  # fmt: skip
            no_ca = "" if ca else f"rm -f '{ca_file}' && "
            run(
                ["docker", "exec", "-i", node, "sh", "-c",
                 f"mkdir -p '{folder}' && {no_ca}cat > '{folder}/hosts.toml'"],
                stdin=hosts_toml(registry, mirror),
            )  # fmt: skip
        url = mirror if isinstance(mirror, str) else mirror["url"]
        host = re.sub(r"^https?://", "", url).split("/")[0].rsplit(":", 1)[0]
        try:
            networks = run(
                ["docker", "inspect", "--format", "{{json .NetworkSettings.Networks}}", host]
            )
        except CommandFailed:
            continue  # not a container here: a mirror the nodes reach some other way
        if KIND_NETWORK not in json.loads(networks or "{}"):
            run(["docker", "network", "connect", KIND_NETWORK, host])


def _kind_config(text: Any) -> dict[str, Any]:
    """A kind configuration as the provider was given it (YAML), as a mapping to compare."""
    loaded = yaml.safe_load(text) if isinstance(text, str) else text
    return loaded if isinstance(loaded, dict) else {"config": loaded}


def _file_ca(path: str) -> str | None:
    """The CA in a kubeconfig file kind wrote, or None when there is no such file."""
    try:
        return kubeconfig_ca(Path(path).read_text())
    except (OSError, yaml.YAMLError, AttributeError):
        return None


class KindClusterProvider(ResourceProvider):
    """A kind cluster. Every kind command gets `--kubeconfig` with a file of the stack's own
    (kind v0.32.0 pkg/cmd/kind/create/cluster/createcluster.go and delete/cluster: the flag
    replaces $KUBECONFIG and ~/.kube/config), so creates in parallel never contend for the
    lock on the user's file (kind pkg/cluster/internal/kubeconfig/internal/kubeconfig/lock.go
    takes `<file>.lock` with O_EXCL and fails when it exists) and the user's current context
    is never changed. The control-plane node carries the stack as OWNER_LABEL: a create that
    ran in kind but was never recorded by Pulumi is adopted by the same stack next time, when
    the file kind wrote for it holds that cluster's CA."""

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

    def _exists(self, props: dict[str, Any]) -> bool:
        return props["name"] in run([props["kind_binary"], "get", "clusters"]).split()

    def create(self, props: dict[str, Any]) -> CreateResult:
        kind, name, path = props["kind_binary"], props["name"], props["kubeconfig_path"]
        exists = self._exists(props)
        if exists and mark_of(path).exists():
            # This stack's own create, cut short (its mark is still here): half made, so
            # deleted and made again.
            self.delete(name, props)
            exists = False
        if exists:
            owner = node_owner(kind, name)
            if owner != props["owner"]:
                whose = "no owner label" if not owner else f"owner {owner!r}"
                if owner is None:
                    whose = "a control-plane node that cannot be read"
                raise CommandFailed(
                    f"a kind cluster named {name} already exists with {whose}, not this "
                    f"stack ({props['owner']}); delete it (`kind delete cluster --name "
                    f"{name}`) or choose another fleetName"
                )
            # Created by this stack in a run that was interrupted before Pulumi saw it, or
            # by a stack of the same name in another checkout (or another backend), whose
            # `down` would then delete what this one adopted. kind wrote this checkout's own
            # file at that create: the cluster's CA in it tells the two apart.
            outs = self._outputs(props)
            if not outs["ca_data"] or _file_ca(path) != outs["ca_data"]:
                raise CommandFailed(
                    f"a kind cluster named {name} already exists for a stack "
                    f"{props['owner']} made elsewhere (another checkout or state: its "
                    f"certificate authority is not the one in {path}); delete it (`kind "
                    f"delete cluster --name {name}`) or choose another fleetName"
                )
            return CreateResult(id_=name, outs=outs)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        create = [kind, "create", "cluster", "--name", name, "--config", "-", "--wait", "5m"]
        # Marked while kind runs: a create cut short is removed by the stack's teardown
        # (components/resources/kind_creates.py), where destroy would skip it.
        with creating(kind, name, path):
            run([*create, "--kubeconfig", path], stdin=props["config"], timeout=KIND_CREATE_TIMEOUT)
        return CreateResult(id_=name, outs=self._outputs(props))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """Gone when kind no longer lists it (deleted out of band): an empty id tells the
        engine so (pulumi 3.272.0 sdk/python/lib/pulumi/dynamic/__main__.py Read), and
        `refresh` drops it from the state, after which `up` creates it again."""
        if not self._exists(props):
            return ReadResult("", {})
        return ReadResult(id_, self._outputs(props))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # The kubeconfig path and the kind binary's location are where, not what: a moved
        # checkout must not replace the cluster.
        replaces = [k for k in ("name", "owner") if olds.get(k) != news.get(k)]
        old_config, new_config = (_kind_config(c) for c in (olds.get("config"), news.get("config")))
        if apart_from_mirrors(old_config) != apart_from_mirrors(new_config):
            replaces.append("config")
        elif news.get("mirrored") and not reads_mirrors(old_config):
            # Made before every kind cluster got containerd's config_path, which containerd
            # reads only at start: its first mirror needs the cluster made again.
            replaces.append("config")
        # Anything else is no change to the cluster: its mirrors are KindMirrors' (a state
        # of before that split holds them here as registry_mirrors, compared with nothing),
        # and a kind configuration that differs only in mirrors is the one it runs with.
        return DiffResult(changes=bool(replaces), replaces=replaces, delete_before_replace=True)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        # Deleting a cluster that is already gone succeeds: destroy stays safe to repeat.
        args = [props["kind_binary"], "delete", "cluster", "--name", props["name"]]
        path = props.get("kubeconfig_path")
        run([*args, "--kubeconfig", path] if path else args, timeout=KIND_DELETE_TIMEOUT)
        if path:
            Path(path).unlink(missing_ok=True)


def kind_kubeconfig_path(stack: str, name: str) -> str:
    """The stack's own kubeconfig file for kind's writes, beside the local backend state."""
    return str(stack_folder(stack, ROOT) / f"{name}.kubeconfig")


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
        kind_binary: str,
        owner: str,
        kubeconfig_path: str,
        registry_mirrors: dict[str, Any],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(
            KindClusterProvider(),
            name,
            {
                "name": cluster_name,
                "config": config,
                "mirrored": bool(registry_mirrors),
                "kind_binary": kind_binary,
                "owner": owner,
                "kubeconfig_path": kubeconfig_path,
                "kubeconfig": None,
                "context": None,
                "ca_data": None,
                "internal_server": None,
            },
            pulumi.ResourceOptions.merge(
                opts,
                pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"]),
            ),
        )


class KindMirrorsProvider(ResourceProvider):
    """containerd's hosts.toml for each registry mirror, on every node of a running kind
    cluster: a resource apart from the cluster, so that a mirror added, changed or removed
    changes nothing the cluster's Kubernetes provider reads. A dynamic provider cannot tell
    the engine which outputs an update keeps (pulumi 3.272.0
    sdk/python/lib/pulumi/dynamic/__main__.py: its DiffResponse has no `stables`), so an
    update of the cluster itself made its kubeconfig unknown in preview, and the preview
    showed every object on the cluster replaced where `up` replaced none.

    `cluster_ca` is the cluster's CA, new with each cluster kind makes: a cluster made again
    (its configuration changed) has none of the files, and they are written again."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        configure_mirrors(props["kind_binary"], props["name"], props["registry_mirrors"] or {})
        return CreateResult(id_=props["name"], outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        keys = ("name", "registry_mirrors", "cluster_ca")
        changes = any((olds.get(k) or None) != (news.get(k) or None) for k in keys)
        return DiffResult(changes=changes, replaces=[])

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        same_nodes = (olds.get("name"), olds.get("cluster_ca")) == (
            news["name"],
            news.get("cluster_ca"),
        )
        before = (olds.get("registry_mirrors") or {}) if same_nodes else {}
        after = news["registry_mirrors"] or {}
        removed = tuple(sorted(set(before) - set(after)))
        configure_mirrors(news["kind_binary"], news["name"], after, removed)
        return UpdateResult(outs=news)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        """The files it wrote, from the nodes still running (never called when the cluster
        goes in the same run: deleted_with), none when the cluster is gone already."""
        kind, name = props["kind_binary"], props["name"]
        if name not in run([kind, "get", "clusters"]).split():
            return
        registries = tuple(sorted(props.get("registry_mirrors") or {}))
        try:
            configure_mirrors(kind, name, {}, registries)
        except CommandFailed as exc:
            # A stopped node keeps the files; they go with it when the cluster is deleted.
            pulumi.log.warn(f"kind cluster {name}: mirror files left on a node: {exc}")


class KindMirrors(pulumi.dynamic.Resource, module="kind", name="Mirrors"):
    def __init__(
        self,
        name: str,
        cluster: KindCluster,
        kind_binary: str,
        registry_mirrors: dict[str, Any],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(
            KindMirrorsProvider(),
            name,
            {
                "name": cluster.id,
                "cluster_ca": cluster.ca_data,
                "kind_binary": kind_binary,
                "registry_mirrors": registry_mirrors,
            },
            opts,
        )


def owner_label(project: str, stack: str) -> str:
    """The owner label value: project and stack, within a label value's 63 characters."""
    value = re.sub(r"[^A-Za-z0-9_.-]", "-", f"{project}.{stack}")
    return value[-63:].strip("-_.")


def stack_owner() -> str:
    """The owner label value of the stack this program runs."""
    return owner_label(pulumi.get_project(), pulumi.get_stack())


class KindClusterComponent(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        spec: FleetSpec,
        cluster: ClusterSpec,
        kind_binary: str,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("multikueue-fleet:cluster:Kind", name, None, opts)
        owner = stack_owner()
        physical = cluster.physical_name(spec.fleet_name)
        config = yaml.safe_dump(
            kind_config(spec, cluster, owner, docker_cgroup_v1()), sort_keys=False
        )
        self.cluster = KindCluster(
            f"{name}-kind",
            physical,
            config,
            kind_binary,
            owner,
            kind_kubeconfig_path(pulumi.get_stack(), physical),
            mirror_props(cluster.kind.registry_mirrors),
            pulumi.ResourceOptions(parent=self),
        )
        self.mirrors = KindMirrors(
            f"{name}-mirrors",
            self.cluster,
            kind_binary,
            mirror_props(cluster.kind.registry_mirrors),
            # Nothing to take off nodes that go with the cluster in the same run (the engine
            # calls no Delete then: pulumi v3.259.0 pkg/resource/deploy/step.go isDeletedWith).
            pulumi.ResourceOptions(parent=self, deleted_with=self.cluster),
        )
        kubeconfig = pulumi.Output.secret(self.cluster.kubeconfig)
        self.handle = ClusterHandle(
            cluster,
            self,
            # Nothing is pulled on the cluster before its mirrors are in place.
            _provider(name, kubeconfig, None, self, True, after=[self.mirrors]),
            kubeconfig,
            self.cluster.context,
            self.cluster.internal_server,
            created=self.cluster,
        )
        self.register_outputs({"context": self.cluster.context})


class ExistingClusterComponent(pulumi.ComponentResource):
    def __init__(
        self, name: str, cluster: ClusterSpec, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("multikueue-fleet:cluster:Existing", name, None, opts)
        assert cluster.existing is not None
        path = existing_kubeconfig_path(cluster.existing)
        try:
            whole = read_kubeconfig_file(path)
        except ValueError as exc:
            # One line naming the file, what is wrong with it and the keys that choose it
            # (a RunError: Pulumi prints it without a traceback).
            fix = (
                # The launcher's file (stacks/Pulumi.loopback.yaml): the fleet is not up.
                "start the loopback fleet first: python -m loopback up --stack "
                f"{pulumi.get_stack()}"
                if ".fleet/loopback/" in path.as_posix() and not path.exists()
                else f"point {cluster.path}.existing.kubeconfigPath (or KUBECONFIG) at the "
                "kubeconfig file of this cluster"
            )
            raise pulumi.RunError(
                f"cluster '{cluster.name}': kubeconfig {path}: {exc}; {fix}"
            ) from None
        context = cluster.existing.context
        try:
            # Only the chosen context: other edits of the user's file change nothing here.
            text = reduce_to_context(whole, context)
        except ValueError as exc:
            raise pulumi.RunError(
                f"cluster '{cluster.name}': kubeconfig {path}: {exc}; set "
                f"{cluster.path}.existing.context to one of its contexts"
            ) from exc
        server = cluster.existing.server or context_cluster(text, context)[0]
        kubeconfig = pulumi.Output.secret(text)
        self.handle = ClusterHandle(
            cluster,
            self,
            _provider(name, kubeconfig, context, self, False, f"existing/{server}"),
            kubeconfig,
            pulumi.Output.from_input(context),
            pulumi.Output.from_input(server),
            f"existing/{server}",
        )
        self.register_outputs({"context": context})


def _exec_kubeconfig(
    name: str,
    server: str,
    ca: str,
    command: str,
    args: list[str],
    env: dict[str, str] | None = None,
) -> str:
    """A kubeconfig for the stack's own access to a cloud cluster (not the one MultiKueue
    uses, which holds a ServiceAccount token)."""
    user: dict = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": command,
            "args": args,
            "interactiveMode": "Never",
        }
    }
    if env:
        user["exec"]["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": name,
            "clusters": [
                {"name": name, "cluster": {"server": server, "certificate-authority-data": ca}}
            ],
            "users": [{"name": name, "user": user}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        }
    )


def _require_cloud_sdk(provider: str) -> None:
    """The cloud SDKs are in Pulumi's environment only for cloud stacks (program_env.py):
    one missing is a message with the fix, not an ImportError traceback."""
    missing = [m for m in CLOUD_SDKS[provider] if importlib.util.find_spec(m) is None]
    if missing:
        raise pulumi.RunError(missing_message(pulumi.get_stack(), [provider], missing))


class GkeClusterComponent(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        spec: FleetSpec,
        cluster: ClusterSpec,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("multikueue-fleet:cluster:Gke", name, None, opts)
        _require_cloud_sdk("gke")
        import pulumi_gcp as gcp

        g = cluster.gke
        assert g is not None
        child = pulumi.ResourceOptions(parent=self)
        physical = cluster.physical_name(spec.fleet_name)
        gke = gcp.container.Cluster(
            f"{name}-gke",
            name=physical,
            project=g.project,
            location=g.location,
            min_master_version=cluster.kubernetes_version,
            remove_default_node_pool=True,
            initial_node_count=1,
            deletion_protection=False,
            opts=child,
        )
        pools = [
            gcp.container.NodePool(
                f"{name}-nodes",
                cluster=gke.name,
                project=g.project,
                location=g.location,
                node_count=g.node_count,
                node_config={
                    "machine_type": g.machine_type,
                    "labels": dict(cluster.node_labels),
                    "oauth_scopes": ["https://www.googleapis.com/auth/cloud-platform"],
                },
                opts=child,
            )
        ]
        if g.gpu_pool is not None:
            pools.append(_gke_gpu_pool(gcp, name, cluster, gke, child))
        server = gke.endpoint.apply(lambda e: f"https://{e}")
        identity = f"gke/{g.project}/{g.location}/{physical}"
        kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(server, gke.master_auth.cluster_ca_certificate).apply(
                lambda a: _exec_kubeconfig(physical, a[0], a[1], "gke-gcloud-auth-plugin", [])
            )
        )
        self.handle = ClusterHandle(
            cluster,
            self,
            _provider(name, kubeconfig, None, self, False, identity),
            kubeconfig,
            pulumi.Output.from_input(physical),
            server,
            identity,
            created=gke,
            nodes=tuple(pools),
        )
        self.register_outputs({"endpoint": server})


class EksClusterComponent(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        spec: FleetSpec,
        cluster: ClusterSpec,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("multikueue-fleet:cluster:Eks", name, None, opts)
        _require_cloud_sdk("eks")
        import pulumi_aws as aws
        import pulumi_eks as eks

        e = cluster.eks
        assert e is not None
        region = aws.Provider(
            f"{name}-aws", region=e.region, opts=pulumi.ResourceOptions(parent=self)
        )
        physical = cluster.physical_name(spec.fleet_name)
        eks_cluster = eks.Cluster(
            f"{name}-eks",
            name=physical,
            version=cluster.kubernetes_version,
            node_group_options=eks.ClusterNodeGroupOptionsArgs(
                instance_type=e.instance_type,
                desired_capacity=e.node_count,
                min_size=e.node_count,
                max_size=e.node_count,
                labels=dict(cluster.node_labels) or None,
            ),
            opts=pulumi.ResourceOptions(parent=self, providers={"aws": region}),
        )
        nodes: list[pulumi.Resource] = [eks_cluster]  # its default node group inside
        if e.gpu_pool is not None:
            nodes.append(
                _eks_gpu_pool(
                    eks,
                    aws,
                    name,
                    cluster,
                    eks_cluster,
                    pulumi.ResourceOptions(parent=self, providers={"aws": region}),
                )
            )
        kubeconfig = pulumi.Output.secret(eks_cluster.kubeconfig_json)
        # The endpoint, read from the kubeconfig rather than the nested cluster resource.
        server = eks_cluster.kubeconfig_json.apply(
            lambda k: json.loads(k)["clusters"][0]["cluster"]["server"]
        )
        self.handle = ClusterHandle(
            cluster,
            self,
            _provider(name, kubeconfig, None, self, False, f"eks/{e.region}/{physical}"),
            kubeconfig,
            pulumi.Output.from_input(physical),
            server,
            f"eks/{e.region}/{physical}",
            created=eks_cluster,
            nodes=tuple(nodes),
        )
        self.register_outputs({"endpoint": server})


def _gke_gpu_pool(
    gcp: Any, name: str, cluster: ClusterSpec, gke: Any, opts: pulumi.ResourceOptions
) -> pulumi.Resource:
    """A GKE node pool with NVIDIA GPUs: the accelerators attached to each node, the driver
    installed by GKE (node_config.guest_accelerator.gpu_driver_installation_config, the
    GKE API's AcceleratorConfig.gpuDriverInstallationConfig:
    https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/NodeConfig#AcceleratorConfig,
    and https://cloud.google.com/kubernetes-engine/docs/how-to/gpus#create-gpu-pool-auto-drivers),
    and the nvidia.com/gpu=present:NoSchedule taint GKE itself puts on GPU nodes of a
    cluster with other pools, written out so it holds either way and a second `up` plans no
    replacement for a taint GKE added (Google's cluster-toolkit does the same for that reason:
    GoogleCloudPlatform/cluster-toolkit#1285, modules/compute/gke-node-pool). GKE labels the nodes
    cloud.google.com/gke-accelerator=<accelerator>, what a flavor selects."""
    assert cluster.gke is not None and cluster.gke.gpu_pool is not None
    g, pool = cluster.gke, cluster.gke.gpu_pool
    key, value, _effect = GPU_TAINT
    return gcp.container.NodePool(
        f"{name}-gpu-nodes",
        cluster=gke.name,
        project=g.project,
        location=g.location,
        node_count=pool.node_count,
        node_locations=list(pool.zones) or None,
        node_config={
            "machine_type": pool.machine_type,
            "labels": {**cluster.node_labels, **pool.node_labels},
            "oauth_scopes": ["https://www.googleapis.com/auth/cloud-platform"],
            "guest_accelerators": [
                {
                    "type": pool.accelerator,
                    "count": pool.accelerator_count,
                    "gpu_driver_installation_config": {"gpu_driver_version": pool.driver_version},
                }
            ],
            # The GKE API spells the effect NO_SCHEDULE (NodeTaint.Effect).
            "taints": [{"key": key, "value": value, "effect": "NO_SCHEDULE"}],
        },
        opts=opts,
    )


def _eks_gpu_pool(
    eks: Any,
    aws: Any,
    name: str,
    cluster: ClusterSpec,
    eks_cluster: Any,
    opts: pulumi.ResourceOptions,
) -> pulumi.Resource:
    """An EKS managed node group of GPU instances on the NVIDIA Bottlerocket AMI, whose
    image carries the NVIDIA driver and the Kubernetes device plugin
    (https://docs.aws.amazon.com/eks/latest/userguide/ml-eks-optimized-ami.html,
    "Bottlerocket x86_64 aws-k8s-nvidia"; EKS CreateNodegroup amiType
    BOTTLEROCKET_x86_64_NVIDIA), tainted nvidia.com/gpu=present:NoSchedule and labelled
    through the node group (CreateNodegroup `taints`, `labels`:
    https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateNodegroup.html). The
    nodes use the instance role the cluster maps for its default node group."""
    assert cluster.eks is not None and cluster.eks.gpu_pool is not None
    pool = cluster.eks.gpu_pool
    key, value, _effect = GPU_TAINT
    return eks.ManagedNodeGroup(
        f"{name}-gpu-nodes",
        cluster=eks_cluster,
        node_role_arn=eks_cluster.instance_roles.apply(
            lambda roles: roles[0].arn if roles else None
        ),
        ami_type=pool.ami_type,
        instance_types=[pool.instance_type],
        scaling_config=aws.eks.NodeGroupScalingConfigArgs(
            desired_size=pool.node_count, min_size=pool.node_count, max_size=pool.node_count
        ),
        labels={**cluster.node_labels, **pool.node_labels} or None,
        # The EKS API spells the effect NO_SCHEDULE (Taint.effect).
        taints=[aws.eks.NodeGroupTaintArgs(key=key, value=value, effect="NO_SCHEDULE")],
        opts=opts,
    )


def make_cluster(
    spec: FleetSpec, cluster: ClusterSpec, kind_binary: str, opts: pulumi.ResourceOptions
) -> ClusterHandle:
    name = cluster.name
    if cluster.provider == "kind":
        return KindClusterComponent(name, spec, cluster, kind_binary, opts).handle
    if cluster.provider == "existing":
        return ExistingClusterComponent(name, cluster, opts).handle
    if cluster.provider == "gke":
        return GkeClusterComponent(name, spec, cluster, opts).handle
    return EksClusterComponent(name, spec, cluster, opts).handle
