"""`explain`: what the policy would do now for a workload, found by its own name or by the
Job, JobSet or LeaderWorkerSet that owns it, as a table for people or JSON for machines;
`--all` does it for every pending workload, one line (or object) each. It writes nothing,
and says whether a dispatcher is running to act on it.

Decisions come from the same Dispatcher and policy the controller runs (app.explain fills
its caches once); this module finds the workloads and words the answer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controller.dispatcher import Dispatcher
from controller.fit import show
from controller.kinds import WORKLOADS
from controller.kube import Kube
from controller.policy import HEDGED
from controller.settings import Settings

# Kueue v0.19.2 names a Job's Workload `job-<name>-<hash>` (pkg/controller/jobframework,
# GetWorkloadNameForOwnerWithGVK), so people know the Job's name, not the Workload's: the
# owner reference is what links them.
OWNER_KINDS = ("Job", "JobSet", "LeaderWorkerSet")

# How each strategy reads SCORE among the clusters where the workload fits (policy.py,
# _fit_key): the same percentage the reason prints.
STRATEGY_ORDER = {
    "MostFreeQuota": "the highest SCORE is nominated first (most quota left free)",
    "BestFit": "the lowest SCORE that fits is nominated first (the tightest fit)",
    "OrderedSpillover": "SCORE does not order it: the first cluster of the "
    "MultiKueueConfig where it fits is nominated",
}


class NotFound(Exception):
    """No workload by that name: the message says how to list them."""


@dataclass(frozen=True)
class Found:
    key: str  # namespace/name of the Workload
    owner: str  # "<Kind> <name>" of what it was found by, "" when named itself


async def find(manager: Kube, name: str) -> list[Found]:
    """The Workloads `namespace/name` names: the Workload itself, or every Workload a Job,
    JobSet or LeaderWorkerSet of that name owns (a LeaderWorkerSet has one per group)."""
    namespace, _, short = name.partition("/")
    items, _ = await manager.list(WORKLOADS, namespace)
    if any(w["metadata"]["name"] == short for w in items):
        return [Found(name, "")]
    owned = [
        Found(f"{namespace}/{w['metadata']['name']}", f"{ref.get('kind')} {short}")
        for w in items
        for ref in w["metadata"].get("ownerReferences") or []
        if ref.get("name") == short and ref.get("kind") in OWNER_KINDS
    ]
    if not owned:
        raise NotFound(
            f"no Workload, nor a Job, JobSet or LeaderWorkerSet with one, named {short} in "
            f"namespace {namespace} on the manager; fix: `kubectl get workloads -n "
            f"{namespace}` lists them (a job gets its Workload once Kueue has seen it: does it "
            "carry the kueue.x-k8s.io/queue-name label?)"
        )
    return owned


def pending(dispatcher: Dispatcher) -> list[Found]:
    """Every workload not admitted on a worker and not finished: what `--all` explains."""
    found = []
    for key, wl in sorted(dispatcher.state.workloads.store.items()):
        status = wl.get("status") or {}
        finished = any(
            c.get("type") == "Finished" and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
        if not status.get("clusterName") and not finished:
            found.append(Found(key, ""))
    return found


def _percent(score: float | None) -> str:
    return "-" if score is None else f"{score:.0%}"


def report(dispatcher: Dispatcher, found: Found) -> dict[str, Any]:
    """One workload's answer as plain data: what `-o json` prints and the text is made of."""
    key = found.key
    wl = dispatcher.state.workloads.store.get(key)
    if wl is None:  # listed a moment ago, gone from the cache since
        return {"workload": key, "owner": found.owner, "dispatched": False, "reason": "gone"}
    status = wl.get("status") or {}
    cluster_queue = (status.get("admission") or {}).get("clusterQueue")
    out: dict[str, Any] = {
        "workload": key,
        "owner": found.owner,
        "localQueue": (wl.get("spec") or {}).get("queueName"),
        "clusterQueue": cluster_queue,
        "nominated": list(status.get("nominatedClusterNames") or []),
    }
    eligible, decision, policy_name = dispatcher.evaluate(key)
    if decision is None:
        return {**out, "dispatched": False, "reason": eligible.reason}
    policy = dispatcher.state.policy_set().for_queue(
        cluster_queue or "", dispatcher.settings.default_policy
    )
    return {
        **out,
        "dispatched": True,
        "demand": {r: show(r, a) for r, a in sorted(dispatcher.view(wl).requests.items())},
        "policy": {
            "name": policy_name,
            "strategy": policy.strategy,
            "clustersToNominate": policy.clusters_to_nominate,
            "widenAfterSeconds": policy.widen_after_seconds,
            "whenNothingFits": policy.when_nothing_fits,
            "hedgeClusters": policy.hedge_clusters,
            "hedgeSharePercent": round(policy.hedge_share * 100),
            "clusterSelector": policy.cluster_selector or None,
        },
        "clusters": [
            {
                "cluster": v.cluster,
                "verdict": v.status,
                "score": _percent(v.score),
                "reason": v.reason,
            }
            for v in decision.verdicts
        ],
        "wouldNominate": list(decision.nominate),
        "outcome": decision.outcome,
        # Nominated to several at once, as the policy's hedgeClusters says (policy.hedged).
        "hedged": decision.summary.startswith(HEDGED),
    }


