"""The real tier: work dispatched through real MultiKueue by the project's dispatcher.

The dev stack's fleet on loopback (tests/helpers/real_fleet.py: kube-apiserver v1.36, Kueue v0.19.2,
every object as the project renders it, MultiKueue Active with the generated credentials),
and the dispatcher as a local process (`python -m controller run`, loopback/dispatcher.py)
with the settings the project renders, its ServiceAccount's rights on the manager and the
reader kubeconfigs the project writes for it. No kubelet: pods never run, so a workload stays
admitted (quota reserved) on its worker, which is all dispatch needs.

- a batch Job, a JobSet and a LeaderWorkerSet submitted on the manager: the dispatcher
  nominates one worker, real MultiKueue creates the copy there, that worker's Kueue admits
  it, the manager's Workload gets that `clusterName`, and the copy exists there only;
- a worker's API server stopped: the dispatcher stops nominating it, Kueue marks it
  inactive, nothing admitted is lost; started again, it is used again (for work that waited);
- a worker cordoned: nothing new goes there, the Job it runs finishes there (its pod marked
  Succeeded, as a kubelet would), and uncordoned it takes work again;
- every metric the dashboard and alerting rules in monitoring/ read is on the dispatcher's
  or a Kueue's /metrics.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import partial

import pytest
import yaml

import tests.helpers.dispatch_steps as steps
from controller.settings import Settings
from tests.helpers.dispatch_steps import (
    NAMESPACE,
    Dispatching,
    NominationLog,
    jobset,
    leader_worker_set,
    pods_of,
)
from tests.helpers.metrics_scrape import every_metric_used_is_exported
from tests.helpers.real_fleet import (
    MultiKueueFleet,
    binaries,
    not_active_message,
    start_dispatcher,
)

# The LeaderWorkerSet controller runs on every cluster of the shared dev fleet
# (tests/helpers/real_fleet.py: dev_fleet); JobSet's cannot (loopback/operators.py says why).


@pytest.fixture(scope="module")
def dispatching(dev_multikueue: MultiKueueFleet) -> Iterator[Dispatching]:
    """The project's dispatcher running locally against the dev fleet, leader, caches
    synced."""
    assert dev_multikueue.all_active(), not_active_message(dev_multikueue)
    local = start_dispatcher(dev_multikueue)
    nominations = NominationLog(dev_multikueue.manager)
    try:
        local.wait_ready(120)
        yield Dispatching(dev_multikueue, local, nominations)
    finally:
        nominations.stop()
        local.stop()


def test_a_job_is_nominated_by_the_dispatcher_and_admitted_on_that_worker_only(
    dispatching: Dispatching,
) -> None:
    steps.a_job_is_nominated_and_admitted_on_that_worker_only(dispatching)


def test_a_jobset_goes_where_the_dispatcher_nominates_it(dispatching: Dispatching) -> None:
    d = dispatching
    d.submit(jobset("sets", "500m"))
    workload = d.workload_of("JobSet", "sets")["metadata"]["name"]
    cluster = d.admitted_where(workload)
    assert d.nominations.of(workload).nominations == [(cluster,)]
    copies = {
        w: d.worker(w).get("jobset.x-k8s.io/v1alpha2", "JobSet", "sets", NAMESPACE)
        for w in d.worker_names
    }
    assert {w for w, found in copies.items() if found} == {cluster}, copies
    d.clear()


def test_a_leader_worker_set_goes_whole_to_the_worker_nominated_for_its_first_group(
    dispatching: Dispatching,
) -> None:
    """Kueue v0.19.2 makes a Workload per group; the dispatcher nominates only the group
    with component-workload-index "0" and Kueue sends the others after it
    (nominateAndSynchronizeWorkers in pkg/controller/admissionchecks/multikueue/workload.go)."""
    d = dispatching
    d.submit(leader_worker_set("serving", "500m", groups=2))
    primary = d.workload_of("LeaderWorkerSet", "serving", "0")["metadata"]["name"]
    secondary = d.workload_of("LeaderWorkerSet", "serving", "1")["metadata"]["name"]
    cluster = d.admitted_where(primary)
    assert d.admitted_where(secondary) == cluster
    events = d.wait(f"the dispatcher's Event on {primary}", lambda: d.dispatcher_events(primary))
    assert events[0]["reason"] == "Nominated" and cluster in events[0]["message"], events
    assert not d.dispatcher_events(secondary), "the dispatcher nominated a secondary group"
    copies = {
        w: d.worker(w).get("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "serving", NAMESPACE)
        for w in d.worker_names
    }
    assert {w for w, found in copies.items() if found} == {cluster}, copies
    # There, the LWS controller made the groups' 4 pods and Kueue let them be scheduled.
    d.wait(
        f"4 pods of the LeaderWorkerSet on {cluster}, none held by Kueue's admission gate",
        lambda: pods_of(d.worker(cluster), "serving", gated=False) == 4,
    )
    # On the manager its controller made them too: Kueue holds them there, they never run.
    d.wait(
        "the manager's 4 pods of the LeaderWorkerSet, each held by Kueue's admission gate",
        lambda: pods_of(d.manager, "serving", gated=True) == 4,
    )
    time.sleep(3)  # and they stay held, now that the set is admitted (on the worker)
    assert pods_of(d.manager, "serving", gated=False) == 0, d.logs()
    d.clear()


def test_a_stopped_worker_is_left_out_loses_nothing_and_is_used_again_once_back(
    dispatching: Dispatching,
) -> None:
    """Each worker has 4 CPUs (the dev stack), the policy the default (BestFit, ties going
    to the first worker of the MultiKueueConfig)."""
    steps.a_stopped_worker_is_left_out_loses_nothing_and_is_used_again(dispatching)


def test_a_cordoned_worker_gets_nothing_new_and_what_runs_there_finishes(
    dispatching: Dispatching,
) -> None:
    """`mkf cordon` then `pulumi up`: the label on the worker's MultiKueueCluster, read live by
    the dispatcher; `mkf uncordon` puts the worker back."""
    steps.a_cordoned_worker_gets_nothing_new_and_what_runs_there_finishes(dispatching)


def test_every_metric_the_dashboard_and_alerts_read_is_exported(dispatching: Dispatching) -> None:
    """monitoring/'s panels and rules, their metric names read by Prometheus' parser
    (promtool), against the dispatcher's /metrics and Kueue's on every cluster, scraped
    after a Job went through MultiKueue and a workload found no worker. Before the last
    test: that one stops the dispatcher."""
    promtool = binaries(("promtool",))["promtool"]
    every_metric_used_is_exported(dispatching, promtool)


def test_a_dispatcher_that_stops_hands_its_lease_over(dispatching: Dispatching) -> None:
    """Last in the module: it stops the dispatcher. On SIGTERM it releases its Lease, the
    way client-go's ReleaseOnCancel does, with its own ServiceAccount's rights, and the real
    API server takes the release (holder emptied, a 1-second duration)."""
    d = dispatching
    settings = yaml.safe_load(d.dispatcher.settings_file.read_text())
    name = settings.get("leaseName", Settings.lease_name)
    namespace = settings.get("namespace", Settings.namespace)
    lease_of = partial(d.manager.get, "coordination.k8s.io/v1", "Lease", name, namespace)
    held = (lease_of() or {}).get("spec") or {}
    assert held.get("holderIdentity") == "dispatcher-local", held
    d.dispatcher.stop()
    released = (lease_of() or {}).get("spec") or {}
    assert not released.get("holderIdentity"), f"{released}\n{d.logs()}"
    assert released.get("leaseDurationSeconds") == 1, released
    assert "released the lease" in d.dispatcher.log.read_text(), d.logs()
