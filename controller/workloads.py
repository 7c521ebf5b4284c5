"""Reading Kueue Workloads: when an external dispatcher may act on one, and what it asks for.

The contract (research/kueue-api.md §6-7): nominate only while the MultiKueue check is
Pending, QuotaReserved is True, status.clusterName is unset and every other admission
check is Ready; for a LeaderWorkerSet only the component workload with index "0".
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from controller.model import Resources, WorkloadView, milli

MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
COMPONENT_INDEX = "kueue.x-k8s.io/component-workload-index"
JOB_OWNER_GVK = "kueue.x-k8s.io/job-owner-gvk"


class MalformedWorkload(ValueError):
    """A workload whose fields cannot be read; reported on it, then skipped."""


@dataclass(frozen=True)
class Eligibility:
    eligible: bool
    reason: str
    check: str | None = None  # the MultiKueue admission check's name


def key_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return cond
    return None


def eligibility(workload: Mapping[str, Any], multikueue_checks: set[str]) -> Eligibility:
    """Whether we may nominate clusters for this workload now, and if not, why not."""
    status = workload.get("status") or {}
    annotations = (workload.get("metadata") or {}).get("annotations") or {}
    checks = status.get("admissionChecks") or []
    ours = [c for c in checks if c.get("name") in multikueue_checks]
    if not ours:
        return Eligibility(False, "no MultiKueue admission check")
    check = ours[0]
    if (_condition(workload, "Finished") or {}).get("status") == "True":
        return Eligibility(False, "finished", check["name"])
    if (workload.get("spec") or {}).get("active") is False:
        return Eligibility(False, "deactivated", check["name"])
    if annotations.get(COMPONENT_INDEX, "0") != "0":
        return Eligibility(
            False, "follows its group's primary workload (Kueue places it)", check["name"]
        )
    if status.get("clusterName"):
        return Eligibility(False, f"admitted on {status['clusterName']}", check["name"])
    if (_condition(workload, "QuotaReserved") or {}).get("status") != "True":
        return Eligibility(False, "no quota reserved on the manager yet", check["name"])
    if check.get("state") != "Pending":
        return Eligibility(False, f"MultiKueue check is {check.get('state')}", check["name"])
    waiting = [c.get("name") for c in checks if c is not check and c.get("state") != "Ready"]
    if waiting:
        return Eligibility(
            False, f"waiting for admission checks {', '.join(waiting)}", check["name"]
        )
    return Eligibility(True, "eligible", check["name"])


def _add(total: Resources, resource: str, amount: Any) -> None:
    try:
        value = milli(amount)
    except (ValueError, TypeError) as exc:
        raise MalformedWorkload(f"{resource} quantity {amount!r} is not a quantity") from exc
    total[resource] = total.get(resource, 0) + value


def _pod_requests(pod_spec: Mapping[str, Any]) -> Resources:
    """A pod's effective requests: the larger of its containers' sum and any single init
    container, plus overhead (the way the scheduler and Kueue count them)."""
    total: Resources = {}
    for container in pod_spec.get("containers") or []:
        for r, a in ((container.get("resources") or {}).get("requests") or {}).items():
            _add(total, r, a)
    for container in pod_spec.get("initContainers") or []:
        init: Resources = {}
        for r, a in ((container.get("resources") or {}).get("requests") or {}).items():
            _add(init, r, a)
        for r, a in init.items():
            total[r] = max(total.get(r, 0), a)
    for r, a in (pod_spec.get("overhead") or {}).items():
        _add(total, r, a)
    return total


def requests_of(workload: Mapping[str, Any]) -> Resources:
    """Total demand. Kueue's own accounting (the manager's admission) when there is one,
    else the pod templates times their counts."""
    total: Resources = {}
    admission = (workload.get("status") or {}).get("admission") or {}
    assignments = admission.get("podSetAssignments") or []
    if assignments and all("resourceUsage" in a for a in assignments):
        for assignment in assignments:
            for r, a in (assignment.get("resourceUsage") or {}).items():
                _add(total, r, a)
        return total
    pod_sets = (workload.get("spec") or {}).get("podSets")
    if not isinstance(pod_sets, list) or not pod_sets:
        raise MalformedWorkload("spec.podSets is missing or empty")
    for pod_set in pod_sets:
        count = pod_set.get("count", 1)
        if not isinstance(count, int) or count < 0:
            raise MalformedWorkload(f"pod set {pod_set.get('name')!r} has count {count!r}")
        spec = ((pod_set.get("template") or {}).get("spec")) or {}
        for r, a in _pod_requests(spec).items():
            total[r] = total.get(r, 0) + a * count
    return total


def group_of(workload: Mapping[str, Any]) -> tuple[str, str] | None:
    """(namespace, owner uid) of a component workload (one LeaderWorkerSet group), None for
    a workload that stands alone. The owner is found as Kueue v0.19.2 finds it
    (listComponentWorkloads in pkg/controller/admissionchecks/multikueue/workload.go): the
    owner reference whose kind is named by the job-owner-gvk annotation."""
    meta = workload.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if COMPONENT_INDEX not in annotations:
        return None
    group_version_kind = annotations.get(JOB_OWNER_GVK, "")
    for ref in meta.get("ownerReferences") or []:
        if not isinstance(ref, Mapping):
            continue
        group, _, version = str(ref.get("apiVersion", "")).rpartition("/")
        # Go's schema.GroupVersionKind String(): "group/version, Kind=kind" ("/v1" for core).
        if f"{group}/{version}, Kind={ref.get('kind')}" == group_version_kind and ref.get("uid"):
            return meta.get("namespace", ""), str(ref["uid"])
    return None


def group_requests(members: Iterable[Mapping[str, Any]]) -> Resources:
    """The demand of a LeaderWorkerSet: every group's workload together. Kueue sends each
    group to the cluster its primary (index 0) was admitted on (syncToSingleCluster in
    pkg/controller/admissionchecks/multikueue/workload.go, v0.19.2), so that cluster must
    hold them all."""
    total: Resources = {}
    for member in members:
        try:
            requests = requests_of(member)
        except MalformedWorkload as exc:
            raise MalformedWorkload(f"its group's workload {key_of(member)}: {exc}") from exc
        for r, a in requests.items():
            total[r] = total.get(r, 0) + a
    return total


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def view_of(workload: Mapping[str, Any]) -> WorkloadView:
    spec = workload.get("spec") or {}
    status = workload.get("status") or {}
    queue = spec.get("queueName")
    if not isinstance(queue, str) or not queue:
        raise MalformedWorkload("spec.queueName is missing")
    return WorkloadView(
        key=key_of(workload),
        queue_name=queue,
        requests=requests_of(workload),
        nominated=tuple(status.get("nominatedClusterNames") or ()),
        priority=int(spec.get("priority") or 0),
    )


def _requests_only(pod_spec: Mapping[str, Any]) -> dict[str, Any]:
    def containers(key: str) -> list[dict[str, Any]]:
        return [
            {"resources": {"requests": (c.get("resources") or {}).get("requests") or {}}}
            for c in pod_spec.get(key) or []
        ]

    trimmed: dict[str, Any] = {"containers": containers("containers")}
    if pod_spec.get("initContainers"):
        trimmed["initContainers"] = containers("initContainers")
    if pod_spec.get("overhead"):
        trimmed["overhead"] = pod_spec["overhead"]
    return trimmed


def trim(workload: Mapping[str, Any]) -> dict[str, Any]:
    """A Workload reduced to what the dispatcher reads (metadata, queue, demand, admission
    state): a watch cache of 10,000 full Workloads, pod templates and managedFields
    included, would be most of the controller's memory."""
    meta = workload.get("metadata") or {}
    spec = workload.get("spec") or {}
    status = workload.get("status") or {}
    kept_spec: dict[str, Any] = {
        k: spec[k] for k in ("queueName", "active", "priority") if k in spec
    }
    kept_spec["podSets"] = (
        [
            {
                "name": p.get("name"),
                "count": p.get("count", 1),
                "template": {"spec": _requests_only((p.get("template") or {}).get("spec") or {})},
            }
            for p in spec.get("podSets") or []
            if isinstance(p, Mapping)
        ]
        if isinstance(spec.get("podSets"), list)
        else spec.get("podSets")
    )
    kept_status = {
        k: status[k]
        for k in ("clusterName", "nominatedClusterNames", "admission", "admissionChecks")
        if k in status
    }
    kept_status["conditions"] = [
        {k: c.get(k) for k in ("type", "status", "lastTransitionTime")}
        for c in status.get("conditions") or []
    ]
    kept_meta = {
        k: meta[k] if k in _UNIQUE else _shared(meta[k])
        for k in ("name", "namespace", "uid", "annotations", "resourceVersion")
        if k in meta
    }
    if meta.get("ownerReferences"):
        # What finds a LeaderWorkerSet's groups (group_of).
        kept_meta["ownerReferences"] = _shared(
            [
                {k: ref.get(k) for k in ("apiVersion", "kind", "uid")}
                for ref in meta["ownerReferences"]
                if isinstance(ref, Mapping)
            ]
        )
    return {
        "apiVersion": _shared(workload.get("apiVersion")),
        "kind": _shared(workload.get("kind")),
        "metadata": kept_meta,
        "spec": _shared(kept_spec),
        "status": _shared(kept_status),
    }


_UNIQUE = ("name", "uid", "resourceVersion")  # one of each per workload: sharing gains nothing


def _shared(value: Any) -> Any:
    """The same value with every string interned. Each watch event is decoded on its own,
    so 10,000 workloads would otherwise hold 10,000 copies of "QuotaReserved", "cpu",
    their namespace, queue and flavor names: about half of the cache's memory."""
    if isinstance(value, str):
        return sys.intern(value)
    if isinstance(value, dict):
        return {sys.intern(k) if isinstance(k, str) else k: _shared(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shared(v) for v in value]
    return value
