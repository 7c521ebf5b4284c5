"""Before a fleet on existing clusters is destroyed: stop its ClusterQueues and let
the work that holds their quota end, so the destroy that follows is not stuck behind Kueue's
finalizers (Kueue keeps one on a ClusterQueue while workloads hold its quota, and the
Kubernetes provider waits ten minutes for each deletion).

`stopPolicy: Hold` makes a ClusterQueue inactive: no new reservation, reserving workloads
lose theirs, admitted ones run to completion (kueue v0.19.2
config/components/crd/bases/kueue.x-k8s.io_clusterqueues.yaml, spec.stopPolicy;
pkg/controller/core/workload_controller.go `reconcileOnClusterQueueActiveState`). The stop
reaches Kueue's cache asynchronously, so the wait trusts an empty list only once each held
queue reports it (condition Active=False for the patched generation:
pkg/controller/core/clusterqueue_controller.go, pkg/cache/scheduler/clusterqueue.go
`inactiveReason`), and only twice in a row (a scheduling cycle already under way may still
commit one admission). The wait is bounded; past it the teardown stops and names the
workloads still holding quota, and how to end them or resume the queues.

Only `existing` clusters outlive the fleet: kind, GKE and EKS clusters the stack created are
deleted whole, their objects with them. When any cluster outlives the fleet, the queues of
every cluster are held, created ones included: an unheld created manager would go on
placing copies on the lasting workers, and only it cleans them up
(pkg/controller/admissionchecks/multikueue/workload.go). The wait covers the lasting
clusters only; created ones go whole."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Iterable, Mapping
from typing import Any

import yaml
from kubernetes_asyncio.config import ConfigException

from components.objects.labels import FLEET_LABEL
from components.resources.drain import holds_quota
from controller.api.cluster_access import ApiError, Kind, Kube

KUEUE = "kueue.x-k8s.io"
CLUSTER_QUEUES = Kind(KUEUE, "v1beta2", "clusterqueues", False)
WORKLOADS = Kind(KUEUE, "v1beta2", "workloads", True)


class DrainTimeout(Exception):
    """Workloads still hold quota after the bound; the message says which and what to do."""


async def _stop(kube: Kube, fleet: str) -> dict[str, int]:
    """Holds every ClusterQueue of the fleet on this cluster; name -> the generation the
    hold made (Kueue reports it applied with that observedGeneration)."""
    queues, _ = await kube.list(CLUSTER_QUEUES)
    ours = sorted(
        q["metadata"]["name"]
        for q in queues
        if (q["metadata"].get("labels") or {}).get(FLEET_LABEL) == fleet
    )
    held = {}
    for name in ours:
        patched = await kube.merge_patch(CLUSTER_QUEUES, name, {"spec": {"stopPolicy": "Hold"}})
        held[name] = int((patched.get("metadata") or {}).get("generation") or 0)
    return held


async def _not_yet_stopped(kube: Kube, held: Mapping[str, int]) -> list[str]:
    """The held queues whose Active condition does not yet say so for the hold's generation."""
    queues, _ = await kube.list(CLUSTER_QUEUES)
    stopped = set()
    for q in queues:
        name = q["metadata"]["name"]
        for c in (q.get("status") or {}).get("conditions") or []:
            if (
                c.get("type") == "Active"
                and c.get("status") == "False"
                and int(c.get("observedGeneration") or 0) >= held.get(name, 1 << 62)
            ):
                stopped.add(name)
    return sorted(set(held) - stopped)


async def _holding(kube: Kube, queues: Iterable[str]) -> list[tuple[str, str, str]]:
    """(namespace, name, ClusterQueue) of every workload holding quota in `queues`."""
    items, _ = await kube.list(WORKLOADS)
    queues = set(queues)
    out = []
    for w in items:
        queue = ((w.get("status") or {}).get("admission") or {}).get("clusterQueue")
        if queue in queues and holds_quota(w):
            out.append((w["metadata"]["namespace"], w["metadata"]["name"], queue))
    return sorted(out)


