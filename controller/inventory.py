"""Inventory automation: ClusterProfiles that appear in the inventory join MultiKueue.

Opt-in per DispatchPolicy (`spec.inventory`). Each step is planned by a pure function:
which profiles are selected (labels, access provider, required properties), the stable
order they join the MultiKueueConfig in (never beyond 20 clusters, never leaving it
empty), and how clusters leave. A profile that disappears or stops matching is first
excluded from new nominations; its cluster leaves the config only when no workload
admitted there still runs, or after the drain timeout, because dropping a cluster from
the config requeues the work running on it (OCM's rewrite-the-config approach loses
order, can exceed 20 and deletes the config when nothing is selected).

The controller creates and deletes only objects carrying its owner label: clusters the
Pulumi stack manages are left to the stack.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

# The spec is parsed with the rest of the DispatchPolicy (policy_api); planning is here.
from controller.model import MAX_NOMINATIONS
from controller.policy_api import InvalidPolicy, InventorySpec, parse_inventory

OWNER_LABEL = "multikueue-fleet/inventory-owner"
OWNER = "multikueue-fleet-dispatcher"
STACK_LABEL = "app.kubernetes.io/managed-by"


def ours(obj: Mapping[str, Any] | None) -> bool:
    return bool(obj) and ((obj.get("metadata") or {}).get("labels") or {}).get(OWNER_LABEL) == OWNER


def _selected(inv: InventorySpec, profile: Mapping[str, Any]) -> bool:
    labels = (profile.get("metadata") or {}).get("labels") or {}
    if any(labels.get(k) != v for k, v in inv.selector.items()):
        return False
    status = profile.get("status") or {}
    providers = {p.get("name") for p in status.get("accessProviders") or []}
    if inv.access_provider and inv.access_provider not in providers:
        return False
    properties = {p.get("name") for p in status.get("properties") or []}
    return all(name in properties for name in inv.required_properties)


def _order_key(inv: InventorySpec, profile: Mapping[str, Any]) -> tuple[str, str]:
    meta = profile.get("metadata") or {}
    name = meta.get("name", "")
    if inv.order_by == "created":
        return meta.get("creationTimestamp", ""), name
    if inv.order_by.startswith("label:"):
        return (meta.get("labels") or {}).get(inv.order_by[len("label:") :], "~"), name
    return name, name


@dataclass
class Plan:
    clusters: list[str]  # the MultiKueueConfig's spec.clusters after this step
    create: list[str] = field(default_factory=list)  # MultiKueueClusters to create
    relabel: dict[str, dict[str, str]] = field(default_factory=dict)
    delete: list[str] = field(default_factory=list)  # our MultiKueueClusters that left
    joined: list[str] = field(default_factory=list)
    draining: dict[str, datetime] = field(default_factory=dict)  # cluster -> since
    over_limit: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def plan(
    inv: InventorySpec,
    profiles: list[Mapping[str, Any]],
    clusters: Mapping[str, Mapping[str, Any]],
    config: Mapping[str, Any] | None,
    draining_since: Mapping[str, datetime],
    running: Mapping[str, int],
    now: datetime,
) -> Plan:
    """One step of inventory automation, from the current objects to what should be."""
    problems: list[str] = []
    if config is not None and not ours(config):
        return Plan(
            list((config.get("spec") or {}).get("clusters") or []),
            problems=[
                f"MultiKueueConfig {inv.config} is not managed by the dispatcher (the stack owns "
                "it?); name a config of its own in inventory.multiKueueConfig"
            ],
        )
    wanted = []
    for profile in sorted(
        (p for p in profiles if _selected(inv, p)), key=lambda p: _order_key(inv, p)
    ):
        name = profile["metadata"]["name"]
        existing = clusters.get(name)
        if existing is not None and not ours(existing):
            problems.append(f"MultiKueueCluster {name} is managed by the stack; left to it")
            continue
        wanted.append(profile)
    wanted_names = [p["metadata"]["name"] for p in wanted]
    current = list((config or {}).get("spec", {}).get("clusters") or [])

    kept, draining, delete = [], {}, []
    for cluster in current:
        if cluster in wanted_names:
            kept.append(cluster)
            continue
        since = draining_since.get(cluster, now)
        timed_out = (now - since).total_seconds() >= inv.drain_timeout_seconds
        if running.get(cluster, 0) == 0 or timed_out:
            delete.append(cluster)  # nothing runs there any more (or it waited long enough)
        else:
            kept.append(cluster)
            draining[cluster] = since
    newcomers = [n for n in wanted_names if n not in kept]
    if current and not kept and not newcomers:
        # A MultiKueueConfig may not be empty: the last cluster stays, reported, until
        # another joins.
        last = delete.pop()
        kept.append(last)
        draining[last] = draining_since.get(last, now)
        problems.append(f"{last} is the config's last cluster and stays until another joins")
    room = max(MAX_NOMINATIONS - len(kept), 0)
    joining, over = newcomers[:room], newcomers[room:]
    result = kept + joining
    by_name = {p["metadata"]["name"]: p for p in wanted}
    relabel = {}
    for name in [n for n in result if n in by_name]:
        labels = dict((by_name[name].get("metadata") or {}).get("labels") or {})
        have = ((clusters.get(name) or {}).get("metadata") or {}).get("labels") or {}
        if name in clusters and any(have.get(k) != v for k, v in labels.items()):
            relabel[name] = labels
    return Plan(
        clusters=result,
        create=[n for n in joining if n not in clusters],
        relabel=relabel,
        delete=[n for n in delete if ours(clusters.get(n))],
        joined=[n for n in result if n not in draining],
        draining=draining,
        over_limit=over,
        problems=problems,
    )


def cluster_object(name: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """A MultiKueueCluster for a profile, its labels copied for the dispatcher's selector."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "MultiKueueCluster",
        "metadata": {"name": name, "labels": {**labels, OWNER_LABEL: OWNER}},
        "spec": {"clusterSource": {"clusterProfileRef": {"name": name}}},
    }


