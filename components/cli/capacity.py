"""What a stack change does to capacity: per ClusterQueue, flavor and resource, each
cluster's nominal quota before and after (the manager's is the fleet's total unless the
stack sets `managerQuota`), the change in percent, and, when the fleet's current usage is
known, the quotas a change would leave below what admitted work already holds.

The quotas come from the same builders as the objects (components/objects/queues.py), so
this summary and the object diff below it cannot disagree."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from components.model import quantity
from components.model.spec import FleetSpec
from components.objects.queues import manager_quotas, worker_quotas

# (ClusterQueue, flavor, resource)
Slot = tuple[str, str, str]


@dataclass(frozen=True)
class QuotaRow:
    cluster_queue: str
    flavor: str
    resource: str
    cluster: str
    role: str  # "manager" or "worker"
    before: str | None  # None: the queue, flavor, resource or cluster is new
    after: str | None  # None: removed by the change
    in_use: str | None = None  # what the cluster's admitted work holds now, when read

    @property
    def change(self) -> str:
        """The change in percent, as a reviewer reads it: +25%, -50%, 0%, new, removed."""
        if self.before is None:
            return "new"
        if self.after is None:
            return "removed"
        old, new = quantity.parse(self.before), quantity.parse(self.after)
        if old == 0:
            return "0%" if new == 0 else "new"
        percent = (new - old) / old * 100
        shown = f"{percent:+.0f}%" if percent == percent.to_integral_value() else f"{percent:+.1f}%"
        return "0%" if new == old else shown

    @property
    def below_use(self) -> bool:
        """The change leaves this cluster less nominal quota than its work holds now."""
        if self.in_use is None:
            return False
        used = quantity.parse(self.in_use)
        left = quantity.parse(self.after) if self.after is not None else Decimal(0)
        return used > left

    def as_json(self) -> dict[str, Any]:
        return {
            "clusterQueue": self.cluster_queue,
            "flavor": self.flavor,
            "resource": self.resource,
            "cluster": self.cluster,
            "role": self.role,
            "before": self.before,
            "after": self.after,
            "change": self.change,
            "inUse": self.in_use,
            "belowUse": self.below_use,
        }


def nominal_quotas(spec: FleetSpec | None) -> dict[tuple[str, Slot], tuple[str, str]]:
    """(cluster, slot) -> (role, nominal quota) for every cluster of the stack."""
    if spec is None:
        return {}
    found: dict[tuple[str, Slot], tuple[str, str]] = {}
    for cq in spec.queues.cluster_queues:
        for cluster in spec.clusters:
            quotas = (
                manager_quotas(spec, cq)
                if cluster.role == "manager"
                else worker_quotas(cq, cluster)
            )
            for flavor, resources in quotas.items():
                for resource, quota in resources.items():
                    slot = (cq.name, flavor, resource)
                    found[(cluster.name, slot)] = (cluster.role, str(quota.nominal))
    return found


def capacity_rows(
    old: FleetSpec | None,
    new: FleetSpec | None,
    in_use: Mapping[tuple[str, Slot], str] | None = None,
) -> list[QuotaRow]:
    """Every cluster's row of each (ClusterQueue, flavor, resource) whose quota changes on
    some cluster, workers first and the manager last; a slot no change touches is left out.
    `in_use`: (cluster, slot) -> what its admitted work holds now, when the fleet was read;
    a slot whose quota stays the same is still shown when its new quota is below that."""
    before, after = nominal_quotas(old), nominal_quotas(new)
    in_use = in_use or {}
    keys = list(dict.fromkeys([*after, *before]))
    slots = list(dict.fromkeys(slot for _, slot in keys))
    rows: list[QuotaRow] = []
    for slot in slots:
        here = [k for k in keys if k[1] == slot]
        slot_rows = []
        for key in here:
            role = (after.get(key) or before[key])[0]
            was = before[key][1] if key in before else None
            now = after[key][1] if key in after else None
            slot_rows.append(QuotaRow(*slot, key[0], role, was, now, in_use.get(key)))
        changed = any(
            r.before is None or r.after is None or not quantity.equal(r.before, r.after)
            for r in slot_rows
        )
        if changed or any(r.below_use for r in slot_rows):
            rows += sorted(slot_rows, key=lambda r: r.role == "manager")
    return rows


def capacity_lines(rows: list[QuotaRow], usage_read: bool) -> list[str]:
    """The summary as a table, one row per cluster, each slot's manager row last; a row whose
    new quota is below the work it holds now ends in a flag saying so."""
    if not rows:
        return ["Capacity: no nominal quota changes."]
    head = ("CLUSTERQUEUE", "FLAVOR", "RESOURCE", "CLUSTER", "BEFORE", "AFTER", "CHANGE")
    table: list[tuple[str, ...]] = [head + (("IN USE",) if usage_read else ())]
    previous: Slot | None = None
    for r in rows:
        slot = (r.cluster_queue, r.flavor, r.resource)
        shown_slot = ("", "", "") if slot == previous else slot
        previous = slot
        cluster = r.cluster
        if r.role == "manager":
            cluster = (
                "manager (total)" if r.cluster == "manager" else f"{r.cluster} (manager, total)"
            )
        cells = (*shown_slot, cluster, r.before or "-", r.after or "-", r.change)
        table.append(cells + ((r.in_use or "-",) if usage_read else ()))
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    lines = [
        "Capacity (nominal quota per ClusterQueue, flavor and resource; the manager admits "
        "up to its total):"
    ]
    for row, r in zip(table, [None, *rows], strict=True):
        text = "  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False))
        if usage_read:
            text += "  " + row[-1]
        if r is not None and r.below_use:
            text += "  ! below what its admitted work holds now"
        lines.append(text.rstrip())
    if not usage_read:
        lines.append(
            "  (usage not read: add --fleet DIR, the directory `mkf up` or scripts/up.sh "
            "wrote, or --fleet-stack NAME after a plain `pulumi up`, to flag a quota below "
            "what admitted work holds now)"
        )
    return lines


def below_use_warnings(rows: list[QuotaRow]) -> list[str]:
    """One line per quota a change would leave below the work that holds it now."""
    return [
        f"warning: ClusterQueue {r.cluster_queue} on {r.cluster}, flavor {r.flavor}, "
        f"{r.resource}: the new quota {r.after or 'none'} is below the {r.in_use} its admitted "
        "work holds now; Kueue admits nothing more there until that work ends (without "
        "borrowing): apply the change when the queue has drained, or keep the quota at "
        f"least {r.in_use}"
        for r in rows
        if r.below_use
    ]


def usage_from_cluster_queues(
    cluster: str, cluster_queues: list[Mapping[str, Any]]
) -> dict[tuple[str, Slot], str]:
    """(cluster, slot) -> quota reserved now, from ClusterQueue status.flavorsReservation
    (Kueue v0.19.2 apis/kueue/v1beta2/clusterqueue_types.go: "the reserved quotas, by
    flavor, currently in use by the workloads assigned to this ClusterQueue", admitted ones
    and those still waiting for their admission checks, so never less than flavorsUsage,
    which counts the admitted alone)."""
    found: dict[tuple[str, Slot], str] = {}
    for cq in cluster_queues:
        name = cq.get("metadata", {}).get("name", "")
        status = cq.get("status") or {}
        for flavor in status.get("flavorsReservation") or []:
            for resource in flavor.get("resources") or []:
                total = resource.get("total")
                if total is not None and quantity.is_valid(str(total)):
                    slot = (name, flavor.get("name", ""), resource.get("name", ""))
                    found[(cluster, slot)] = str(total)
    return found
