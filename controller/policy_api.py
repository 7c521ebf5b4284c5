"""DispatchPolicy: the cluster-scoped resource users declare dispatch policies with.

A policy names the ClusterQueues it governs (none: the default for every ClusterQueue no
other policy names), a cluster label selector, a strategy, how many clusters to nominate,
when to widen, and what to do when nothing fits. The CRD built here is what the stack
installs; `parse` reads one object back, refusing it with a readable reason when wrong.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from controller.model import MAX_NOMINATIONS, STRATEGIES, WHEN_NOTHING_FITS, Policy

GROUP = "dispatch.multikueue-fleet.io"
VERSION = "v1alpha1"
KIND = "DispatchPolicy"
PLURAL = "dispatchpolicies"
_DURATION = re.compile(r"^(\d+(\.\d+)?(ms|s|m|h))+$")
_UNIT = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}


class InvalidPolicy(ValueError):
    pass


def seconds(text: str) -> float:
    if not _DURATION.match(text):
        raise InvalidPolicy(f"'{text}' is not a duration like 30s, 5m or 1h")
    return sum(float(n) * _UNIT[u] for n, _, u in re.findall(r"(\d+(\.\d+)?)(ms|s|m|h)", text))


def crd() -> dict[str, Any]:
    """The CustomResourceDefinition, with a schema that rejects bad values at the API."""
    spec_schema = {
        "type": "object",
        "properties": {
            "clusterQueues": {
                "type": "array",
                "items": {"type": "string"},
                "description": "ClusterQueues governed; empty: the default "
                "policy for every ClusterQueue not named "
                "by another policy.",
            },
            "clusterSelector": {
                "type": "object",
                "properties": {
                    "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}
                },
                "description": "Only workers whose MultiKueueCluster has these labels.",
            },
            "strategy": {"type": "string", "enum": list(STRATEGIES), "default": "MostFreeQuota"},
            "clustersToNominate": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_NOMINATIONS,
                "default": 1,
            },
            "widenAfter": {
                "type": "string",
                "pattern": _DURATION.pattern,
                "default": "5m",
                "description": "Nominate more clusters after waiting this long.",
            },
            "inventory": {
                "type": "object",
                "required": ["multiKueueConfig"],
                "description": "Opt-in: ClusterProfiles selected here join this MultiKueueConfig.",
                "properties": {
                    "multiKueueConfig": {"type": "string"},
                    "selector": {
                        "type": "object",
                        "properties": {
                            "matchLabels": {
                                "type": "object",
                                "additionalProperties": {"type": "string"},
                            }
                        },
                    },
                    "accessProvider": {"type": "string"},
                    "requiredProperties": {"type": "array", "items": {"type": "string"}},
                    "orderBy": {"type": "string", "default": "name"},
                    "drainTimeout": {
                        "type": "string",
                        "pattern": _DURATION.pattern,
                        "default": "1h",
                    },
                },
            },
            "whenNothingFits": {
                "type": "string",
                "enum": list(WHEN_NOTHING_FITS),
                "default": "WaitOnBest",
            },
        },
    }
    condition = {
        "type": "object",
        "required": ["type", "status"],
        "properties": {
            k: {"type": "string"}
            for k in ("type", "status", "reason", "message", "lastTransitionTime")
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
        "widenAfter": f"{int(policy.widen_after_seconds)}s",
        "whenNothingFits": policy.when_nothing_fits,
    }
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
    """The policy and the ClusterQueues it names; InvalidPolicy says what is wrong."""
    name = (obj.get("metadata") or {}).get("name", "")
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise InvalidPolicy("spec must be a mapping")
    strategy = spec.get("strategy", "MostFreeQuota")
    if strategy not in STRATEGIES:
        raise InvalidPolicy(f"strategy '{strategy}' is not one of {', '.join(STRATEGIES)}")
    fallback = spec.get("whenNothingFits", "WaitOnBest")
    if fallback not in WHEN_NOTHING_FITS:
        raise InvalidPolicy(
            f"whenNothingFits '{fallback}' is not one of {', '.join(WHEN_NOTHING_FITS)}"
        )
    count = spec.get("clustersToNominate", 1)
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_NOMINATIONS:
        raise InvalidPolicy(f"clustersToNominate must be 1 to {MAX_NOMINATIONS}, got {count!r}")
    selector = (spec.get("clusterSelector") or {}).get("matchLabels") or {}
    if not isinstance(selector, Mapping) or not all(isinstance(v, str) for v in selector.values()):
        raise InvalidPolicy("clusterSelector.matchLabels must map label keys to strings")
    queues = spec.get("clusterQueues") or []
    if not isinstance(queues, list) or not all(isinstance(q, str) for q in queues):
        raise InvalidPolicy("clusterQueues must be a list of names")
    from controller.inventory import parse_inventory  # the inventory builds on this module

    parse_inventory(name, spec.get("inventory"))  # refused here, reported as Ready=False
    policy = Policy(
        name=name,
        cluster_selector=dict(selector),
        strategy=strategy,
        clusters_to_nominate=count,
        widen_after_seconds=seconds(str(spec.get("widenAfter", "5m"))),
        when_nothing_fits=fallback,
    )
    return policy, tuple(queues)


@dataclass(frozen=True)
class PolicySet:
    """Which policy governs each ClusterQueue, and what is wrong with the others."""

    by_queue: dict[str, Policy]
    default: Policy | None
    problems: dict[str, str]  # policy name -> why it is not (fully) used

    def for_queue(self, cluster_queue: str, fallback: Policy) -> Policy:
        return self.by_queue.get(cluster_queue) or self.default or fallback


def select(objects: Iterable[Mapping[str, Any]]) -> PolicySet:
    """Policies in name order; the first to name a ClusterQueue governs it, and the first
    without names is the default. Losers of a tie are reported, never silently ignored."""
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
