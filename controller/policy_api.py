"""DispatchPolicy: the cluster-scoped resource users declare dispatch policies with.

A policy names the ClusterQueues it governs (none: the default for every ClusterQueue no
other policy names), a cluster label selector, a strategy, how many clusters to nominate,
when to widen, and what to do when nothing fits. The CRD built here is what the stack
installs; `parse` reads one object back, refusing it with a readable reason when wrong.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import AfterValidator, Field, ValidationError

from controller.model import MAX_NOMINATIONS, STRATEGIES, WHEN_NOTHING_FITS, Policy
from controller.typed import (
    LABEL_KEY_PATTERN,
    LABEL_KEY_PREFIX_PATTERN,
    LABEL_VALUE_PATTERN,
    OBJECT_NAME,
    SUBDOMAIN_PATTERN,
    DnsSubdomain,
    LabelKey,
    LabelValue,
    Strict,
    label_key,
    problems,
)

GROUP = "dispatch.multikueue-fleet.io"
VERSION = "v1alpha1"
KIND = "DispatchPolicy"
# What a spec leaves out: the policy's own defaults (controller/model.py Policy).
DEFAULTS = Policy()
PLURAL = "dispatchpolicies"
# Durations as the controller reads them: numbers with units ms, s, m or h, one after the
# other ("1h30m", "0.5s"). The CRD's pattern is this one, and so is the stack's
# `dispatcher.policy` type (components/model/fieldtypes.py), so that no duration valid in
# one is refused by another. Go's own syntax (ns, us, a bare "0", a sign) is not accepted.
DURATION_PATTERN = r"^(\d+(\.\d+)?(ms|s|m|h))+$"
DURATION_FIX = "a duration like 30s, 5m or 1h30m (units ms, s, m, h)"
_DURATION = re.compile(DURATION_PATTERN.removeprefix("^").removesuffix("$"))
_UNIT = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
# A selector's labels: bounded, so the API server's cost estimate of the CEL rule that
# checks their keys stays within its budget (one regular expression per key).
MAX_SELECTOR_LABELS = 16


class InvalidPolicy(ValueError):
    """A DispatchPolicy spec (or the settings' defaultPolicy) that cannot be used: one line
    per mistake, each naming the field, what is wrong and the fix."""

    def __init__(self, lines: list[str] | str) -> None:
        self.lines = [lines] if isinstance(lines, str) else lines
        super().__init__("\n".join(self.lines))


def is_duration(text: str) -> bool:
    # fullmatch: "5m\n" is refused, as the API server's (Go) `$` refuses it.
    return _DURATION.fullmatch(text) is not None


def seconds(text: str) -> float:
    if not is_duration(text):
        raise ValueError(f"'{text}' is not {DURATION_FIX}")
    return sum(float(n) * _UNIT[u] for n, _, u in re.findall(r"(\d+(\.\d+)?)(ms|s|m|h)", text))


def _duration(text: str) -> str:
    seconds(text)
    return text


def _one_of(choices: tuple[str, ...]) -> AfterValidator:
    def check(value: str) -> str:
        if value not in choices:
            raise ValueError(f"not one of {', '.join(choices)}")
        return value

    return AfterValidator(check)


def _order_by(value: str) -> str:
    if value in ("name", "created"):
        return value
    if not value.startswith("label:"):
        raise ValueError("not name, created or label:<key>")
    label_key(value.removeprefix("label:"))
    return value


def duration_text(secs: float) -> str:
    """`secs` in the duration syntax, to the millisecond."""
    return f"{secs:.3f}".rstrip("0").rstrip(".") + "s"


Duration = Annotated[str, AfterValidator(_duration)]

# What a right value looks like, per key: the fix each error message gives.
FIXES = {
    "strategy": f"one of {', '.join(STRATEGIES)}",
    "whenNothingFits": f"one of {', '.join(WHEN_NOTHING_FITS)}",
    "clustersToNominate": f"a whole number from 1 to {MAX_NOMINATIONS} (Kueue's limit)",
    "widenAfter": DURATION_FIX,
    "hedgeClusters": f"a whole number from 1 (off) to {MAX_NOMINATIONS} (Kueue's limit)",
    "hedgeSharePercent": "a whole number from 1 to 100",
    "drainTimeout": DURATION_FIX,
    "clusterQueues": f"a list of ClusterQueue names, each {OBJECT_NAME}",
    "matchLabels": f"a mapping of at most {MAX_SELECTOR_LABELS} label keys to label values "
    "(quote numbers and booleans)",
    "multiKueueConfig": f"the MultiKueueConfig the clusters join ({OBJECT_NAME})",
    "orderBy": "name, created or label:<key>",
    "accessProvider": "the name of a ClusterProfile access provider",
    "requiredProperties": "a list of ClusterProfile property names",
}


class LabelSelector(Strict):
    match_labels: (
        Annotated[dict[LabelKey, LabelValue], Field(max_length=MAX_SELECTOR_LABELS)] | None
    ) = None


class InventoryFields(Strict):
    """`spec.inventory` of a DispatchPolicy."""

    multi_kueue_config: DnsSubdomain
    selector: LabelSelector | None = None
    access_provider: str | None = None
    required_properties: list[str] | None = None
    order_by: Annotated[str, AfterValidator(_order_by)] = "name"
    drain_timeout: Duration = "1h"


class PolicySpec(Strict):
    """`spec` of a DispatchPolicy, and the settings file's `defaultPolicy`."""

    cluster_queues: list[DnsSubdomain] | None = None
    cluster_selector: LabelSelector | None = None
    strategy: Annotated[str, _one_of(STRATEGIES)] = DEFAULTS.strategy
    clusters_to_nominate: Annotated[int, Field(ge=1, le=MAX_NOMINATIONS)] = 1
    widen_after: Duration = "5m"
    when_nothing_fits: Annotated[str, _one_of(WHEN_NOTHING_FITS)] = "WaitOnBest"
    hedge_clusters: Annotated[int, Field(ge=1, le=MAX_NOMINATIONS)] = DEFAULTS.hedge_clusters
    hedge_share_percent: Annotated[int, Field(ge=1, le=100)] = round(DEFAULTS.hedge_share * 100)
    inventory: InventoryFields | None = None

    def policy(self, name: str) -> Policy:
        return Policy(
            name=name,
            cluster_selector=dict((self.cluster_selector or LabelSelector()).match_labels or {}),
            strategy=self.strategy,
            clusters_to_nominate=self.clusters_to_nominate,
            widen_after_seconds=seconds(self.widen_after),
            when_nothing_fits=self.when_nothing_fits,
            hedge_clusters=self.hedge_clusters,
            hedge_share=self.hedge_share_percent / 100,
        )


@dataclass(frozen=True)
class InventorySpec:
    policy: str
    config: str  # the MultiKueueConfig the clusters join
    selector: dict[str, str] = field(default_factory=dict)
    access_provider: str | None = None
    required_properties: tuple[str, ...] = ()
    order_by: str = "name"  # "name", "created", or "label:<key>"
    drain_timeout_seconds: float = 3600.0


def _inventory_spec(policy: str, raw: InventoryFields) -> InventorySpec:
    return InventorySpec(
        policy=policy,
        config=raw.multi_kueue_config,
        selector=dict((raw.selector or LabelSelector()).match_labels or {}),
        access_provider=raw.access_provider,
        required_properties=tuple(raw.required_properties or ()),
        order_by=raw.order_by,
        drain_timeout_seconds=seconds(raw.drain_timeout),
    )


def parse_inventory(policy: str, raw: Any) -> InventorySpec | None:
    """The policy's `spec.inventory`, None when absent; InvalidPolicy says what is wrong."""
    if raw is None:
        return None
    try:
        fields = InventoryFields.model_validate(raw)
    except ValidationError as exc:
        where = f"DispatchPolicy {policy}: spec.inventory"
        raise InvalidPolicy(problems(exc, InventoryFields, where, FIXES)) from None
    return _inventory_spec(policy, fields)


def _match_labels() -> dict[str, Any]:
    """A label selector's matchLabels: label keys (CEL, as a structural schema cannot
    constrain a map's keys) to label values, at most MAX_SELECTOR_LABELS of them."""
    key_ok = (
        f"k.matches(r'{LABEL_KEY_PATTERN}') && "
        f"(!k.contains('/') || k.matches(r'{LABEL_KEY_PREFIX_PATTERN}'))"
    )
    return {
        "type": "object",
        "maxProperties": MAX_SELECTOR_LABELS,
        "additionalProperties": {
            "type": "string",
            "maxLength": 63,
            "pattern": LABEL_VALUE_PATTERN,
        },
        "x-kubernetes-validations": [
            {
                "rule": f"self.all(k, {key_ok})",
                "message": "every key must be a label key: an optional DNS subdomain prefix "
                "of at most 253 characters and '/', then a name of at most 63 letters, "
                "digits, '-', '_' and '.'",
            }
        ],
    }


def _selector() -> dict[str, Any]:
    """A selector holding matchLabels only. Declared as a map with one allowed key rather
    than an object with one property: a structural schema prunes unknown fields without a
    word, so the stack file's shorthand (`clusterSelector: {zone: a}`) or a matchExpressions
    the controller does not read would be stored as an empty selector, which selects every
    worker. As a map, the server refuses them as the controller's parser does."""
    return {
        "type": "object",
        "maxProperties": 1,
        "additionalProperties": _match_labels(),
        "x-kubernetes-validations": [
            {
                "rule": "self.all(k, k == 'matchLabels')",
                "message": "a selector holds only matchLabels: write "
                "{matchLabels: {<label key>: <value>}}",
            }
        ],
    }


def _name() -> dict[str, Any]:
    return {"type": "string", "maxLength": 253, "pattern": SUBDOMAIN_PATTERN}


def _duration_schema(default: str, description: str = "") -> dict[str, Any]:
    schema = {"type": "string", "pattern": DURATION_PATTERN, "default": default}
    return {**schema, "description": description} if description else schema


def _order_by_schema() -> dict[str, Any]:
    label = LABEL_KEY_PATTERN.removeprefix("^")
    prefix = LABEL_KEY_PREFIX_PATTERN.removeprefix("^")
    return {
        "type": "string",
        "default": "name",
        "maxLength": len("label:") + 317,
        "x-kubernetes-validations": [
            {
                "rule": f"self == 'name' || self == 'created' || "
                f"(self.matches(r'^label:{label}') && "
                f"(!self.contains('/') || self.matches(r'^label:{prefix}')))",
                "message": "must be name, created or label:<label key>",
            }
        ],
    }


def crd() -> dict[str, Any]:
    """The CustomResourceDefinition, with a schema that rejects at the API server every
    value `parse` and `parse_inventory` would refuse (tests/unit/test_policy_values.py)."""
    spec_schema = {
        "type": "object",
        "properties": {
            "clusterQueues": {
                "type": "array",
                "items": _name(),
                "description": "ClusterQueues governed; empty: the default "
                "policy for every ClusterQueue not named "
                "by another policy.",
            },
            "clusterSelector": {
                **_selector(),
                "description": "Only workers whose MultiKueueCluster has these labels.",
            },
            "strategy": {"type": "string", "enum": list(STRATEGIES), "default": DEFAULTS.strategy},
            "clustersToNominate": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_NOMINATIONS,
                "default": 1,
            },
            "widenAfter": _duration_schema("5m", "Nominate more clusters after waiting this long."),
            "hedgeClusters": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_NOMINATIONS,
                "default": DEFAULTS.hedge_clusters,
                "description": "A workload that fits nowhere and needs hedgeSharePercent or "
                "more of every queue that could hold it is nominated to this many clusters "
                "at once; 1 is off.",
            },
            "hedgeSharePercent": {
                "type": "integer",
                "minimum": 1,
                "maximum": 100,
                "default": round(DEFAULTS.hedge_share * 100),
            },
            "inventory": {
                "type": "object",
                "required": ["multiKueueConfig"],
                "description": "Opt-in: ClusterProfiles selected here join this MultiKueueConfig.",
                "properties": {
                    "multiKueueConfig": _name(),
                    "selector": _selector(),
                    "accessProvider": {"type": "string"},
                    "requiredProperties": {"type": "array", "items": {"type": "string"}},
                    "orderBy": _order_by_schema(),
                    "drainTimeout": _duration_schema("1h"),
                },
            },
            "whenNothingFits": {
                "type": "string",
                "enum": list(WHEN_NOTHING_FITS),
                "default": "WaitOnBest",
            },
        },
    }
    # The status declares every field the controller writes (dispatcher.py: the Ready
    # condition and observedGeneration; inventory.py: the InventoryReady condition and
    # status.inventory): a real API server prunes what a structural schema does not declare,
    # and the drain start times in status.inventory must survive a controller restart.
    condition = {
        "type": "object",
        "required": ["type", "status"],
        "properties": {
            "type": {"type": "string"},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "reason": {"type": "string"},
            "message": {"type": "string"},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "observedGeneration": {"type": "integer", "minimum": 0},
        },
    }
    names = {"type": "array", "items": {"type": "string"}}
    inventory_status = {
        "type": "object",
        "description": "The inventory's last step: clusters joined, draining (since when) "
        "and left out over Kueue's limit of 20.",
        "properties": {
            "joined": names,
            "draining": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["cluster", "since"],
                    "properties": {
                        "cluster": {"type": "string"},
                        "since": {"type": "string", "format": "date-time"},
                    },
                },
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["cluster"],
            },
            "overLimit": names,
        },
    }
    status_schema = {
        "type": "object",
        "properties": {
            "observedGeneration": {"type": "integer"},
            "conditions": {
                "type": "array",
                "items": condition,
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
            },
            "inventory": inventory_status,
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Cluster",
            "names": {
                "kind": KIND,
                "plural": PLURAL,
                "singular": "dispatchpolicy",
                "shortNames": ["dpol"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": "Strategy", "type": "string", "jsonPath": ".spec.strategy"},
                        {
                            "name": "Ready",
                            "type": "string",
                            "jsonPath": ".status.conditions[?(@.type=='Ready')].status",
                        },
                    ],
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"spec": spec_schema, "status": status_schema},
                        }
                    },
                }
            ],
        },
    }


