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

from components.checks.immutable import replacement_options
from components.objects.fleet import APPLY_ORDER, object_key

Build = Callable[[Mapping[str, str]], list[dict[str, Any]]]


def resource_type(obj: Mapping[str, Any]) -> str:
    """The kubernetes provider's type token for an object: `kubernetes:<group>/<version>:<Kind>`,
    with `core` for the core group (the form pulumi_kubernetes' own classes register)."""
    api_version = obj["apiVersion"]
    group_version = api_version if "/" in api_version else f"core/{api_version}"
    return f"kubernetes:{group_version}:{obj['kind']}"


# A Patch resource takes the object as it is on the cluster: it is applied server-side
# whether the object exists or not, and on delete it only gives up the fields it set, never
# deleting the object (pulumi-kubernetes v4.32.0 provider/pkg/await/await.go: Creation
# applies for a patch resource, lines 190-206; Deletion relinquishes, lines 958-962).
PATCH_FORCE = "pulumi.com/patchForce"


def token_account(obj: Mapping[str, Any]) -> str | None:
    """The key of the ServiceAccount a token Secret belongs to, None for another object.
    Such a Secret is replaced whenever its ServiceAccount is: a legacy token's claims are
    the ServiceAccount's name and UID, the Secret's name and the namespace, not the
    Secret's UID (k8s.io/kubernetes v1.36 pkg/serviceaccount/legacy.go, LegacyClaims), so
    the same Secret made again carries the very same token; only a new ServiceAccount (a
    new UID) makes a new one, and the old one is refused from then on (the legacy
    validator checks the UID)."""
    if obj.get("kind") != "Secret" or obj.get("type") != "kubernetes.io/service-account-token":
        return None
    meta = obj.get("metadata") or {}
    name = (meta.get("annotations") or {}).get("kubernetes.io/service-account.name")
    return f"ServiceAccount {meta.get('namespace')}/{name}" if name else None


