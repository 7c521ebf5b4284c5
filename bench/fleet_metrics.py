"""Dispatch-quality measures of a real fleet run, read from Kueue's own objects (issue 30,
part 1): what the manager's and the workers' Workloads went through, as a watch on each
recorded them (every version seen, in order). Pure: recorded objects in, numbers out, so
the same measures are tested on recorded objects without a cluster and compared with the
simulation's (bench/dispatch_quality.py `measure`) column by column.

Kueue v0.19.2's objects, as read here:
- a Workload's conditions (apis/kueue/v1beta2/workload_types.go 929-1012): QuotaReserved
  (quota reserved in its ClusterQueue), Admitted (reserved and every admission check Ready:
  on the manager, once the MultiKueue check is Ready, that is once a worker admitted its
  copy), Finished, Evicted (reason "Preempted" for a workload preempted in its queue,
  WorkloadEvictedByPreemption, line 1083), whose message names the preemptor's UID:
  "Preempted to accommodate a workload (UID: <uid>, JobUID: ...) due to ..."
  (preemptionMessage in pkg/scheduler/preemption/preemption.go, the message
  IssuePreemptions hands to evict.Evict, which sets it on Evicted:
  pkg/workload/evict/evict.go SetEvictedCondition);
- a worker's copy of a manager Workload has the same namespace and name and the label
  kueue.x-k8s.io/multikueue-origin (apis/kueue/v1beta2/multikueue_types.go 29; set in
  pkg/controller/admissionchecks/multikueue/workload.go 1355);
- the manager's `status.clusterName` names the worker whose copy it took.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
PREEMPTOR = re.compile(r"Preempted to accommodate a workload \(UID: ([^,)]+)")

Obj = dict[str, Any]


class RecordError(ValueError):
    """A recorded object this module cannot read; the message says which and why."""


def _time(value: Any, where: str) -> float:
    if not isinstance(value, str):
        raise RecordError(f"{where}: no time (got {value!r}); record whole Workload objects")
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise RecordError(f"{where}: {value!r} is not an RFC 3339 time") from None


def _name(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    if not meta.get("name"):
        raise RecordError("a recorded object has no metadata.name; record whole objects")
    return f"{meta.get('namespace', '')}/{meta['name']}"


def _true_condition(obj: Obj, kind: str) -> tuple[float, str, str] | None:
    """(lastTransitionTime, reason, message) of condition `kind` when it is True."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            where = f"Workload {_name(obj)} condition {kind}"
            since = _time(cond.get("lastTransitionTime"), where)
            return since, cond.get("reason", ""), cond.get("message") or ""
    return None


def _true_since(obj: Obj, kind: str) -> tuple[float, str] | None:
    """(lastTransitionTime, reason) of condition `kind` when it is True."""
    found = _true_condition(obj, kind)
    return found[:2] if found else None