async def stop_and_drain(
    kubeconfigs: Mapping[str, Mapping[str, Any]],
    fleet: str,
    bound: float,
    interval: float = 2.0,
    log: Any = print,
    wait_on: Iterable[str] | None = None,
) -> None:
    """Holds the fleet's ClusterQueues on every cluster given, then waits up to `bound`
    seconds until Kueue applied the holds and no workload holds their quota on the
    clusters in `wait_on` (default: all); DrainTimeout past it. A cluster that cannot be
    reached to hold its queues is skipped with a note (destroy will report it in its own
    words); one that stops answering during the wait is retried until the bound."""
    waited = set(kubeconfigs if wait_on is None else wait_on)
    kubes: dict[str, Kube] = {}
    try:
        held: dict[str, dict[str, int]] = {}
        for name, cfg in kubeconfigs.items():
            try:
                kubes[name] = await Kube.from_kubeconfig(dict(cfg), name)
                held[name] = await _stop(kubes[name], fleet)
            except (ApiError, ConfigException, OSError) as exc:
                log(f"cluster {name}: cannot stop its ClusterQueues ({exc}); going on")
        if held:
            log(f"ClusterQueues held (stopPolicy: Hold); waiting up to {bound:.0f}s for work")
        deadline = asyncio.get_running_loop().time() + bound
        empty_polls = 0
        while True:
            state = await _poll({n: (kubes[n], held[n]) for n in sorted(held) if n in waited})
            done = not any(state.values())
            empty_polls = empty_polls + 1 if done else 0
            if empty_polls >= 2:
                return
            if not done and asyncio.get_running_loop().time() >= deadline:
                raise DrainTimeout(_message(state, bound))
            await asyncio.sleep(interval)
    finally:
        for kube in kubes.values():
            await kube.close()


async def _poll(
    clusters: Mapping[str, tuple[Kube, Mapping[str, int]]],
) -> dict[str, list[str]]:
    """Per cluster, what still stands in the way (empty when nothing does)."""
    state: dict[str, list[str]] = {}
    for name, (kube, held) in clusters.items():
        try:
            pending = await _not_yet_stopped(kube, held)
            if pending:
                state[name] = [f"ClusterQueue {q} not yet stopped by Kueue" for q in pending]
                continue
            state[name] = [
                f"{ns}/{wl} (ClusterQueue {cq})" for ns, wl, cq in await _holding(kube, held)
            ]
        except ApiError as exc:
            state[name] = [f"cannot be read ({exc})"]
    return state


def _message(state: Mapping[str, list[str]], bound: float) -> str:
    listed = "; ".join(
        f"cluster {cluster}: " + ", ".join(found)
        for cluster, found in sorted(state.items())
        if found
    )
    return (
        f"workloads still hold quota after {bound:.0f}s, so Kueue keeps its finalizers and "
        f"destroy would hang: {listed}. End them (delete their jobs, or `kubectl patch "
        'clusterqueue NAME --type merge -p \'{"spec":{"stopPolicy":"HoldAndDrain"}}\'` to '
        "evict them), or wait longer (MKF_DRAIN_TIMEOUT=SECONDS), then tear down again. The "
        "fleet's ClusterQueues stay held (a later `pulumi up` does not undo it); to keep the "
        "fleet instead, resume each with `kubectl patch clusterqueue NAME --type merge -p "
        '\'{"spec":{"stopPolicy":"None"}}\'`'
    )


def drain_plan(outputs: Mapping[str, Any]) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """From a stack's outputs: the kubeconfigs of the clusters whose queues are held, and
    the names of those waited on. Nothing when the stack created every cluster (kind, GKE,
    EKS: each takes its objects with it, components/resources/fleet.py `deleted_with`);
    otherwise every cluster is held and the lasting ones, the `existing` clusters, are
    waited on (see the module docstring)."""
    clusters = outputs.get("clusters") or []
    lasting = {c["name"] for c in clusters if c.get("provider") == "existing"}
    if not lasting:
        return {}, set()
    kubeconfigs = {c["name"]: yaml.safe_load(outputs["kubeconfigs"][c["name"]]) for c in clusters}
    return kubeconfigs, lasting


def main() -> int:
    """`pulumi stack output --json --show-secrets | python -m components.cli.teardown`: what
    scripts/down.sh runs before `pulumi destroy`; the bound is MKF_DRAIN_TIMEOUT seconds."""
    try:
        outputs = json.load(sys.stdin)
        bound = float(os.environ.get("MKF_DRAIN_TIMEOUT") or 600)
    except ValueError as exc:
        print(f"error: cannot read the stack outputs or MKF_DRAIN_TIMEOUT: {exc}", file=sys.stderr)
        return 1
    kubeconfigs, lasting = drain_plan(outputs)
    if not kubeconfigs or not outputs.get("fleet"):
        return 0
    try:
        asyncio.run(stop_and_drain(kubeconfigs, outputs["fleet"], bound, wait_on=lasting))
    except DrainTimeout as exc:
        print(f"error: teardown stopped before destroy: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
