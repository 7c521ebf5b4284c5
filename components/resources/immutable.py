"""The fields Kueue refuses to change (components/checks/immutable.py, action "refuse"),
checked by `pulumi preview`, `pulumi up` and the CI driver against what is deployed,
before anything on the cluster changes: `render --diff` says it too, but only where someone
runs it and reads its exit code.

One resource per cluster holds, as its inputs, the refused fields of every object the fleet
writes there (Topology levels, a topology flavor's node labels, tolerations and topology,
AdmissionCheck controller). The engine hands its `check` the inputs of the last deployment
beside the new ones (pulumi v3.272.0 sdk/python/lib/pulumi/dynamic/__main__.py Check:
`olds` are the resource's inputs from the state), so a change to one of them fails the
check with the config path, why and the way around it; every object on that cluster waits
for this resource, so nothing is applied first. A check failure without a property is
printed as one line, `<type> resource '<name>' has a problem: <reason>` (pulumi
pkg/resource/deploy/step_generator.go issueCheckFailures, diag.GetResourceInvalidError).

What is deployed is read from the cluster itself when its kubeconfig is known and it
answers: the state's inputs are only what the last `up` meant to apply. This resource is
recorded before the objects after it are applied, so after an `up` that failed there (a
refused change on the first `up` of a stack deployed before this resource existed, when
there are no inputs to compare with; an API server that went away half-way) the state is
ahead of the cluster, and reverting to what the cluster holds would be refused with no
way around it. The state's inputs are the fallback only: a cluster not created yet (its
kubeconfig unknown in a preview) or not answering."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pulumi
from pulumi.dynamic import CheckFailure, CheckResult, CreateResult, DiffResult, ResourceProvider

from components.checks.immutable import IMMUTABLE, Change, config_path, immutable_changes
from components.model.spec import FleetSpec

_KINDS = {i.kind for i in IMMUTABLE if i.action == "refuse"}
# The kinds' resources: all cluster-scoped, in Kueue's group (kueue v0.19.2
# config/components/crd/bases/kueue.x-k8s.io_{topologies,resourceflavors,admissionchecks}.yaml).
KUEUE_GROUP, KUEUE_VERSION = "kueue.x-k8s.io", "v1beta2"
_PLURALS = {
    "Topology": "topologies",
    "ResourceFlavor": "resourceflavors",
    "AdmissionCheck": "admissionchecks",
}
# One read per guarded object; a cluster that does not answer within this is read from the
# state instead.
READ_TIMEOUT = 10


def _cut(obj: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """An object cut down to its refused fields (and the field that makes them so), keyed
    as immutable_changes keys it."""
    kind = obj["kind"]
    fields = {i.field for i in IMMUTABLE if i.kind == kind and i.action == "refuse"}
    fields |= {i.only_once for i in IMMUTABLE if i.kind == kind and i.only_once}
    meta = {k: v for k, v in obj["metadata"].items() if k in ("name", "namespace")}
    spec_part = {k: v for k, v in (obj.get("spec") or {}).items() if k in fields}
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{kind} {where}{meta['name']}", {"kind": kind, "metadata": meta, "spec": spec_part}


def guarded_fields(spec: FleetSpec, objects: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The inputs: per object of a refused kind, the object cut down to its refused fields
    (what immutable_changes compares), and per field the config path that writes it."""
    kept: dict[str, Any] = {}
    paths: dict[str, str] = {}
    for obj in objects:
        if obj.get("kind") not in _KINDS:
            continue
        key, cut = _cut(obj)
        kept[key] = cut
        for rule in IMMUTABLE:
            if rule.kind == obj["kind"] and rule.action == "refuse":
                paths[f"{key} {rule.field}"] = config_path(spec, Change(key, rule))
    return {"objects": kept, "paths": paths}