@dataclass
class _History:
    """What one Workload went through, from every version of it seen."""

    created: float = math.nan
    reserved: list[float] = field(default_factory=list)  # QuotaReserved transitions
    admitted: list[float] = field(default_factory=list)  # Admitted transitions
    evicted: list[tuple[float, str]] = field(default_factory=list)  # (time, reason)
    # Per preemption (an eviction with reason Preempted): when, and the preemptor's UID
    # ("" unnamed).
    preemptors: list[tuple[float, str]] = field(default_factory=list)
    uid: str = ""
    finished: float | None = None
    clusters: set[str] = field(default_factory=set)  # clusterName values seen (manager)
    nominated: set[str] = field(default_factory=set)  # nominatedClusterNames seen (manager)
    origin: bool = False  # a MultiKueue copy (on a worker)
    owners: set[str] = field(default_factory=set)  # namespace/name of its owners
    deleted: float | None = None  # its deletionTimestamp

    def see(self, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        if math.isnan(self.created):
            self.created = _time(meta.get("creationTimestamp"), f"Workload {_name(obj)}")
        self.origin = self.origin or ORIGIN_LABEL in (meta.get("labels") or {})
        for kind, times in (("QuotaReserved", self.reserved), ("Admitted", self.admitted)):
            found = _true_since(obj, kind)
            if found and found[0] not in times:
                times.append(found[0])
        self.uid = self.uid or meta.get("uid", "")
        evicted = _true_condition(obj, "Evicted")
        if evicted and evicted[:2] not in self.evicted:
            self.evicted.append(evicted[:2])
            if evicted[1] == "Preempted":
                named = PREEMPTOR.search(evicted[2])
                self.preemptors.append((evicted[0], named.group(1) if named else ""))
        finished = _true_since(obj, "Finished")
        if finished and self.finished is None:
            self.finished = finished[0]
        status = obj.get("status") or {}
        if status.get("clusterName"):
            self.clusters.add(status["clusterName"])
        self.nominated.update(status.get("nominatedClusterNames") or [])
        for owner in meta.get("ownerReferences") or []:
            self.owners.add(f"{meta.get('namespace', '')}/{owner.get('name', '')}")
        if meta.get("deletionTimestamp") and self.deleted is None:
            self.deleted = _time(meta["deletionTimestamp"], f"Workload {_name(obj)}")


def _histories(objects: Iterable[Obj]) -> dict[str, _History]:
    """By namespace/name and uid (a name reused by a new object is a new workload)."""
    out: dict[str, _History] = {}
    for obj in objects:
        meta = obj.get("metadata") or {}
        out.setdefault(f"{_name(obj)}/{meta.get('uid', '')}", _History()).see(obj)
    return out


def _by_name(histories: dict[str, _History]) -> dict[str, _History]:
    """The histories by namespace/name: what a worker's copy is matched by."""
    return {key.rsplit("/", 1)[0]: h for key, h in histories.items()}


def _per_worker(workers: Mapping[str, Iterable[Obj]]) -> dict[str, dict[str, _History]]:
    return {worker: _histories(objects) for worker, objects in workers.items()}


def _taken_copies(
    ours: dict[str, _History], workers: dict[str, dict[str, _History]]
) -> Iterator[tuple[str, _History, _History]]:
    """(namespace/name, manager history, copy history) for each admitted copy a manager
    Workload took: on a worker in its clusterName values or, where the manager never named
    one, a copy that ran to Finished."""
    for worker, histories in workers.items():
        for key, h in histories.items():
            name = key.rsplit("/", 1)[0]
            owner = ours.get(name)
            if not h.origin or not h.admitted or owner is None:
                continue
            if worker in owner.clusters or (not owner.clusters and h.finished is not None):
                yield name, owner, h


def _admitted_on_workers(
    ours: dict[str, _History], workers: dict[str, dict[str, _History]]
) -> dict[int, list[float]]:
    """Per manager Workload (by id of its history): the first Admitted of each copy it took,
    as that worker stamped it."""
    found: dict[int, list[float]] = {}
    for _, owner, h in _taken_copies(ours, workers):
        found.setdefault(id(owner), []).append(h.admitted[0])
    return found


def preemptions_of(
    manager: Iterable[Obj], workers: dict[str, list[Obj]]
) -> list[tuple[float, str, str, str]]:
    """Each preemption on the workers, as the simulation lists them (dq_sim Stats.victims):
    (time, worker, victim, preemptor), each workload named by its owner (the stream's job
    name; a MultiKueue copy, which has none on its worker, by its manager Workload's), the
    preemptor "" where no watch recorded it; local work preempting local work included
    (its preemptor names a job of the local stream)."""
    ours = _by_name(_histories(manager))
    found = []
    for worker, histories in _per_worker(workers).items():
        by_uid = {h.uid: (key.rsplit("/", 1)[0], h) for key, h in histories.items() if h.uid}

        def owner(name: str, h: _History) -> str:
            if h.origin and name in ours:
                h = ours[name]
            return min(h.owners).split("/", 1)[1] if h.owners else ""

        for key, h in histories.items():
            for when, uid in h.preemptors:
                victim = owner(key.rsplit("/", 1)[0], h)
                preemptor = owner(*by_uid[uid]) if uid in by_uid else ""
                found.append((when, worker, victim, preemptor))
    return sorted(found)


def delays(manager: Iterable[Obj], workers: dict[str, list[Obj]]) -> dict[str, list[float]]:
    """The delays the simulation's Settings stand for, as a run shows them (seconds; the
    objects' times are whole seconds, so each is a mean over many, not one reading):
    - sync: a copy's creation on a worker after its manager Workload's QuotaReserved
      (Settings.sync_delay, manager to worker);
    - admission: a copy's QuotaReserved after its creation, for copies that preempted
      nothing and were reserved within 2 s, so no wait for quota is counted
      (Settings.admission_delay);
    - back: the manager's Admitted after the chosen copy's Admitted on its worker
      (Settings.sync_delay, worker to manager)."""
    ours = _by_name(_histories(manager))
    found: dict[str, list[float]] = {"sync": [], "admission": [], "back": []}
    for worker, histories in _per_worker(workers).items():
        preemptors = {uid for h in histories.values() for _, uid in h.preemptors}
        for key, h in histories.items():
            owner = ours.get(key.rsplit("/", 1)[0])
            if not h.origin or owner is None:
                continue
            if owner.reserved and not math.isnan(h.created):
                found["sync"].append(h.created - owner.reserved[0])
            if h.reserved and h.uid not in preemptors and h.reserved[0] - h.created <= 2:
                found["admission"].append(h.reserved[0] - h.created)
            if h.admitted and owner.admitted and worker in owner.clusters:
                found["back"].append(owner.admitted[0] - h.admitted[0])
    return found


# The parts a measured wait is made of, in order (wait_parts).
PARTS = ("to the worker", "worker queue")


def wait_parts(
    manager: Iterable[Obj], workers: dict[str, Iterable[Obj]]
) -> dict[str, tuple[float, float, float]]:
    """Where each measured wait went (`measure`'s waits: the manager's first QuotaReserved to
    the first admission of the copy it took), per manager Workload (namespace/name) whose
    taken copy was seen: (before it, to the worker, worker queue), seconds:
    - before it: the manager's queue, from the Workload's creation to its QuotaReserved
      (not in the wait; shown as the quota the manager holds is the workers' sum);
    - to the worker: QuotaReserved to the creation of the copy it took: the dispatcher
      (ours, or Kueue's own nomination), then MultiKueue making the copy through Kueue's
      client to that worker; for a LeaderWorkerSet's other groups, also their primary's
      wait, as MultiKueue sends none of them before the primary is admitted on a worker
      (nominateAndSynchronizeWorkers, pkg/controller/admissionchecks/multikueue/
      workload.go 899-902 at v0.19.2);
    - worker queue: that copy's creation to its first Admitted there."""
    found: dict[str, tuple[float, float, float]] = {}
    for name, owner, h in _taken_copies(_by_name(_histories(manager)), _per_worker(workers)):
        if not owner.reserved or math.isnan(h.created):
            continue
        reserved = owner.reserved[0]
        parts = (reserved - owner.created, h.created - reserved, h.admitted[0] - h.created)
        # A copy made again after an eviction: the first one's is the measured wait.
        if name not in found or parts[1] < found[name][1]:
            found[name] = parts
    return found


def percentile(values: list[float], p: float) -> float:
    """Nearest rank, as bench/dispatch_quality.py computes it; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def measure(
    manager: Iterable[Obj],
    workers: dict[str, Iterable[Obj]],
    served: Iterable[str] = (),
    deleted: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """The measures of one run. `manager`: every version of the manager's Workloads seen;
    `workers`: per worker, every version of its Workloads seen (local work included);
    `served`: namespace/name of the objects the replay deleted once they had run their time
    (LeaderWorkerSets, which never finish by themselves; JobSets where nothing runs them):
    their Workloads end when deleted;
    `deleted`: namespace/name -> when a manager Workload's deletion was seen, for one whose
    versions never showed a deletionTimestamp (deleted with no finalizer left).

    - waits (seconds): first QuotaReserved on the manager to the first admission of the
      copy it took, on that worker, as the simulation's `admit` columns count it; not to
      the manager's Admitted, which comes when MultiKueue has seen that admission (half a
      second to a second later on the KWOK fleet, bench/preemption_compare.py), a way back
      the simulation's admission time does not include. Where no copy it took was seen,
      the manager's first Admitted;
    - jct (seconds): creation of the manager Workload to its Finished;
    - copies per workload: distinct MultiKueue copies created on workers, per manager
      Workload (re-creations after an eviction included);
    - preemptions: workloads on workers preempted for a MultiKueue copy (the Evicted
      message's preemptor UID is a copy's on that worker), as the simulation counts them;
    - local preemptions: the other preemptions on workers (local work preempting local
      work, or a preemptor no watch recorded), reported apart;
    - evictions: evictions of manager Workloads (back to the manager's queue);
    - lost: copies admitted on a worker the manager never nominated for them (in no
      nominatedClusterNames seen) and never took (no such clusterName): the simulation's
      lost admissions, where a worker admits a copy it should no longer hold. A copy that
      races and loses where it was nominated (AllAtOnce's on every worker; Kueue sets
      nominatedClusterNames to every worker for it, pkg/controller/admissionchecks/
      multikueue/workload.go 911-924 at v0.19.2) is not lost: it is what copies/wl counts.
      Blind spot: a worker nominated, dropped, then admitting counts as nominated;
    - unfinished, pending: manager Workloads never Finished, and never admitted (neither
      Admitted on the manager nor a copy it took admitted on a worker: on a starved fleet,
      Kueue v0.19.2's manager can leave its MultiKueue check Pending until the copy has run
      and finished, then copy Finished over; seen with ten KWOK workers on two cores)."""
    ours = _histories(manager)
    if not ours:
        raise RecordError("no manager Workloads recorded; was anything submitted?")
    served = set(served)
    for key, h in ours.items():
        if h.deleted is None:
            h.deleted = (deleted or {}).get(key.rsplit("/", 1)[0])
        if h.finished is None and h.deleted is not None and h.owners & served:
            h.finished = h.deleted
    by_name = _by_name(ours)
    per_worker = _per_worker(workers)
    on_worker = _admitted_on_workers(by_name, per_worker)
    waits = [
        min(on_worker.get(id(h), h.admitted[:1])) - h.reserved[0]
        for h in ours.values()
        if h.reserved and (h.admitted or id(h) in on_worker)
    ]
    jct = [h.finished - h.created for h in ours.values() if h.finished is not None]
    copies = preemptions = local_preemptions = lost = 0
    for worker, histories in per_worker.items():
        copy_uids = {h.uid for h in histories.values() if h.origin and h.uid}
        for key, h in histories.items():
            by_copy = sum(1 for _, uid in h.preemptors if uid in copy_uids)
            preemptions += by_copy
            local_preemptions += len(h.preemptors) - by_copy
            if not h.origin:
                continue
            copies += 1
            owner = by_name.get(key.rsplit("/", 1)[0])
            if h.admitted and (owner is None or worker not in owner.clusters | owner.nominated):
                lost += 1
    return {
        "workloads": float(len(ours)),
        "p50": percentile(waits, 50),
        "p95": percentile(waits, 95),
        "p99": percentile(waits, 99),
        "jct_p50": percentile(jct, 50),
        "jct_p95": percentile(jct, 95),
        "copies": copies / len(ours),
        "preemptions": float(preemptions),
        "local_preemptions": float(local_preemptions),
        "evictions": float(sum(len(h.evicted) for h in ours.values())),
        "lost": float(lost),
        "unfinished": float(sum(1 for h in ours.values() if h.finished is None)),
        "pending": float(
            sum(1 for h in ours.values() if not h.admitted and id(h) not in on_worker)
        ),
    }