def dispatcher_line(holder: str | None, settings: Settings) -> str:
    lease = f"{settings.namespace}/{settings.lease_name}"
    if holder:
        return f"Dispatcher: running ({holder} holds Lease {lease})"
    return (
        f"Dispatcher: none running (no process holds Lease {lease}): nothing nominates until "
        "one runs; start it: python -m controller --kubeconfig <dispatcher kubeconfig> "
        "--config <settings> run (docs/dispatcher.md)"
    )


def text(answer: Mapping[str, Any], holder: str | None) -> str:
    """The table a person reads: who the workload is, its demand, the policy, one row per
    cluster (SCORE as the share of the tightest flavor left free, the same number the
    reason gives), and what would be nominated, by a dispatcher if one runs."""
    owner = f"{answer['owner']}, " if answer.get("owner") else ""
    lines = [
        f"Workload {answer['workload']}  ({owner}LocalQueue {answer.get('localQueue')}, "
        f"ClusterQueue {answer.get('clusterQueue') or '-'})",
        "Currently nominated: " + (", ".join(answer.get("nominated") or []) or "-"),
    ]
    if not answer["dispatched"]:
        lines.append(f"Not dispatched now: {answer['reason']}.")
        return "\n".join(lines)
    policy = answer["policy"]
    demand = ", ".join(f"{r} {a}" for r, a in answer["demand"].items()) or "nothing"
    lines.append(f"Demand: {demand}")
    lines.append(
        f"Policy: {policy['name']} ({policy['strategy']}, nominate "
        f"{policy['clustersToNominate']}, widen after {policy['widenAfterSeconds']:g}s, "
        f"when nothing fits: {policy['whenNothingFits']}"
        + (f", clusters with {policy['clusterSelector']}" if policy["clusterSelector"] else "")
        + (
            f", hedge on {policy['hedgeClusters']} at {policy['hedgeSharePercent']}%"
            if policy.get("hedgeClusters", 1) > 1
            else ""
        )
        + ")"
    )
    rows = answer["clusters"]
    width = max([len("CLUSTER"), *(len(r["cluster"]) for r in rows)])
    lines.append(f"{'CLUSTER':<{width}}  {'VERDICT':<8}  {'SCORE':>6}  REASON")
    for r in rows:
        lines.append(f"{r['cluster']:<{width}}  {r['verdict']:<8}  {r['score']:>6}  {r['reason']}")
    lines.append(
        "SCORE: the share of the tightest flavor left free after placing it (fits), or "
        "missing to place it now (waits, negative); " + STRATEGY_ORDER.get(policy["strategy"], "")
    )
    nominate = ", ".join(answer["wouldNominate"]) or "nothing"
    verb = "Would nominate" if holder else "Would nominate, once a dispatcher runs"
    hedged = ""
    if answer.get("hedged"):
        hedged = ", hedged: it needs most of every queue that could hold it"
    lines.append(f"{verb}: {nominate} ({answer['outcome']}{hedged})")
    return "\n".join(lines)


def one_line(answer: Mapping[str, Any]) -> str:
    """`--all`: one workload in a line."""
    if not answer["dispatched"]:
        return f"{answer['workload']}  not dispatched now: {answer['reason']}"
    nominate = ", ".join(answer["wouldNominate"]) or "nothing"
    chosen = [r for r in answer["clusters"] if r["cluster"] in answer["wouldNominate"]]
    why = f": {chosen[0]['reason']}" if chosen else ""
    return f"{answer['workload']}  would nominate {nominate} ({answer['outcome']}){why}"
