"""The project's own Kubernetes objects as one Pulumi resource each, so that a preview lists
every object by cluster, kind and name with its fields, even on a new stack.

Why not a yaml/v2 ConfigGroup: it is a component the kubernetes provider expands in its
`Construct`, and only once it can reach the cluster (pulumi/pulumi-kubernetes v4.32.0,
provider/pkg/provider/provider_construct.go refuses an unreachable cluster;
provider/pkg/provider/yaml/v2/configgroup.go registers the children inside an apply of
its inputs), so a preview on a new stack, where every kubeconfig is unknown, shows the
group and none of its objects. And a group whose object list is an Output becomes one
unknown value whenever any input of that Output is unknown.

Here the list of objects and every field that does not depend on a deploy-time value
(an image digest, a token, an endpoint) is plain data; only those fields are Outputs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pulumi

from components.fleet_objects import APPLY_ORDER, object_key

Build = Callable[[Mapping[str, str]], list[dict[str, Any]]]


def resource_type(obj: Mapping[str, Any]) -> str:
    """The kubernetes provider's type token for an object: `kubernetes:<group>/<version>:<Kind>`,
    with `core` for the core group (the form pulumi_kubernetes' own classes register)."""
    api_version = obj["apiVersion"]
    group_version = api_version if "/" in api_version else f"core/{api_version}"
    return f"kubernetes:{group_version}:{obj['kind']}"


class KubeObject(pulumi.CustomResource):
    """One Kubernetes object, any kind, handed to the cluster's kubernetes provider as is."""

    def __init__(self, name: str, obj: Mapping[str, Any], opts: pulumi.ResourceOptions) -> None:
        extra = pulumi.ResourceOptions(
            # As pulumi_kubernetes' Secret class does: what the API server returns stays secret.
            additional_secret_outputs=["data", "stringData"] if obj["kind"] == "Secret" else None
        )
        super().__init__(
            resource_type(obj), name, dict(obj), pulumi.ResourceOptions.merge(opts, extra)
        )


def _at(node: Any, path: Sequence[Any]) -> Any:
    for step in path:
        node = node[step]
    return node


def _same_shape(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys()
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b)
    return False


def with_deploy_time_values(
    build: Build, values: Mapping[str, pulumi.Input[str]]
) -> list[dict[str, Any]]:
    """`build(values)` with the list of objects and each field that none of `values` reaches
    known now, and each field that does as an Output of exactly the values it depends on
    (found by building once per value with that value changed). A field fed by a secret
    value is secret; an unknown value makes only the fields it reaches unknown."""
    keys = sorted(values)
    filler = {k: f"<{k}>" for k in keys}
    base = build(filler)
    variants = {k: build({**filler, k: f"<{k} changed>"}) for k in keys}
    for k, objs in variants.items():
        if [object_key(o) for o in objs] != [object_key(o) for o in base]:
            raise ValueError(f"the objects built depend on the value of {k}, not only their fields")

    def leaf(index: int, path: tuple[Any, ...], deps: list[str]) -> pulumi.Output[Any]:
        def value(got: list[str]) -> Any:
            return _at(build({**filler, **dict(zip(deps, got, strict=True))})[index], path)

        return pulumi.Output.all(*[values[k] for k in deps]).apply(value)

    def walk(index: int, path: tuple[Any, ...], node: Any) -> Any:
        others = {k: _at(variants[k][index], path) for k in keys}
        deps = [k for k in keys if others[k] != node]
        if not deps:
            return node
        if all(_same_shape(node, others[k]) for k in deps):
            if isinstance(node, dict):
                return {key: walk(index, (*path, key), v) for key, v in node.items()}
            return [walk(index, (*path, i), v) for i, v in enumerate(node)]
        return leaf(index, path, deps)

    return [walk(i, (), obj) for i, obj in enumerate(base)]


class ObjectSet(pulumi.ComponentResource):
    """A unit of the project's objects on one cluster (its queues, a worker's access, the
    manager's MultiKueue objects, the dispatcher), each object its own resource.

    Order inside the set follows fleet_objects.APPLY_ORDER: each object depends on every
    object of the nearest earlier kind in the set (namespaces and CRDs first, a token Secret
    after its ServiceAccount, LocalQueues after ClusterQueues), so creation runs in that
    order and deletion in the reverse one. `known` maps an object key to a resource already
    registered on the same cluster (a shared Namespace), which is depended on, not
    registered twice. `previously` names where an object was registered before (an alias),
    so a deployed stack adopts it in place instead of creating it again."""

    def __init__(
        self,
        typ: str,
        name: str,
        cluster: str,
        objects: Sequence[Mapping[str, Any]],
        object_opts: pulumi.ResourceOptions,
        known: dict[str, KubeObject],
        opts: pulumi.ResourceOptions | None = None,
        previously: Callable[[Mapping[str, Any]], list[pulumi.Alias]] | None = None,
    ) -> None:
        super().__init__(f"multikueue-fleet:objects:{typ}", name, None, opts)
        rank = {kind: i for i, kind in enumerate(APPLY_ORDER)}
        ordered = sorted(objects, key=lambda o: rank.get(o["kind"], len(rank)))
        self.resources: dict[str, KubeObject] = {}
        earlier: list[pulumi.Resource] = []
        current: list[pulumi.Resource] = []
        current_rank: int | None = None
        for obj in ordered:
            key = object_key(obj)
            obj_rank = rank.get(obj["kind"], len(rank))
            if obj_rank != current_rank:
                earlier, current, current_rank = (current or earlier), [], obj_rank
            if key in known:
                current.append(known[key])
                continue
            after: list[pulumi.Resource] = list(earlier)
            namespace = obj["metadata"].get("namespace")
            if namespace and f"Namespace {namespace}" in known:
                after.append(known[f"Namespace {namespace}"])
            resource = KubeObject(
                f"{cluster}:{key.replace(' ', ':')}",
                obj,
                pulumi.ResourceOptions.merge(
                    object_opts,
                    pulumi.ResourceOptions(
                        parent=self,
                        depends_on=after,
                        aliases=previously(obj) if previously else None,
                    ),
                ),
            )
            known[key] = self.resources[key] = resource
            current.append(resource)
        self.register_outputs({})