def policy_object(name: str, policy: Policy, cluster_queues: Iterable[str] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "strategy": policy.strategy,
        "clustersToNominate": policy.clusters_to_nominate,
        "widenAfter": duration_text(policy.widen_after_seconds),
        "whenNothingFits": policy.when_nothing_fits,
    }
    if (policy.hedge_clusters, policy.hedge_share) != (
        DEFAULTS.hedge_clusters,
        DEFAULTS.hedge_share,
    ):  # the defaults: left out
        spec["hedgeClusters"] = policy.hedge_clusters
        spec["hedgeSharePercent"] = round(policy.hedge_share * 100)
    if policy.cluster_selector:
        spec["clusterSelector"] = {"matchLabels": dict(policy.cluster_selector)}
    if cluster_queues:
        spec["clusterQueues"] = list(cluster_queues)
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {"name": name},
        "spec": spec,
    }


def parse(obj: Mapping[str, Any]) -> tuple[Policy, tuple[str, ...]]:
    """The policy and the ClusterQueues it names; InvalidPolicy says what is wrong, one line
    per mistake: "DispatchPolicy <name>: spec.<field>: <what>; fix: <how>"."""
    name = (obj.get("metadata") or {}).get("name", "")
    try:
        spec = PolicySpec.model_validate(obj.get("spec") or {})
    except ValidationError as exc:
        where = f"DispatchPolicy {name}: spec"
        raise InvalidPolicy(problems(exc, PolicySpec, where, FIXES)) from None
    return spec.policy(name), tuple(spec.cluster_queues or ())


