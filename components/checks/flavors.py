"""ResourceFlavor and Topology rules, as Kueue v0.19.2 refuses them in the CRDs
(apis/kueue/v1beta2/resourceflavor_types.go, topology_types.go) and the webhook
(pkg/webhooks/resourceflavor_webhook.go): a flavor's topology defined and selecting nodes,
how many node labels, taints and tolerations, taints unique by key and effect; a
Topology's levels. Each rule's upstream reference is in kueue_rules.RULE_INVENTORY."""

from __future__ import annotations

from collections.abc import Iterator

from components.checks.rule import error
from components.model.problems import Problem, did_you_mean, key_path
from components.model.spec import FleetSpec


def topologies(spec: FleetSpec) -> Iterator[Problem]:
    for t in spec.queues.topologies:
        path = key_path(t.path, "levels")
        if not t.levels or len(t.levels) > 16:
            yield error(
                path,
                "a Topology needs 1 to 16 levels",
                "list node label keys from the widest domain to the narrowest",
            )
        elif len(set(t.levels)) != len(t.levels):
            yield error(path, "a level is listed twice", "list each node label once")
        if "kubernetes.io/hostname" in t.levels[:-1]:
            yield error(
                path,
                "kubernetes.io/hostname may only be the last level",
                "move it to the end of the list",
            )


def flavor_topologies(spec: FleetSpec) -> Iterator[Problem]:
    names = {t.name for t in spec.queues.topologies}
    for f in spec.queues.flavors:
        if f.topology is None:
            continue
        if f.topology not in names:
            yield error(
                key_path(f.path, "topology"),
                f"no Topology named '{f.topology}'",
                f"{did_you_mean(f.topology, names)}define it under queues.topologies",
            )
        if not f.node_labels:
            yield error(
                key_path(f.path, "nodeLabels"),
                "a flavor with a topology needs at least one node label",
                "add the node label that selects this flavor's nodes",
            )


# resourceflavor_types.go:65, :84, :98.
MAX_FLAVOR_ITEMS = 8
# topology_types.go:132: one less than a label key's 253 + "/" + 63.
MAX_TOPOLOGY_LEVEL_LENGTH = 316


def flavor_item_counts(spec: FleetSpec) -> Iterator[Problem]:
    """resourceflavor_types.go:65, :84, :98: at most 8 nodeLabels, 8 nodeTaints and 8
    tolerations per ResourceFlavor."""
    for f in spec.queues.flavors:
        for key, items in (
            ("nodeLabels", f.node_labels),
            ("nodeTaints", f.node_taints),
            ("tolerations", f.tolerations),
        ):
            if len(items) > MAX_FLAVOR_ITEMS:
                yield error(
                    key_path(f.path, key),
                    f"ResourceFlavor '{f.name}' has {len(items)} {key}; Kueue allows at most "
                    f"{MAX_FLAVOR_ITEMS}",
                    f"keep at most {MAX_FLAVOR_ITEMS}: select nodes by fewer, broader labels",
                )


def unique_taints(spec: FleetSpec) -> Iterator[Problem]:
    """resourceflavor_webhook.go:111: nodeTaints unique by (key, effect)."""
    for f in spec.queues.flavors:
        seen: dict[tuple[str, str], int] = {}
        for i, taint in enumerate(f.node_taints):
            pair = (taint.key, taint.effect)
            if pair in seen:
                yield error(
                    key_path(key_path(f.path, "nodeTaints"), i),
                    f"taint '{taint.key}' with effect {taint.effect} is listed twice (also "
                    f"nodeTaints[{seen[pair]}]); Kueue's webhook refuses taints that share "
                    "key and effect",
                    "keep one taint per key and effect",
                )
            else:
                seen[pair] = i


def topology_level_length(spec: FleetSpec) -> Iterator[Problem]:
    """topology_types.go:132: a level's nodeLabel is at most 316 characters, one less than
    the longest label key Kubernetes allows."""
    for t in spec.queues.topologies:
        for i, level in enumerate(t.levels):
            if len(level) > MAX_TOPOLOGY_LEVEL_LENGTH:
                yield error(
                    key_path(key_path(t.path, "levels"), i),
                    f"level '{level[:40]}...' is {len(level)} characters; a Topology level "
                    f"is at most {MAX_TOPOLOGY_LEVEL_LENGTH}",
                    "use a shorter node label key (its prefix or its name)",
                )