class KubeObject(pulumi.CustomResource):
    """One Kubernetes object, any kind, handed to the cluster's kubernetes provider as is;
    with `patch`, as a Patch resource of its kind (an object the stack shares with whoever
    else made it: never deleted, adopted when it is already there)."""

    def __init__(
        self,
        name: str,
        obj: Mapping[str, Any],
        opts: pulumi.ResourceOptions,
        patch: bool = False,
    ) -> None:
        typ = resource_type(obj)
        if patch:
            meta = dict(obj["metadata"])
            # Its fields may be owned by another manager already (or by this stack's own
            # resource of the object's kind, before): taking them over is the point.
            meta["annotations"] = {**(meta.get("annotations") or {}), PATCH_FORCE: "true"}
            obj = {**obj, "metadata": meta}
        extra = pulumi.ResourceOptions(
            # As pulumi_kubernetes' Secret class does: what the API server returns stays secret.
            additional_secret_outputs=["data", "stringData"] if obj["kind"] == "Secret" else None,
            # A change to an immutable field replaces the object (components/checks/immutable.py).
            replace_on_changes=(replacement_options(typ) or {}).get("replace_on_changes"),
            # Every object has a fixed name, so any replacement (an immutable field, a user's
            # `pulumi up --replace`, a Secret rotated with its token) deletes it first: the
            # engine's default, create then delete, applies the "new" object over the old one
            # and then deletes it, which the real engine showed for a token Secret rotated
            # (tests/real/test_real_pulumi.py): the Secret gone, its token revoked.
            delete_before_replace=True,
            # A stack that registered the object with its own kind adopts it as the patch.
            aliases=[pulumi.Alias(type_=typ)] if patch else None,
        )
        super().__init__(
            f"{typ}Patch" if patch else typ,
            name,
            dict(obj),
            pulumi.ResourceOptions.merge(opts, extra),
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


def _strings(node: Any) -> set[str]:
    if isinstance(node, str):
        return {node}
    if isinstance(node, Mapping):
        return {t for v in node.values() for t in _strings(v)}
    if isinstance(node, list):
        return {t for v in node for t in _strings(v)}
    return set()  # numbers, booleans, and Outputs (deploy-time values name no object)


def mentions(obj: Mapping[str, Any]) -> set[str]:
    """The strings an object holds outside its own identity (body and annotations)."""
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    return _strings(body) | _strings(obj["metadata"].get("annotations") or {})


def refers_to(obj: Mapping[str, Any], other: Mapping[str, Any], mentioned: set[str]) -> bool:
    """Whether `obj` needs `other` to exist first: its namespace, the CRD of its kind, or an
    object whose name it mentions (`mentioned`, from `mentions`): a LocalQueue's
    ClusterQueue, a ClusterQueue's flavors and checks, a token Secret's ServiceAccount, a
    binding's role and subjects, a MultiKueueCluster's Secret, a Deployment's
    ServiceAccount and ConfigMap. A name that happens to match only adds an edge toward an
    object registered earlier, never a cycle."""
    meta, other_meta = obj["metadata"], other["metadata"]
    if other["kind"] == "Namespace":
        return meta.get("namespace") == other_meta["name"]
    if other["kind"] == "CustomResourceDefinition":
        spec = other.get("spec") or {}
        group = obj["apiVersion"].rpartition("/")[0]
        return spec.get("group") == group and (spec.get("names") or {}).get("kind") == obj["kind"]
    if meta.get("namespace") and other_meta.get("namespace") not in (None, meta["namespace"]):
        return False  # a namespaced object names objects of its own namespace
    return other_meta["name"] in mentioned


class ObjectSet(pulumi.ComponentResource):
    """A unit of the project's objects on one cluster (its queues, a worker's access, the
    manager's MultiKueue objects, the dispatcher), each object its own resource.

    Objects are registered in the order of objects/fleet.py's APPLY_ORDER, and each depends on
    the objects registered before it on the same cluster that it refers to (`refers_to`),
    so creation runs in that order and deletion in the reverse one (a LocalQueue before its
    ClusterQueue, a token Secret after its ServiceAccount), with one edge per reference
    rather than one per pair. `known` maps an object key to what is already registered on
    the cluster: an object two sets need (a shared Namespace) is depended on, not registered
    twice. `previously` names where an object was registered before (an alias), so a
    deployed stack adopts it in place instead of creating it again. Objects of
    `patch_kinds` are registered as Patch resources (KubeObject)."""

    def __init__(
        self,
        typ: str,
        name: str,
        cluster: str,
        objects: Sequence[Mapping[str, Any]],
        object_opts: pulumi.ResourceOptions,
        known: dict[str, tuple[Mapping[str, Any], KubeObject]],
        opts: pulumi.ResourceOptions | None = None,
        previously: Callable[[Mapping[str, Any]], list[pulumi.Alias]] | None = None,
        patch_kinds: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__(f"multikueue-fleet:objects:{typ}", name, None, opts)
        rank = {kind: i for i, kind in enumerate(APPLY_ORDER)}
        ordered = sorted(objects, key=lambda o: rank.get(o["kind"], len(rank)))
        self.resources: dict[str, KubeObject] = {}
        for obj in ordered:
            key = object_key(obj)
            if key in known:
                continue
            mentioned = mentions(obj)
            after = [res for other, res in known.values() if refers_to(obj, other, mentioned)]
            account = token_account(obj)
            resource = KubeObject(
                f"{cluster}:{key.replace(' ', ':')}",
                obj,
                pulumi.ResourceOptions.merge(
                    object_opts,
                    pulumi.ResourceOptions(
                        parent=self,
                        depends_on=after,
                        aliases=previously(obj) if previously else None,
                        replace_with=[known[account][1]] if account in known else None,
                    ),
                ),
                patch=obj["kind"] in patch_kinds,
            )
            known[key] = (obj, resource)
            self.resources[key] = resource
        self.register_outputs({})
