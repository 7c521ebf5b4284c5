"""The clusters of a fleet, behind one interface: a Kubernetes provider for the cluster, the
kubeconfig (secret) and context the stack uses to reach it, and the API server URL the
manager's pods use. kind, existing contexts, GKE and EKS (cloud SDKs imported only when
a stack has such a cluster, from requirements-cloud.txt)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.kind_config import kind_config
from components.kubeconfig import reduce_to_context
from components.providers import KindCluster
from components.spec import ClusterSpec, FleetSpec


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


def _provider(
    name: str,
    kubeconfig: pulumi.Input[str],
    context: pulumi.Input[str] | None,
    parent: pulumi.Resource,
    ephemeral: bool,
    identity: str | None = None,
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
        # Never on long-lived clusters, where an outage must not drop state.
        delete_unreachable=ephemeral or None,
        opts=pulumi.ResourceOptions(parent=parent),
    )


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
        config = yaml.safe_dump(kind_config(spec, cluster), sort_keys=False)
        self.cluster = KindCluster(
            f"{name}-kind",
            cluster.physical_name(spec.fleet_name),
            config,
            kind_binary,
            pulumi.ResourceOptions(parent=self),
        )
        kubeconfig = pulumi.Output.secret(self.cluster.kubeconfig)
        self.handle = ClusterHandle(
            cluster,
            self,
            _provider(name, kubeconfig, None, self, True),
            kubeconfig,
            self.cluster.context,
            self.cluster.internal_server,
        )
        self.register_outputs({"context": self.cluster.context})


def _kubeconfig_path(cluster: ClusterSpec) -> Path:
    assert cluster.existing is not None
    path = cluster.existing.kubeconfig_path or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    return Path(path or Path.home() / ".kube" / "config").expanduser()


def context_server(text: str, context: str) -> str:
    """The API server URL of `context` in a kubeconfig."""
    config = yaml.safe_load(text) or {}
    ctx = next(
        (c.get("context") or {} for c in config.get("contexts") or [] if c.get("name") == context),
        None,
    )
    if ctx is None:
        raise ValueError(f"no context {context!r} in the kubeconfig")
    cluster = next(
        (
            c.get("cluster") or {}
            for c in config.get("clusters") or []
            if c.get("name") == ctx.get("cluster")
        ),
        {},
    )
    return cluster.get("server", "")


class ExistingClusterComponent(pulumi.ComponentResource):
    def __init__(
        self, name: str, cluster: ClusterSpec, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("multikueue-fleet:cluster:Existing", name, None, opts)
        assert cluster.existing is not None
        path = _kubeconfig_path(cluster)
        if not path.exists():
            raise FileNotFoundError(
                f"cluster '{cluster.name}': kubeconfig {path} not found; set "
                f"{cluster.path}.existing.kubeconfigPath or KUBECONFIG"
            )
        context = cluster.existing.context
        try:
            # Only the chosen context: other edits of the user's file change nothing here.
            text = reduce_to_context(path.read_text(), context)
        except ValueError as exc:
            raise pulumi.RunError(
                f"cluster '{cluster.name}': kubeconfig {path}: {exc}; set "
                f"{cluster.path}.existing.context to one of its contexts"
            ) from exc
        server = cluster.existing.server or context_server(text, context)
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


class GkeClusterComponent(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        spec: FleetSpec,
        cluster: ClusterSpec,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("multikueue-fleet:cluster:Gke", name, None, opts)
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
        )
        self.register_outputs({"endpoint": server})


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