@dataclass(frozen=True)
class PolicySet:
    """Which policy governs each ClusterQueue, and what is wrong with the others."""

    by_queue: dict[str, Policy]
    default: Policy | None
    problems: dict[str, str]  # policy name -> why it is not (fully) used

    def for_queue(self, cluster_queue: str, fallback: Policy) -> Policy:
        return self.by_queue.get(cluster_queue) or self.default or fallback


# The last selection, by the identity and version of every object it was made from: the
# dispatcher asks for the policy set on every decision, and parsing each policy through its
# typed model each time would cost tens of microseconds per policy per decision.
_last: tuple[tuple[tuple[str, str], ...], PolicySet] | None = None


def _versions(objects: list[Mapping[str, Any]]) -> tuple[tuple[str, str], ...] | None:
    """(uid, resourceVersion) of each object, None unless every object has both: a uid is
    unique across servers and the version changes with every write, so equal keys mean
    equal objects."""
    key = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        uid, version = meta.get("uid"), meta.get("resourceVersion")
        if not (isinstance(uid, str) and uid and isinstance(version, str) and version):
            return None
        key.append((uid, version))
    return tuple(key)


def select(objects: Iterable[Mapping[str, Any]]) -> PolicySet:
    """Policies in name order; the first to name a ClusterQueue governs it, and the first
    without names is the default. Losers of a tie are reported, never silently ignored."""
    global _last
    objects = list(objects)
    key = _versions(objects)
    if key is not None and _last is not None and _last[0] == key:
        return _last[1]
    chosen = _select(objects)
    if key is not None:
        _last = (key, chosen)
    return chosen


def _select(objects: list[Mapping[str, Any]]) -> PolicySet:
    by_queue: dict[str, Policy] = {}
    default: Policy | None = None
    problems: dict[str, str] = {}
    for obj in sorted(objects, key=lambda o: (o.get("metadata") or {}).get("name", "")):
        name = (obj.get("metadata") or {}).get("name", "")
        try:
            policy, queues = parse(obj)
        except InvalidPolicy as exc:
            problems[name] = str(exc)
            continue
        if not queues:
            if default is not None:
                problems[name] = (
                    f"policy {default.name} is already the default "
                    "(no clusterQueues); this one is not used"
                )
            else:
                default = policy
            continue
        taken = [q for q in queues if q in by_queue]
        for q in queues:
            by_queue.setdefault(q, policy)
        if taken:
            problems[name] = (
                f"ClusterQueues {', '.join(taken)} are already governed by "
                f"{', '.join(sorted({by_queue[q].name for q in taken}))}"
            )
    return PolicySet(by_queue, default, problems)