def refusals(olds: Mapping[str, Any], news: Mapping[str, Any]) -> list[str]:
    """One line per refused change from the deployed inputs `olds` to `news`."""
    old_objects = list((olds.get("objects") or {}).values())
    new_objects = list((news.get("objects") or {}).values())
    paths = news.get("paths") or {}
    lines = []
    for change in immutable_changes(old_objects, new_objects):
        if change.rule.action != "refuse":
            continue
        where = paths.get(f"{change.key} {change.rule.field}", change.key)
        lines.append(
            f"{where}: {change.key}: spec.{change.rule.field} cannot change from what is "
            f"deployed: {change.rule.effect}; fix: {change.rule.fix}"
        )
    return lines


def live_objects(api: Any, news: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the cluster holds of the objects `news` guards, cut as the inputs are ({"objects":
    ...}, what `refusals` compares with); one it does not have is left out (nothing deployed
    to refuse a change of). None when the cluster cannot say (unreachable, refused)."""
    from kubernetes.client.exceptions import ApiException

    found: dict[str, Any] = {}
    for obj in (news.get("objects") or {}).values():
        plural = _PLURALS.get(obj.get("kind"))
        if plural is None:
            continue
        try:
            live = api.get_cluster_custom_object(
                KUEUE_GROUP,
                KUEUE_VERSION,
                plural,
                obj["metadata"]["name"],
                _request_timeout=READ_TIMEOUT,
            )
        except ApiException as e:
            if e.status == 404:  # not there (or Kueue's CRDs not yet): nothing deployed
                continue
            return None
        except Exception:  # noqa: BLE001 - unreachable, timed out, bad credentials
            return None
        live_key, cut = _cut({**live, "kind": obj["kind"]})
        found[live_key] = cut
    return {"objects": found}


def _cluster_api(news: Mapping[str, Any]) -> Any | None:
    """A client for the cluster the inputs name, or None when its kubeconfig is not known
    (a cluster being created: unknown in a preview) or not given."""
    from pulumi.runtime import rpc

    kubeconfig = news.get("kubeconfig")
    # Unknown in a preview (rpc.UNKNOWN, itself a string), or absent.
    if not isinstance(kubeconfig, str) or not kubeconfig or kubeconfig == rpc.UNKNOWN:
        return None
    try:
        import yaml
        from kubernetes import client, config

        context = news.get("context")
        usable = isinstance(context, str) and context and context != rpc.UNKNOWN
        return client.CustomObjectsApi(
            config.new_client_from_config_dict(
                yaml.safe_load(kubeconfig), context=context if usable else None
            )
        )
    except Exception:  # noqa: BLE001 - a kubeconfig the client cannot use: the state
        return None


def deployed(olds: Mapping[str, Any], news: Mapping[str, Any]) -> Mapping[str, Any]:
    """What a change is compared with: the cluster's objects when it answers, else the
    inputs of the last deployment."""
    api = _cluster_api(news)
    live = live_objects(api, news) if api is not None else None
    return live if live is not None else olds


class ImmutableFieldsProvider(ResourceProvider):
    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        lines = refusals(deployed(olds or {}, news), news)
        return CheckResult(news, [CheckFailure("", line) for line in lines])

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=str(props.get("cluster") or "fleet"), outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # Recorded anew whenever the fields change (what is allowed to change, and a first
        # deployment of an object): an update in place, never a replacement.
        keys = ("objects", "paths", "cluster")
        return DiffResult(changes=any(olds.get(k) != news.get(k) for k in keys))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> Any:
        from pulumi.dynamic import UpdateResult

        return UpdateResult(outs=news)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Nothing exists outside the state."""


class ImmutableFields(pulumi.dynamic.Resource, module="multikueue-fleet", name="ImmutableFields"):
    def __init__(
        self,
        name: str,
        cluster: str,
        fields: dict[str, Any],
        opts: pulumi.ResourceOptions,
        kubeconfig: pulumi.Input[str] | None = None,
        context: pulumi.Input[str] | None = None,
    ) -> None:
        # The kubeconfig is how the check reads what is deployed; not compared by `diff`
        # (new credentials are no change to record).
        props: dict[str, Any] = {"cluster": cluster, **fields}
        if kubeconfig is not None:
            props["kubeconfig"] = kubeconfig
            props["context"] = context
        super().__init__(
            ImmutableFieldsProvider(),
            name,
            props,
            pulumi.ResourceOptions.merge(
                opts, pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"])
            ),
        )
