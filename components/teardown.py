"""Before a fleet on existing or cloud clusters is destroyed: stop its ClusterQueues and let
the work that holds their quota end, so the destroy that follows is not stuck behind Kueue's
finalizers (Kueue keeps one on a ClusterQueue while workloads hold its quota, and the
Kubernetes provider waits ten minutes for each deletion).

`stopPolicy: Hold` makes a ClusterQueue inactive: no new reservation, reserving workloads
lose theirs, admitted ones run to completion (kueue v0.19.2
config/components/crd/bases/kueue.x-k8s.io_clusterqueues.yaml, spec.stopPolicy). The wait
is bounded; past it the teardown stops and names the workloads still holding quota."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Mapping
from typing import Any

import yaml

from components.labels import FLEET_LABEL
from controller.kube import ApiError, Kind, Kube

KUEUE = "kueue.x-k8s.io"
CLUSTER_QUEUES = Kind(KUEUE, "v1beta2", "clusterqueues", False)
WORKLOADS = Kind(KUEUE, "v1beta2", "workloads", True)


class DrainTimeout(Exception):
    """Workloads still hold quota after the bound; the message says which and what to do."""


def _holds_quota(workload: Mapping[str, Any]) -> bool:
    conditions = {
        c.get("type"): c.get("status")
        for c in (workload.get("status") or {}).get("conditions") or []
    }
    return conditions.get("QuotaReserved") == "True" and conditions.get("Finished") != "True"


async def _stop(kube: Kube, fleet: str) -> set[str]:
    """Holds every ClusterQueue of the fleet on this cluster; their names."""
    queues, _ = await kube.list(CLUSTER_QUEUES)
    ours = {
        q["metadata"]["name"]
        for q in queues
        if (q["metadata"].get("labels") or {}).get(FLEET_LABEL) == fleet
    }
    for name in sorted(ours):
        await kube.merge_patch(CLUSTER_QUEUES, name, {"spec": {"stopPolicy": "Hold"}})
    return ours


async def _holding(kube: Kube, queues: set[str]) -> list[tuple[str, str, str]]:
    """(namespace, name, ClusterQueue) of every workload holding quota in `queues`."""
    items, _ = await kube.list(WORKLOADS)
    out = []
    for w in items:
        queue = ((w.get("status") or {}).get("admission") or {}).get("clusterQueue")
        if queue in queues and _holds_quota(w):
            out.append((w["metadata"]["namespace"], w["metadata"]["name"], queue))
    return sorted(out)


async def stop_and_drain(
    kubeconfigs: Mapping[str, Mapping[str, Any]],
    fleet: str,
    bound: float,
    interval: float = 2.0,
    log: Any = print,
) -> None:
    """Holds the fleet's ClusterQueues on every cluster given, then waits up to `bound`
    seconds until no workload holds their quota; DrainTimeout past it. A cluster that
    cannot be reached is skipped with a note: destroy will report it in its own words."""
    kubes = {name: await Kube.from_kubeconfig(dict(cfg), name) for name, cfg in kubeconfigs.items()}
    try:
        queues: dict[str, set[str]] = {}
        for name, kube in kubes.items():
            try:
                queues[name] = await _stop(kube, fleet)
            except ApiError as exc:
                log(f"cluster {name}: cannot stop its ClusterQueues ({exc}); going on")
        if queues:
            log(f"ClusterQueues held (stopPolicy: Hold); waiting up to {bound:.0f}s for work")
        deadline = asyncio.get_running_loop().time() + bound
        while True:
            holding = {
                name: found
                for name, found in [
                    (name, await _holding(kubes[name], qs)) for name, qs in queues.items()
                ]
                if found
            }
            if not holding:
                return
            if asyncio.get_running_loop().time() >= deadline:
                raise DrainTimeout(_message(holding, bound))
            await asyncio.sleep(interval)
    finally:
        for kube in kubes.values():
            await kube.close()


def _message(holding: Mapping[str, list[tuple[str, str, str]]], bound: float) -> str:
    listed = "; ".join(
        f"cluster {cluster}: "
        + ", ".join(f"{ns}/{name} (ClusterQueue {cq})" for ns, name, cq in ws)
        for cluster, ws in sorted(holding.items())
    )
    return (
        f"workloads still hold quota after {bound:.0f}s, so Kueue keeps its finalizers and "
        f"destroy would hang: {listed}. End them (delete their jobs, or `kubectl patch "
        'clusterqueue NAME --type merge -p \'{"spec":{"stopPolicy":"HoldAndDrain"}}\'` to '
        "evict them), or wait longer (MKF_DRAIN_TIMEOUT=SECONDS), then tear down again"
    )


def lasting_kubeconfigs(outputs: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """From a stack's outputs, the kubeconfigs of the clusters that outlive the fleet
    (existing, GKE, EKS): kind clusters take their objects with them and need no drain."""
    return {
        c["name"]: yaml.safe_load(outputs["kubeconfigs"][c["name"]])
        for c in outputs.get("clusters") or []
        if c.get("provider") not in (None, "kind")
    }


def main() -> int:
    """`pulumi stack output --json --show-secrets | python -m components.teardown`: what
    scripts/down.sh runs before `pulumi destroy`; the bound is MKF_DRAIN_TIMEOUT seconds."""
    try:
        outputs = json.load(sys.stdin)
        bound = float(os.environ.get("MKF_DRAIN_TIMEOUT") or 600)
    except ValueError as exc:
        print(f"error: cannot read the stack outputs or MKF_DRAIN_TIMEOUT: {exc}", file=sys.stderr)
        return 1
    kubeconfigs = lasting_kubeconfigs(outputs)
    if not kubeconfigs or not outputs.get("fleet"):
        return 0
    try:
        asyncio.run(stop_and_drain(kubeconfigs, outputs["fleet"], bound))
    except DrainTimeout as exc:
        print(f"error: teardown stopped before destroy: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
