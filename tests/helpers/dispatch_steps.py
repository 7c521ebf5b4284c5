"""What the real tier submits and watches when the project's dispatcher dispatches through real
MultiKueue (tests/real/test_real_dispatch.py; the same steps on a fleet the real Pulumi engine
made, tests/real/test_real_pulumi.py): the dev stack's fleet on loopback
(tests/helpers/real_fleet.py) and the dispatcher as a local process with the settings, rights
and reader kubeconfigs the project renders. No kubelet: a workload stays admitted (quota
reserved) on its worker, which is all dispatch needs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import watch
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from components.objects.multikueue import multikueue_cluster
from controller.model import milli
from loopback.client import Client
from loopback.dispatcher import LocalDispatcher
from loopback.processes import log_tail
from tests.helpers.real_fleet import K, MultiKueueFleet, active_condition

NAMESPACE = "default"
QUEUE = "user-queue"  # the dev stack's LocalQueue in `default`, on every cluster
WORKLOADS = f"{K}/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GROUP_INDEX = "kueue.x-k8s.io/component-workload-index"
DISPATCHER = "multikueue-fleet-dispatcher"  # the reportingComponent of its Events
# Generous for a loaded 2-core machine; a healthy run takes a few seconds per step.
STEP = 90.0
ADMISSION_GATE = "kueue.x-k8s.io/admission"


# --- what is submitted ------------------------------------------------------------------


def _pod(cpu: str) -> dict[str, Any]:
    return {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
            }
        ],
    }


def batch_job(name: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {QUEUE_LABEL: QUEUE}},
        "spec": {"suspend": True, "template": {"spec": _pod(cpu)}},
    }


def jobset(name: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {QUEUE_LABEL: QUEUE}},
        "spec": {
            "suspend": True,
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 2,
                    "template": {"spec": {"template": {"spec": _pod(cpu)}}},
                }
            ],
        },
    }


def leader_worker_set(name: str, cpu: str, groups: int) -> dict[str, Any]:
    """As a user writes it: LWS's webhook (its controller runs on every cluster here) fills
    in the rest."""
    pod = {k: v for k, v in _pod(cpu).items() if k != "restartPolicy"}  # StatefulSet pods
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {QUEUE_LABEL: QUEUE}},
        "spec": {
            "replicas": groups,
            "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": pod}},
        },
    }


# --- what is watched --------------------------------------------------------------------


@dataclass
class Seen:
    """Every distinct nomination list and cluster name a manager Workload went through."""

    nominations: list[tuple[str, ...]] = field(default_factory=list)
    cluster: str | None = None


class NominationLog:
    """Watches the manager's Workloads from a thread and keeps, per Workload, each
    `status.nominatedClusterNames` it had: Kueue clears the list once a worker admits
    (pkg/controller/admissionchecks/multikueue/workload.go at v0.19.2), so a poll would
    often miss it."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.seen: dict[str, Seen] = {}
        self.lock = threading.Lock()
        self.watcher = watch.Watch()
        self.stopped = threading.Event()
        self.error = ""
        self.thread = threading.Thread(target=self._run, name="nominations", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        resource = self.client.dynamic.resources.get(api_version=WORKLOADS, kind="Workload")
        version: str | None = None
        while not self.stopped.is_set():
            try:
                for event in self.client.dynamic.watch(
                    resource, NAMESPACE, resource_version=version, timeout=30, watcher=self.watcher
                ):
                    obj = event["raw_object"]
                    version = obj["metadata"]["resourceVersion"]
                    status = obj.get("status") or {}
                    with self.lock:
                        seen = self.seen.setdefault(obj["metadata"]["name"], Seen())
                        names = tuple(status.get("nominatedClusterNames") or ())
                        if names and (not seen.nominations or seen.nominations[-1] != names):
                            seen.nominations.append(names)
                        seen.cluster = status.get("clusterName") or seen.cluster
            except ApiException as exc:
                if exc.status == 410:
                    version = None  # too old: start from the current state
                else:
                    self.error = str(exc)
                    time.sleep(1)
            except Exception as exc:  # noqa: BLE001 - said in failure messages, then retried
                self.error = repr(exc)
                time.sleep(1)

    def of(self, workload: str) -> Seen:
        with self.lock:
            found = self.seen.get(workload, Seen())
            return Seen(list(found.nominations), found.cluster)

    def stop(self) -> None:
        self.stopped.set()
        self.watcher.stop()


@dataclass
class Dispatching:
    fleet: MultiKueueFleet
    dispatcher: LocalDispatcher
    nominations: NominationLog
    down: set[str] = field(default_factory=set)  # workers whose API server is stopped

    @property
    def manager(self) -> Client:
        return self.fleet.manager

    def worker(self, name: str) -> Client:
        return self.fleet.workers[name]

    @property
    def worker_names(self) -> list[str]:
        return [w.name for w in self.fleet.spec.workers]

    def logs(self) -> str:
        """The dispatcher's log end, and each Kueue's last errors: for failure messages."""
        parts = [f"dispatcher log ends: {log_tail(self.dispatcher.log, 12)}"]
        for name in self.fleet.fleet.clusters:
            path = self.fleet.kueue_log(name)
            errors = [
                line[:400]
                for line in path.read_text(errors="replace").splitlines()
                if '"level":"error"' in line
            ]
            kueue = self.fleet.fleet.kueues.get(name)
            running = "running" if kueue is None or kueue.running() else "EXITED"
            parts.append(
                f"{name} Kueue ({running}) last errors: {' | '.join(errors[-4:]) or 'none'}"
            )
        if self.nominations.error:
            parts.append(f"nomination watch: {self.nominations.error}")
        return "\n".join(parts)

    def wait(self, what: str, check: Callable[[], Any], timeout: float = STEP) -> Any:
        """Polls `check` until it returns something true; fails saying `what` was awaited
        and what the logs say."""
        deadline = time.monotonic() + timeout
        while True:
            found = check()
            if found:
                return found
            if time.monotonic() > deadline:
                pytest.fail(f"after {timeout:.0f} s, still waiting for {what}\n{self.logs()}")
            time.sleep(0.5)

    # --- reading -----------------------------------------------------------------------

    def workload_of(self, kind: str, name: str, index: str | None = None) -> dict[str, Any]:
        """The manager's Workload that Kueue made for the object (a LeaderWorkerSet has one
        per group: `index` says which)."""

        def find() -> dict[str, Any] | None:
            for wl in self.manager.list(WORKLOADS, "Workload", NAMESPACE):
                meta = wl["metadata"]
                owners = meta.get("ownerReferences") or []
                annotations = meta.get("annotations") or {}
                if any(o["kind"] == kind and o["name"] == name for o in owners) and (
                    index is None or annotations.get(GROUP_INDEX) == index
                ):
                    return wl
            return None

        return self.wait(f"Kueue to make a Workload for {kind} {name}", find)

    def manager_workload(self, name: str) -> dict[str, Any]:
        found = self.manager.get(WORKLOADS, "Workload", name, NAMESPACE)
        assert found is not None, f"the manager's Workload {name} is gone\n{self.logs()}"
        return found

    def copies(self, workload: str) -> dict[str, dict[str, Any]]:
        """Worker -> its copy of the Workload, for the workers that have one (among those
        whose API server is up)."""
        found = {}
        for name in [w for w in self.worker_names if w not in self.down]:
            copy = self.worker(name).get(WORKLOADS, "Workload", workload, NAMESPACE)
            if copy is not None:
                found[name] = copy
        return found

    def dispatcher_events(self, workload: str) -> list[dict[str, Any]]:
        return [
            e
            for e in self.manager.list("v1", "Event", NAMESPACE)
            if e["involvedObject"].get("name") == workload
            and e.get("reportingComponent") == DISPATCHER
        ]

    # --- steps -------------------------------------------------------------------------

    def submit(self, obj: dict[str, Any]) -> None:
        self.manager.create(obj)

    def admitted_where(self, workload: str, timeout: float = STEP) -> str:
        """The worker the manager's Workload was admitted on, once it is, after checking
        every step on the way there."""
        cluster = self.wait(
            f"the manager's Workload {workload} to get status.clusterName",
            lambda: (self.manager_workload(workload).get("status") or {}).get("clusterName"),
            timeout,
        )
        seen = self.nominations.of(workload)
        assert any(cluster in names for names in seen.nominations), (
            f"{workload} went to {cluster}, which was never among its nominations "
            f"{seen.nominations}\n{self.logs()}"
        )
        # The copy there, admitted by that worker's Kueue into its own ClusterQueue.
        copy = self.wait(
            f"the copy of {workload} on {cluster} to be admitted there",
            lambda: _admitted_copy(self.worker(cluster), workload),
        )
        assert copy["status"]["admission"]["clusterQueue"], copy["status"]
        # And nowhere else (MultiKueue removes the copies on the other nominated workers).
        self.wait(
            f"{workload} to have a copy on {cluster} only",
            lambda: set(self.copies(workload)) == {cluster},
        )
        # Admitted follows in the core workload controller's own reconcile once the checks
        # are Ready (pkg/controller/core/workload_controller.go 775-787, v0.19.2), after the
        # MultiKueue controller's write of clusterName and the check: a moment later.
        self.wait(
            f"{workload} to be Admitted on the manager",
            lambda: condition_true(self.manager_workload(workload)["status"], "Admitted"),
        )
        # No wait here for the worker's ClusterQueue status to count the copy (Kueue writes
        # it a batch period later): the next decision must know of it already, from the
        # dispatcher's own demand in flight and the worker's Workloads.
        return str(cluster)

    def stop_worker(self, name: str) -> None:
        self.down.add(name)
        self.fleet.fleet.stop_apiserver(name)

    def restart_worker(self, name: str) -> None:
        self.fleet.fleet.restart_apiserver(name)
        self.down.discard(name)

    def lands_on(self, workload: str, expected: str, timeout: float = STEP) -> None:
        cluster = self.admitted_where(workload, timeout)
        said = [e["message"] for e in self.dispatcher_events(workload)]
        assert cluster == expected, (
            f"{workload} went to {cluster}, not {expected}; the dispatcher said {said}\n"
            f"{self.logs()}"
        )

    def clear(self) -> None:
        """Deletes everything submitted; returns once every worker's quota is free again,
        so each test starts from an empty fleet."""
        for api_version, kind in (
            ("batch/v1", "Job"),
            ("jobset.x-k8s.io/v1alpha2", "JobSet"),
            ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
        ):
            try:
                submitted = self.manager.list(api_version, kind, NAMESPACE)
            except ResourceNotFoundError:
                continue  # a framework this fleet does not enable
            for obj in submitted:
                self.manager.delete(
                    {"apiVersion": api_version, "kind": kind, "metadata": obj["metadata"]},
                    propagation="Background",
                )

        def empty() -> bool:
            clusters = [self.manager, *self.fleet.workers.values()]
            return not any(c.list(WORKLOADS, "Workload", NAMESPACE) for c in clusters)

        self.wait("every Workload, on the manager and on the workers, to be gone", empty)

        # What the dispatcher reads a worker's free quota from: its ClusterQueues' status,
        # which Kueue updates after the Workloads are gone.
        def free() -> bool:
            return all(
                not _reserved(queue)
                for worker in self.fleet.workers.values()
                for queue in worker.list(WORKLOADS, "ClusterQueue")
            )

        self.wait("every worker's ClusterQueue to report its quota free", free)


def pods_of(client: Client, owner: str, gated: bool) -> int:
    """How many pods of the LeaderWorkerSet `owner` are (not) held by Kueue's admission
    gate."""
    count = 0
    for pod in client.list("v1", "Pod", NAMESPACE):
        labels = pod["metadata"].get("labels") or {}
        if labels.get("leaderworkerset.sigs.k8s.io/name") != owner:
            continue
        gates = [g["name"] for g in pod["spec"].get("schedulingGates") or []]
        count += (ADMISSION_GATE in gates) == gated
    return count


def _reserved(queue: dict[str, Any]) -> bool:
    status = queue.get("status") or {}
    return bool(status.get("reservingWorkloads")) or any(
        milli(r.get("total", "0"))
        for flavor in status.get("flavorsReservation") or []
        for r in flavor.get("resources") or []
    )


def condition_true(status: dict[str, Any], kind: str, reason: str = "") -> bool:
    """Whether `status` has condition `kind` True (with `reason`, when one is given)."""
    return any(
        c["type"] == kind and c["status"] == "True" and (not reason or c.get("reason") == reason)
        for c in status.get("conditions") or []
    )


def _admitted_copy(worker: Client, workload: str) -> dict[str, Any] | None:
    copy = worker.get(WORKLOADS, "Workload", workload, NAMESPACE)
    status = (copy or {}).get("status") or {}
    if condition_true(status, "QuotaReserved") and condition_true(status, "Admitted"):
        return copy
    return None


# --- steps the dispatch tests share (tests/real/test_real_dispatch.py, test_real_pulumi.py) ---


def a_job_is_nominated_and_admitted_on_that_worker_only(dispatching: Dispatching) -> None:
    d = dispatching
    d.submit(batch_job("first", "1"))
    workload = d.workload_of("Job", "first")["metadata"]["name"]
    cluster = d.admitted_where(workload)
    seen = d.nominations.of(workload)
    # One worker, as the dev stack's policy says (clustersToNominate: 1), chosen once.
    assert seen.nominations == [(cluster,)], seen
    events = d.wait(f"the dispatcher's Event on {workload}", lambda: d.dispatcher_events(workload))
    assert events[0]["reason"] == "Nominated" and cluster in events[0]["message"], events
    # MultiKueue made the Job itself on that worker, and only there.
    jobs = {w: d.worker(w).get("batch/v1", "Job", "first", NAMESPACE) for w in d.worker_names}
    assert {w for w, job in jobs.items() if job} == {cluster}, jobs
    # The dispatcher wrote its policy's status with the rights the project gives it.
    policy = d.manager.get("dispatch.multikueue-fleet.io/v1alpha1", "DispatchPolicy", "default")
    ready = [
        c for c in (policy or {}).get("status", {}).get("conditions", []) if c["type"] == "Ready"
    ]
    assert ready and ready[0]["status"] == "True", f"{policy}\n{d.logs()}"
    d.clear()


def a_stopped_worker_is_left_out_loses_nothing_and_is_used_again(dispatching: Dispatching) -> None:
    """Each worker has 4 CPUs (the dev stack); the sizes make the step the same whether the
    policy packs (BestFit, the default) or spreads. `first` is the worker the first Job lands
    on: on an empty fleet a tie goes to the MultiKueueConfig's first worker, but the
    dispatcher may not have seen the last test's ClusterQueue status free yet (its watch lags
    the server on a loaded host, and it takes the larger of that status and the Workloads it
    sees: fleet_state.queue_capacity), and which worker this step stops is not the point."""
    d = dispatching

    d.submit(batch_job("before-1", "2"))
    on_first = d.workload_of("Job", "before-1")["metadata"]["name"]
    first = d.admitted_where(on_first)
    (second,) = [w for w in d.worker_names if w != first]
    d.submit(batch_job("before-2", "3"))  # 2 CPUs free on `first`: only `second` holds it
    on_second = d.workload_of("Job", "before-2")["metadata"]["name"]
    d.lands_on(on_second, second)
    uid_there = d.worker(first).get(WORKLOADS, "Workload", on_first, NAMESPACE)["metadata"]["uid"]

    d.stop_worker(first)
    d.wait(
        f"Kueue to mark the MultiKueueCluster {first} inactive",
        lambda: (active_condition(d.manager, first) or {}).get("status") == "False",
    )
    # 1 CPU: `second` (1 free) takes it; `first` (2 free) is judged and left out.
    d.submit(batch_job("during", "1"))
    during = d.workload_of("Job", "during")["metadata"]["name"]
    d.lands_on(during, second)
    assert all(first not in names for names in d.nominations.of(during).nominations)
    said = d.wait(f"the dispatcher's Event on {during}", lambda: d.dispatcher_events(during))
    assert f"{first} (not connected" in said[0]["message"] or (
        f"{first} (unreachable" in said[0]["message"]
    ), said[0]["message"]
    # 2 CPUs fit only on `first` (none free on `second`), which is not connected: never
    # nominated there. The queues are Kueue's defaults (BestEffortFIFO, no preemption), where
    # a copy of a workload needing half a worker or more would only wait while smaller work
    # passes it: the dispatcher holds it on the manager (controller/policy.py `held`). Had
    # its view of `second` lagged (room the admitted Jobs already took), it was nominated
    # there and stays there.
    d.submit(batch_job("waits", "2"))
    waits = d.workload_of("Job", "waits")["metadata"]["name"]
    said = d.wait(f"the dispatcher's Event on {waits}", lambda: d.dispatcher_events(waits))
    seen = d.nominations.of(waits)
    assert all(first not in names for names in seen.nominations) and seen.cluster is None, seen
    assert "held on the manager" in said[0]["message"] or seen.nominations == [(second,)], (
        said[0]["message"],
        seen,
    )
    # Nothing admitted was lost: each stays admitted where it was.
    for workload, cluster in ((on_first, first), (on_second, second), (during, second)):
        status = d.manager_workload(workload)["status"]
        assert status.get("clusterName") == cluster and condition_true(status, "Admitted"), (
            f"{workload}: {status}\n{d.logs()}"
        )

    d.restart_worker(first)
    d.wait(
        f"Kueue to mark the MultiKueueCluster {first} active again",
        lambda: (active_condition(d.manager, first) or {}).get("status") == "True",
        timeout=180,  # MultiKueue's reconnect backoff: 5 s, doubling, while it was away
    )
    # The waiting Job now fits on `first` (2 free): nominated there (as well), admitted there.
    d.lands_on(waits, first, timeout=180)
    # The work admitted on `first` before the outage is the very same copy, still admitted.
    copy = d.worker(first).get(WORKLOADS, "Workload", on_first, NAMESPACE)
    assert copy is not None and copy["metadata"]["uid"] == uid_there, copy
    assert _admitted_copy(d.worker(first), on_first), copy
    assert d.manager_workload(on_first)["status"].get("clusterName") == first
    d.clear()


def cordon(d: Dispatching, worker: str, cordoned: bool) -> None:
    """What `pulumi up` does after `mkf cordon` / `mkf uncordon`: the worker's
    MultiKueueCluster as the project renders it with `cordoned` set, applied on the manager;
    returns once the dispatcher says (its mkf_worker_cordoned gauge) that it saw it."""
    spec = d.fleet.spec
    index = d.worker_names.index(worker)
    changed = spec.workers[index].model_copy(update={"cordoned": cordoned})
    d.manager.apply(multikueue_cluster(spec, changed))
    line = f'mkf_worker_cordoned{{cluster="{worker}"}} {1.0 if cordoned else 0.0}'
    d.wait(
        f"the dispatcher to see {worker} {'cordoned' if cordoned else 'uncordoned'}",
        lambda: line in d.dispatcher.metrics_text(),
    )


def finish_job_on(d: Dispatching, worker: str, job: str) -> None:
    """The Job's pods on `worker` succeed, as a kubelet would report them (loopback has
    none); the worker's job controller then completes the Job."""
    pods = [
        p
        for p in d.worker(worker).list("v1", "Pod", NAMESPACE)
        if (p["metadata"].get("labels") or {}).get("job-name") == job
    ]
    assert pods, f"no pod of Job {job} on {worker}"
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    done = {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}
    for pod in pods:
        d.worker(worker).patch_status(
            "v1",
            "Pod",
            pod["metadata"]["name"],
            NAMESPACE,
            {
                "phase": "Succeeded",
                "containerStatuses": [
                    {
                        "name": c["name"],
                        "image": c["image"],
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": {"terminated": done},
                    }
                    for c in pod["spec"]["containers"]
                ],
            },
        )


def a_cordoned_worker_gets_nothing_new_and_what_runs_there_finishes(d: Dispatching) -> None:
    """Each worker has 4 CPUs (the dev stack); the sizes make the step the same whether the
    policy packs (BestFit, the default) or spreads, with ties going to the first worker of
    the MultiKueueConfig."""
    first, second = d.worker_names
    d.submit(batch_job("runs-on", "1"))
    runs_on = d.workload_of("Job", "runs-on")["metadata"]["name"]
    d.lands_on(runs_on, first)  # a tie: the first worker
    d.submit(batch_job("elsewhere", "4"))  # 3 CPUs free on `first`: only `second` holds it
    elsewhere = d.workload_of("Job", "elsewhere")["metadata"]["name"]
    d.lands_on(elsewhere, second)

    cordon(d, first, True)
    # 1 CPU fits only on `first` (3 free; none on `second`), which is cordoned: it waits on
    # `second`, is never nominated to `first`, and is admitted there once `elsewhere` ends.
    d.submit(batch_job("after-cordon", "1"))
    after = d.workload_of("Job", "after-cordon")["metadata"]["name"]
    said = d.wait(f"the dispatcher's Event on {after}", lambda: d.dispatcher_events(after))
    assert f"{first} (cordoned" in said[0]["message"], said[0]["message"]
    d.wait(
        f"the pod of Job elsewhere on {second}",
        lambda: d.worker(second).list("v1", "Pod", NAMESPACE),
    )
    finish_job_on(d, second, "elsewhere")
    d.lands_on(after, second)
    assert all(first not in names for names in d.nominations.of(after).nominations)
    # What `first` admitted before the cordon runs there to its end.
    d.wait(
        f"the pod of Job runs-on on {first}",
        lambda: d.worker(first).list("v1", "Pod", NAMESPACE),
    )
    finish_job_on(d, first, "runs-on")
    d.wait(
        f"{runs_on} to finish on the manager (MultiKueue reports the worker's Job done)",
        lambda: condition_true(d.manager_workload(runs_on)["status"], "Finished"),
    )
    assert d.manager_workload(runs_on)["status"].get("clusterName") == first

    cordon(d, first, False)
    # `first` is empty again (4 free), `second` holds 1: only `first` holds 4.
    d.submit(batch_job("back", "4"))
    d.lands_on(d.workload_of("Job", "back")["metadata"]["name"], first)
    d.clear()