def running_per_cluster(workloads: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """Workloads admitted on each cluster and not finished: what dropping it would requeue."""
    counts: dict[str, int] = {}
    for wl in workloads.values():
        status = wl.get("status") or {}
        cluster = status.get("clusterName")
        finished = any(
            c.get("type") == "Finished" and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
        if cluster and not finished:
            counts[cluster] = counts.get(cluster, 0) + 1
    return counts


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _since(status: Mapping[str, Any]) -> dict[str, datetime]:
    """Drain start times from the policy's status, so a restart does not reset them."""
    out = {}
    for entry in (status.get("inventory") or {}).get("draining") or []:
        moment = entry.get("since")
        if entry.get("cluster") and moment:
            out[entry["cluster"]] = datetime.fromisoformat(moment.replace("Z", "+00:00"))
    return out


class InventoryKeeper:
    """Applies each inventory policy's plan (leader only) and tells the dispatcher which
    clusters are draining, so they get no new nominations."""

    def __init__(self, manager: Any, state: Any, kueue_namespace: str, event: Any = None) -> None:
        self.manager = manager
        self.state = state
        self.kueue_namespace = kueue_namespace
        self.event = event  # async (policy object, type, reason, message)
        self.excluded: set[str] = set()

    def specs(self) -> list[tuple[InventorySpec, dict[str, Any]]]:
        found = []
        for name, obj in sorted(self.state.policies.store.items()):
            try:
                spec = parse_inventory(name, (obj.get("spec") or {}).get("inventory"))
            except InvalidPolicy:
                continue  # reported on the policy by the dispatcher's policy status
            if spec is not None:
                found.append((spec, obj))
        return found

    async def step(self, now: datetime) -> dict[str, Plan]:
        from controller.kinds import CLUSTER_PROFILES, MULTIKUEUE_CLUSTERS, MULTIKUEUE_CONFIGS

        specs = self.specs()
        if not specs:
            self.excluded = set()
            return {}
        if self.state.profiles is not None:
            profiles = list(self.state.profiles.store.values())  # watched: no extra list
        else:
            profiles, _ = await self.manager.list(CLUSTER_PROFILES, self.kueue_namespace)
        running = running_per_cluster(self.state.workloads.store)
        plans, excluded = {}, set()
        for inv, policy in specs:
            status = policy.get("status") or {}
            config = self.state.configs.store.get(inv.config)
            step = plan(
                inv, profiles, self.state.clusters.store, config, _since(status), running, now
            )
            plans[inv.policy] = step
            excluded |= set(step.draining)
            if step.problems and config is not None and not ours(config):
                await self._status(policy, step, now)
                continue
            for name in step.create:
                profile = next(p for p in profiles if p["metadata"]["name"] == name)
                await self.manager.create(
                    MULTIKUEUE_CLUSTERS,
                    cluster_object(name, (profile.get("metadata") or {}).get("labels") or {}),
                )
            for name, labels in step.relabel.items():
                await self.manager.merge_patch(
                    MULTIKUEUE_CLUSTERS,
                    name,
                    {"metadata": {"labels": {**labels, OWNER_LABEL: OWNER}}},
                )
            current = list((config or {}).get("spec", {}).get("clusters") or [])
            if config is None and step.clusters:
                await self.manager.create(
                    MULTIKUEUE_CONFIGS,
                    {
                        "apiVersion": "kueue.x-k8s.io/v1beta2",
                        "kind": "MultiKueueConfig",
                        "metadata": {"name": inv.config, "labels": {OWNER_LABEL: OWNER}},
                        "spec": {"clusters": step.clusters},
                    },
                )
            elif config is not None and step.clusters != current:
                await self.manager.merge_patch(
                    MULTIKUEUE_CONFIGS, inv.config, {"spec": {"clusters": step.clusters}}
                )
            for name in step.delete:  # out of the config first, then gone
                await self.manager.request("DELETE", MULTIKUEUE_CLUSTERS.path(None, name))
            await self._status(policy, step, now)
            await self._tell(policy, current, step)
        self.excluded = excluded
        return plans

    async def _status(self, policy: dict[str, Any], step: Plan, now: datetime) -> None:
        from controller.fleet_state import DISPATCH_POLICIES

        ready = not step.problems
        inventory = {
            "joined": step.joined,
            "draining": [{"cluster": c, "since": _stamp(s)} for c, s in step.draining.items()],
            "overLimit": step.over_limit,
        }
        condition = {
            "type": "InventoryReady",
            "status": "True" if ready else "False",
            "reason": "Synced" if ready else "Blocked",
            "message": "; ".join(step.problems)
            or f"{len(step.joined)} joined, {len(step.draining)} draining, "
            f"{len(step.over_limit)} over the limit of {MAX_NOMINATIONS}",
            "lastTransitionTime": _stamp(now),
        }
        old = policy.get("status") or {}
        same = old.get("inventory") == inventory and any(
            c.get("type") == "InventoryReady" and c.get("message") == condition["message"]
            for c in old.get("conditions") or []
        )
        if same:
            return
        others = [c for c in old.get("conditions") or [] if c.get("type") != "InventoryReady"]
        await self.manager.merge_patch(
            DISPATCH_POLICIES,
            policy["metadata"]["name"],
            {"status": {"inventory": inventory, "conditions": [*others, condition]}},
            status=True,
        )

    async def _tell(self, policy: dict[str, Any], before: list[str], step: Plan) -> None:
        if self.event is None:
            return
        previous = (policy.get("status") or {}).get("inventory") or {}
        was_draining = {d.get("cluster") for d in previous.get("draining") or []}
        for name in step.create:
            await self.event(
                policy,
                "Normal",
                "ClusterJoined",
                f"{name} joined MultiKueueConfig {step_config(policy)}",
            )
        for name in set(step.draining) - was_draining:
            await self.event(
                policy,
                "Normal",
                "ClusterDraining",
                f"{name} left the inventory selection: no new workloads go "
                "there; it leaves the config when nothing admitted there runs",
            )
        for name in [c for c in before if c not in step.clusters]:
            await self.event(
                policy,
                "Normal",
                "ClusterLeft",
                f"{name} left MultiKueueConfig {step_config(policy)}",
            )
        over = set(step.over_limit) - set(previous.get("overLimit") or [])
        if over:
            await self.event(
                policy,
                "Warning",
                "OverLimit",
                f"{', '.join(sorted(over))} wait: a MultiKueueConfig holds at most "
                f"{MAX_NOMINATIONS} clusters",
            )


def step_config(policy: Mapping[str, Any]) -> str:
    return ((policy.get("spec") or {}).get("inventory") or {}).get("multiKueueConfig", "")
