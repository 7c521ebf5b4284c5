"""The dispatch controller against emulated API servers (one manager, several workers):
workloads driven through their states, with the writes, Events and metrics asserted."""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any
from unittest import mock

import aiohttp
import pytest
import yaml
from aiohttp import web

from controller.app import explain
from controller.dispatcher import Dispatcher
from controller.events import Pace
from controller.explain import NotFound
from controller.kinds import WORKLOADS as KUEUE_WORKLOADS
from controller.kube import Kube, Reflector
from controller.metrics import Metrics
from controller.model import CORDONED_LABEL, Policy, WorkerView
from controller.policy_api import policy_object
from controller.settings import DeclaredProfile
from controller.workloads import trim
from tests.helpers.fleet_harness import (
    ACTIVE,
    NS,
    Fleet,
    K,
    cluster_queue,
    dispatcher_on,
    multikueue_cluster,
    until,
    workload,
)
from tests.helpers.kueue_actor import KueueManager, WorkerKueue, worker_reserves

WORKLOADS = f"{K}/workloads"


def fleet_test(workers: dict[str, dict[str, Any]], kueue: bool = False) -> Callable:
    """Runs an async test with a started fleet, and always tears it down. `kueue`: the
    manager enforces Kueue's Workload rules and resourceVersion preconditions
    (tests/helpers/kueue_actor.py)."""

    def wrap(test: Callable[[Fleet], Awaitable[None]]) -> Callable[[], None]:
        def run() -> None:
            async def main() -> None:
                fleet = Fleet(workers)
                if kueue:
                    fleet.manager = KueueManager("manager")
                await fleet.start()
                try:
                    await asyncio.wait_for(test(fleet), 60)
                finally:
                    await fleet.stop()

            asyncio.run(main())

        # Not functools.wraps: pytest would read the wrapped signature as fixtures.
        run.__name__, run.__doc__ = test.__name__, test.__doc__
        return run

    return wrap


TWO = {
    "w1": {"cpu": "8", "reserved": "6", "labels": {"region": "a"}},
    "w2": {
        "cpu": "8",
        "reserved": "2",
        "labels": {"region": "b", "accelerator": "nvidia-tesla-t4"},
    },
}


def patches(fleet: Fleet, name: str) -> list[dict[str, Any]]:
    return [r.body for r in fleet.manager.writes(f"/workloads/{name}")]


@fleet_test(TWO)
async def test_nominates_with_a_status_merge_patch_and_explains_it(fleet: Fleet) -> None:
    await fleet.run_controller()
    created = fleet.manager.put(WORKLOADS, workload("job-a", cpu="2"))
    assert await until(lambda: fleet.nominations("job-a")) == ["w2"]
    (write,) = fleet.manager.writes("/workloads/")
    assert write.method == "PATCH"
    assert write.path == f"/apis/{K}/v1beta2/namespaces/{NS}/workloads/job-a/status"
    assert write.content_type == "application/merge-patch+json"
    assert write.body == {
        "metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
        "status": {"nominatedClusterNames": ["w2"]},
    }
    (event,) = await until(lambda: fleet.events("job-a"))
    assert (event["type"], event["reason"]) == ("Normal", "Nominated")
    assert event["message"].startswith("w2: fits in default-flavor; 50% of the tightest flavor")
    assert "not chosen: w1 (fits in default-flavor; 0%" in event["message"]
    assert event["involvedObject"]["kind"] == "Workload"
    # Kubeconfig mode: no ClusterProfile CRD and no right to it, so never asked for.
    assert not any("clusterprofiles" in r.path for r in fleet.manager.requests)


def _decisions(metrics: Any) -> float:
    return metrics.registry.get_sample_value("mkf_dispatch_decision_seconds_count") or 0.0


@fleet_test({"w1": {"cpu": "8", "reserved": "6"}, "w2": {"cpu": "2.5"}}, kueue=True)
async def test_the_cluster_admitting_a_workload_is_never_dropped(fleet: Fleet) -> None:
    """Issue 14, item 1: w2's Kueue admits the copy (its ClusterQueue's reservation now holds
    this workload: 1 cpu free of 2.5) before the manager's clusterName appears; the
    dispatcher decides again on that change and must keep w2, or Kueue's webhook
    (pkg/webhooks/workload_webhook.go, v0.19.2) refuses clusterName=w2."""
    _, metrics = await fleet.run_controller()
    fleet.manager.put(WORKLOADS, workload("job", cpu="1.5"))
    assert await until(lambda: fleet.nominations("job")) == ["w2"]
    decided = _decisions(metrics)
    worker_reserves(fleet.workers["w2"], "2.5", "1.5")
    await until(lambda: _decisions(metrics) > decided, what="a decision on w2's reservation")
    await asyncio.sleep(0.3)  # a write that decision made, had it made one, has landed
    assert fleet.nominations("job") == ["w2"]
    assert len(fleet.manager.writes("/workloads/job/status")) == 1
    fleet.manager.set_cluster_name("job", "w2")  # refused (AssertionError) had w2 been dropped


FOUR_EACH = {"w1": {"cpu": "4"}, "w2": {"cpu": "4"}}
EIGHT_EACH = {"w1": {"cpu": "8"}, "w2": {"cpu": "8"}}


@pytest.mark.parametrize("copy_seen", [True, False])
def test_an_admitted_workload_counts_on_its_worker_before_its_cluster_queue_does(
    copy_seen: bool,
) -> None:
    """The defect a real run found (Kueue v0.19.2, MostFreeQuota, two workers of 4 cpu):
    two workloads of 1 cpu one after the other; the first went to w1, and the second was
    decided after the first got clusterName=w1 but before w1's ClusterQueue status counted
    the copy (Kueue writes it a batch period later: tests/helpers/kueue_actor.py). Its demand was
    forgotten at clusterName, both workers looked 75% free after it, and the second went
    to w1 too. It must go to w2, whether w1's Workloads already show the copy holding quota
    (then that is counted, from the worker) or not yet (then its demand stays in flight on
    w1)."""

    @fleet_test(FOUR_EACH, kueue=True)
    async def run(fleet: Fleet) -> None:
        w1 = WorkerKueue(fleet.workers["w1"], status_lag=None)  # the status never in time
        await fleet.run_controller()
        first = fleet.manager.put(WORKLOADS, workload("first", cpu="1"))
        assert await until(lambda: fleet.nominations("first")) == ["w1"]
        if copy_seen:
            w1.admit(first)
        fleet.manager.set_cluster_name("first", "w1")
        fleet.manager.put(WORKLOADS, workload("second", cpu="1"))
        assert await until(lambda: fleet.nominations("second")) == ["w2"]
        (event,) = await until(lambda: fleet.events("second"))
        assert event["message"].startswith("w2: fits in default-flavor; 75% of the tightest")
        assert "not chosen: w1 (fits in default-flavor; 50%" in event["message"]

    run()


def _reserved_cpu(dispatcher: Dispatcher, worker: str) -> int:
    queue = dispatcher.state.worker_views()[worker].queues["cluster-queue"]
    return queue.groups[0][0].reserved.get("cpu", 0)


def _in_flight_cpu(dispatcher: Dispatcher, worker: str) -> int:
    totals = dispatcher.in_flight.totals(worker, "cluster-queue")
    return totals.get("default-flavor", {}).get("cpu", 0)


@pytest.mark.parametrize("workloads_readable", [True, False])
def test_an_admitted_workloads_demand_moves_from_in_flight_to_reserved_once(
    workloads_readable: bool,
) -> None:
    """Nominated to w1 and w2, admitted on w1: its demand stays in flight on w1 alone, and
    goes exactly when what is read of w1 counts the reservation, never counted twice nor
    not at all: when w1's Workloads show the copy holding quota, or, where the reader
    identity may not read them, when w1's ClusterQueue status is rewritten. Then Kueue's
    late status write changes nothing (the larger of the two, not their sum)."""

    async def main() -> None:
        key = f"{NS}/job"
        job = workload("job", cpu="1")

        def unreadable(fleet: Fleet) -> None:
            if not workloads_readable:
                fleet.workers["w1"].fail("GET", "/workloads", 403, times=10**6)

        policy = Policy(clusters_to_nominate=2)
        async with dispatcher_on(FOUR_EACH, [job], before=unreadable, default_policy=policy) as (
            fleet,
            dispatcher,
        ):
            await dispatcher.reconcile(key)
            await asyncio.gather(*dispatcher.writer.tasks)
            assert dispatcher.in_flight.clusters_of(key) == {"w1", "w2"}
            w1 = WorkerKueue(fleet.workers["w1"], status_lag=None)
            store = dispatcher.state.workloads.store
            fleet.manager.put(WORKLOADS, workload("job", cpu="1", cluster="w1"))
            await until(lambda: (store[key].get("status") or {}).get("clusterName"))
            await dispatcher.reconcile(key)
            # Only on w1 now, and w1's ClusterQueue does not count it yet.
            assert dispatcher.in_flight.clusters_of(key) == {"w1"}
            assert (_reserved_cpu(dispatcher, "w1"), _in_flight_cpu(dispatcher, "w1")) == (0, 1000)
            assert _in_flight_cpu(dispatcher, "w2") == 0
            await dispatcher.reconcile(key)  # decided again: nothing changes
            assert (_reserved_cpu(dispatcher, "w1"), _in_flight_cpu(dispatcher, "w1")) == (0, 1000)
            w1.admit(fleet.manager.get(WORKLOADS, "job", NS))
            if workloads_readable:
                # The copy holds quota on w1: read from there, no longer in flight.
                await until(lambda: not dispatcher.in_flight.workloads(), what="the copy seen")
                assert (_reserved_cpu(dispatcher, "w1"), _in_flight_cpu(dispatcher, "w1")) == (
                    1000,
                    0,
                )
                assert not dispatcher.demand.admitted
            else:
                await asyncio.sleep(0.3)  # the copy is there, but cannot be read
                assert (_reserved_cpu(dispatcher, "w1"), _in_flight_cpu(dispatcher, "w1")) == (
                    0,
                    1000,
                )
            w1.flush()  # Kueue's ClusterQueue status write, a batch period late
            await until(lambda: _reserved_cpu(dispatcher, "w1") == 1000, what="the status")
            assert _in_flight_cpu(dispatcher, "w1") == 0
            assert not dispatcher.in_flight.workloads() and not dispatcher.demand.admitted

    asyncio.run(asyncio.wait_for(main(), 60))


@pytest.mark.parametrize("end", ["deleted", "expired", "worker removed"])
def test_an_admitted_workloads_demand_in_flight_never_outlives_it(end: str) -> None:
    """Kept in flight on its worker after admission, the demand still goes with the
    workload, after ADMITTED_UNSEEN_SECONDS without the worker showing it (an event lost),
    and with the worker."""

    async def main() -> None:
        key = f"{NS}/job"
        async with dispatcher_on(FOUR_EACH, [workload("job", cpu="1")]) as (fleet, dispatcher):
            await dispatcher.reconcile(key)
            await asyncio.gather(*dispatcher.writer.tasks)
            store = dispatcher.state.workloads.store
            fleet.manager.put(WORKLOADS, workload("job", cpu="1", cluster="w1"))
            await until(lambda: (store[key].get("status") or {}).get("clusterName"))
            await dispatcher.reconcile(key)
            assert (
                set(dispatcher.demand.admitted) == {key}
                and _in_flight_cpu(dispatcher, "w1") == 1000
            )
            if end == "deleted":
                fleet.manager.remove(WORKLOADS, "job", NS)
                await until(lambda: key not in store, what="the deletion")
            elif end == "expired":
                dispatcher.demand.admitted[key] = replace(
                    dispatcher.demand.admitted[key], until=0.0
                )
                dispatcher.demand.expire_admitted()
            else:
                await dispatcher.state.workers.pop("w1").stop()
                dispatcher.demand.expire_admitted()
            assert not dispatcher.in_flight.workloads() and not dispatcher.demand.admitted

    asyncio.run(asyncio.wait_for(main(), 60))


@fleet_test(TWO, kueue=True)
async def test_a_nomination_decided_before_an_eviction_never_lands_after_it(fleet: Fleet) -> None:
    """Issue 14, item 5: the patch carries the resourceVersion it was decided on. Here Kueue
    evicts the workload (w2 was lost: its MultiKueueCluster is no longer Active) between the
    decision for w2 and the write; the API server refuses the stale write with 409, and
    the dispatcher decides again on the evicted workload: w1."""
    m = fleet.manager
    decided_on: list[str] = []

    def evict() -> None:
        decided_on.append(m.get(WORKLOADS, "job", NS)["metadata"]["resourceVersion"])
        m.put(f"{K}/multikueueclusters", multikueue_cluster("w2"))  # not Active any more
        m.put(WORKLOADS, workload("job", cpu="1"))  # requeued: a new resourceVersion

    m.before_write["/workloads/job/status"] = evict
    await fleet.run_controller()
    m.put(WORKLOADS, workload("job", cpu="1"))
    assert await until(lambda: fleet.nominations("job")) == ["w1"]
    stale, fresh = (w.body for w in m.writes("/workloads/job/status"))
    assert stale == {
        "metadata": {"resourceVersion": decided_on[0]},
        "status": {"nominatedClusterNames": ["w2"]},
    }
    assert m.conflicts == 1  # refused: ["w2"] never reached the evicted workload
    assert fresh["status"] == {"nominatedClusterNames": ["w1"]}
    assert fresh["metadata"]["resourceVersion"] != decided_on[0]


def _lws_group(index: int, cpu: str, owner: str = "lws", **more: Any) -> dict[str, Any]:
    """A LeaderWorkerSet group's workload as Kueue v0.19.2 makes it
    (pkg/controller/jobs/leaderworkerset/leaderworkerset_reconciler.go); `more`: the
    workload helper's other arguments."""
    wl = workload(
        f"{owner}-{index}",
        cpu=cpu,
        **more,
        annotations={
            "kueue.x-k8s.io/component-workload-index": str(index),
            "kueue.x-k8s.io/job-owner-gvk": "leaderworkerset.x-k8s.io/v1, Kind=LeaderWorkerSet",
            "kueue.x-k8s.io/job-owner-name": owner,
        },
    )
    wl["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "name": owner,
            "uid": f"{owner}-uid",
        }
    ]
    return wl


@fleet_test({"w1": {"cpu": "16", "reserved": "8"}, "w2": {"cpu": "4"}})
async def test_a_leader_worker_set_is_placed_for_all_its_groups(fleet: Fleet) -> None:
    """Issue 14, item 6: three groups of 2 cpu. One group alone would go to w2 (half of it
    left free), but Kueue sends every group where the primary goes (syncToSingleCluster,
    v0.19.2), and only w1 holds all three (6 cpu). Another set's group is not counted."""
    await fleet.run_controller()
    for index in (1, 2):
        fleet.manager.put(WORKLOADS, _lws_group(index, "2"))
    fleet.manager.put(WORKLOADS, _lws_group(1, "2", owner="other"))
    fleet.manager.put(WORKLOADS, _lws_group(0, "2"))
    assert await until(lambda: fleet.nominations("lws-0")) == ["w1"]
    (event,) = await until(lambda: fleet.events("lws-0"))
    # (8 free - 6) / 16: the three groups of this set, not the other set's.
    assert event["message"].startswith("w1: fits in default-flavor; 12% of the tightest flavor")
    assert "w2 (never fits: needs cpu 6, the largest flavor offers 4)" in event["message"]
    assert patches(fleet, "lws-1") == [] and patches(fleet, "lws-2") == []


@fleet_test({"w1": {"cpu": "16", "reserved": "8"}, "w2": {"cpu": "4"}})
async def test_groups_added_before_admission_count_for_the_primary(fleet: Fleet) -> None:
    """The set scales before its primary is admitted: the primary, nominated to w2 for its
    own group, is decided again for all three. w2 can never hold them (4 cpu), so it
    leaves; w1 takes its place."""
    await fleet.run_controller()
    fleet.manager.put(WORKLOADS, _lws_group(0, "2"))
    assert await until(lambda: fleet.nominations("lws-0")) == ["w2"]
    for index in (1, 2):
        fleet.manager.put(WORKLOADS, _lws_group(index, "2"))
    assert await until(lambda: fleet.nominations("lws-0") == ["w1"])


@pytest.mark.parametrize("end", ["copy seen", "deleted", "expired", "primary requeued"])
@pytest.mark.parametrize("copy_first", [True, False])
def test_a_sets_other_groups_count_on_its_primarys_worker_until_their_copies_do(
    end: str, copy_first: bool
) -> None:
    """The defect the KWOK fleet found (BENCHMARKS.md section 5, seeds 1-3 with packing): a
    LeaderWorkerSet's primary is nominated for all its groups, but its copy on the worker
    holds only its own demand, and Kueue sends the other groups there only as it reconciles
    each (seconds later). Once the primary's copy was seen the set stopped counting, the
    worker looked nearly free, and two more sets were packed onto it. Here: three groups of
    2 cpu admitted on a worker of 8 (2 held, 4 coming), then a job of 4 cpu must go to the
    other worker; each group stops counting when its copy holds quota there, when it is
    deleted, after FOLLOWERS_UNSEEN_SECONDS, or when the primary goes back to the queue.
    `copy_first`: the worker's copy of the primary is seen before the manager's clusterName
    (InFlightDemand.counted_on), or after (admitted_to)."""

    async def main() -> None:
        groups = [_lws_group(i, "2") for i in range(3)]
        keys = [f"{NS}/lws-{i}" for i in range(3)]
        async with dispatcher_on(EIGHT_EACH, groups) as (fleet, dispatcher):
            await dispatcher.reconcile(keys[0])
            await asyncio.gather(*dispatcher.writer.tasks)
            (worker,) = fleet.nominations("lws-0") or []
            other = "w2" if worker == "w1" else "w1"
            kueue = WorkerKueue(fleet.workers[worker], status_lag=None)
            primary = fleet.manager.get(WORKLOADS, "lws-0", NS)
            store = dispatcher.state.workloads.store
            if copy_first:
                kueue.admit(primary)
                await until(lambda: dispatcher.state.workers[worker].holds(keys[0]))
            fleet.manager.put(WORKLOADS, _lws_group(0, "2", cluster=worker, state="Ready"))
            await until(lambda: (store[keys[0]].get("status") or {}).get("clusterName"))
            await dispatcher.reconcile(keys[0])
            if not copy_first:
                # The whole set's 6 cpu where the copy is not seen yet.
                assert _in_flight_cpu(dispatcher, worker) == 6000
                kueue.admit(primary)
                await until(lambda: _in_flight_cpu(dispatcher, worker) == 4000, what="the copy")
            # The primary's 2 cpu read from the worker, its two groups' 4 in flight there.
            assert (_reserved_cpu(dispatcher, worker), _in_flight_cpu(dispatcher, worker)) == (
                2000,
                4000,
            )
            assert set(dispatcher.demand.following) == set(keys[1:])
            await dispatcher.reconcile(keys[1])  # a group follows: still counted
            assert _in_flight_cpu(dispatcher, worker) == 4000
            fleet.manager.put(WORKLOADS, workload("job", cpu="4"))
            await until(lambda: f"{NS}/job" in store)
            await dispatcher.reconcile(f"{NS}/job")
            await asyncio.gather(*dispatcher.writer.tasks)
            assert fleet.nominations("job") == [other]  # 2 of 8 left on `worker`, not 6
            kueue.admit(fleet.manager.get(WORKLOADS, "lws-1", NS))
            await until(lambda: _in_flight_cpu(dispatcher, worker) == 2000, what="lws-1 seen")
            assert _reserved_cpu(dispatcher, worker) == 4000
            if end == "copy seen":
                kueue.admit(fleet.manager.get(WORKLOADS, "lws-2", NS))
                await until(lambda: _reserved_cpu(dispatcher, worker) == 6000, what="lws-2")
            elif end == "deleted":
                fleet.manager.remove(WORKLOADS, "lws-2", NS)
                await until(lambda: keys[2] not in store, what="the deletion")
            elif end == "expired":
                dispatcher.demand.admitted[keys[2]] = replace(
                    dispatcher.demand.admitted[keys[2]], until=0.0
                )
                dispatcher.demand.expire_admitted()
            else:
                fleet.manager.put(WORKLOADS, _lws_group(0, "2", reserved=False))
                await until(lambda: not (store[keys[0]].get("status") or {}).get("clusterName"))
                await dispatcher.reconcile(keys[0])
            assert _in_flight_cpu(dispatcher, worker) == 0
            assert not dispatcher.demand.following and not dispatcher.demand.admitted

    asyncio.run(asyncio.wait_for(main(), 60))


@fleet_test(TWO)
async def test_acts_only_when_kueue_says_the_workload_waits_for_a_cluster(fleet: Fleet) -> None:
    await fleet.run_controller()
    m = fleet.manager
    m.put(WORKLOADS, workload("not-reserved", reserved=False))
    m.put(WORKLOADS, workload("admitted", cluster="w1", state="Ready"))
    m.put(WORKLOADS, workload("other-check", other_checks={"provisioning": "Pending"}))
    m.put(
        WORKLOADS,
        workload("lws-follower", annotations={"kueue.x-k8s.io/component-workload-index": "1"}),
    )
    m.put(
        WORKLOADS,
        workload("lws-primary", annotations={"kueue.x-k8s.io/component-workload-index": "0"}),
    )
    assert await until(lambda: fleet.nominations("lws-primary")) == ["w2"]
    await asyncio.sleep(0.8)  # a resync or two: still nothing for the others
    for name in ("not-reserved", "admitted", "other-check", "lws-follower"):
        assert patches(fleet, name) == [], name
    # Kueue reserves quota: now it is eligible.
    m.put(WORKLOADS, workload("not-reserved"))
    assert await until(lambda: fleet.nominations("not-reserved"))


@fleet_test({"w1": {"cpu": "8", "reserved": "2"}, "w2": {"cpu": "8", "reserved": "4"}})
async def test_in_flight_nominations_never_share_the_last_slot(fleet: Fleet) -> None:
    await fleet.run_controller()
    # w1 has 6 free, w2 has 4: without in-flight accounting both would go to w1.
    fleet.manager.put(WORKLOADS, workload("first", cpu="4"))
    assert await until(lambda: fleet.nominations("first")) == ["w1"]
    fleet.manager.put(WORKLOADS, workload("second", cpu="4"))
    assert await until(lambda: fleet.nominations("second")) == ["w2"]


@fleet_test(TWO)
async def test_dispatch_policy_selects_clusters_by_label(fleet: Fleet) -> None:
    policies = f"{'dispatch.multikueue-fleet.io'}/dispatchpolicies"
    fleet.manager.put(
        policies, policy_object("gpu", Policy(cluster_selector={"region": "a"}), ["cluster-queue"])
    )
    # Valid for the API server (its CRD checks each policy alone), unused by the dispatcher:
    # the queue is already governed by "gpu".
    fleet.manager.put(policies, policy_object("too", Policy(), ["cluster-queue"]))
    await fleet.run_controller()
    fleet.manager.put(WORKLOADS, workload("job", cpu="1"))
    assert await until(lambda: fleet.nominations("job")) == ["w1"]

    def ready(name: str) -> dict[str, Any] | None:
        obj = fleet.manager.get(policies, name) or {}
        return next(
            (c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"),
            None,
        )

    assert (await until(lambda: ready("gpu")))["status"] == "True"
    unused = await until(lambda: ready("too"))
    assert unused["status"] == "False"
    assert "ClusterQueues cluster-queue are already governed by gpu" in unused["message"]


@fleet_test(TWO)
async def test_the_ready_condition_keeps_the_inventory_condition_beside_it(fleet: Fleet) -> None:
    """A merge patch replaces a whole list (RFC 7386): the dispatcher's Ready must not drop
    the InventoryReady condition another writer keeps in the same list."""
    policies = f"{'dispatch.multikueue-fleet.io'}/dispatchpolicies"
    obj = policy_object("gpu", Policy(cluster_selector={"region": "a"}), ["cluster-queue"])
    inventory = {
        "type": "InventoryReady",
        "status": "True",
        "reason": "Synced",
        "message": "0 joined",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    obj["status"] = {"conditions": [inventory]}
    fleet.manager.put(policies, obj)
    await fleet.run_controller()

    def types() -> list[str]:
        got = fleet.manager.get(policies, "gpu") or {}
        return [c["type"] for c in (got.get("status") or {}).get("conditions") or []]

    assert await until(lambda: "Ready" in types())
    assert sorted(types()) == ["InventoryReady", "Ready"]


@fleet_test(TWO)
async def test_restart_loses_nothing_and_writes_nothing_new(fleet: Fleet) -> None:
    stop, _ = await fleet.run_controller()
    fleet.manager.put(WORKLOADS, workload("pending", cpu="1"))
    fleet.manager.put(WORKLOADS, workload("admitted", cpu="1", cluster="w1", state="Ready"))
    assert await until(lambda: fleet.nominations("pending")) == ["w2"]
    stop.set()
    await asyncio.sleep(0.3)
    before = len(fleet.manager.writes("/workloads/"))
    await fleet.run_controller(identity="after-restart")
    fleet.manager.put(WORKLOADS, workload("new", cpu="1"))
    assert await until(lambda: fleet.nominations("new"))
    await asyncio.sleep(0.8)
    writes = fleet.manager.writes("/workloads/")[before:]
    assert [w.path.split("/")[-2] for w in writes] == ["new"]


@fleet_test(TWO)
async def test_throttling_and_server_errors_are_retried(fleet: Fleet) -> None:
    fleet.manager.fail("PATCH", "/workloads/job/status", 429, times=2)
    fleet.manager.fail("PATCH", "/workloads/job/status", 500, times=1)
    await fleet.run_controller()
    fleet.manager.put(WORKLOADS, workload("job"))
    assert await until(lambda: fleet.nominations("job")) == ["w2"]
    assert len(fleet.manager.writes("/workloads/job/status")) == 4


@fleet_test(TWO)
async def test_a_workload_admitted_meanwhile_is_left_alone(fleet: Fleet) -> None:
    # The API rejects the patch (Kueue set clusterName first): re-read, never retried blindly.
    def clusterName_set(old: dict, new: dict) -> str | None:
        return "clusterName and nominatedClusterNames are mutually exclusive"

    fleet.manager.rules[(WORKLOADS, "status")] = clusterName_set
    await fleet.run_controller()
    fleet.manager.put(WORKLOADS, workload("raced"))
    await until(lambda: fleet.manager.writes("/workloads/raced/status"))
    del fleet.manager.rules[(WORKLOADS, "status")]
    fleet.manager.put(WORKLOADS, workload("raced", cluster="w1", state="Ready"))
    await asyncio.sleep(0.8)
    assert len(fleet.manager.writes("/workloads/raced/status")) == 1


@fleet_test({"w1": {"cpu": "8"}, "w2": {"cpu": "8", "reserved": "4"}})
async def test_a_lost_worker_gets_no_new_nominations_until_it_is_back(fleet: Fleet) -> None:
    _, metrics = await fleet.run_controller()
    fleet.workers["w1"].down = True
    fleet.workers["w1"].compact()  # drop its watches: they reconnect into the outage
    await until(
        lambda: not fleet.manager.get(WORKLOADS, "x", NS) and _unhealthy(metrics, "w1"),
        what="w1 reported unhealthy",
    )
    fleet.manager.put(WORKLOADS, workload("during-outage", cpu="1"))
    assert await until(lambda: fleet.nominations("during-outage")) == ["w2"]
    fleet.workers["w1"].down = False
    await until(lambda: not _unhealthy(metrics, "w1"), what="w1 healthy again")
    fleet.manager.put(WORKLOADS, workload("after", cpu="1"))
    assert await until(lambda: fleet.nominations("after")) == ["w1"]


@pytest.mark.parametrize("lost_timeout", [900.0, 0.0])
def test_a_nominated_worker_that_stops_answering_is_kept_for_worker_lost_timeout(
    lost_timeout: float,
) -> None:
    """Kueue keeps a lost worker for workerLostTimeout (15m by default) and it may be
    admitting the workload: a few seconds of failed probes keep the nomination (a worker
    where it fits joins it); past the timeout (here 0) the worker is dropped."""

    async def main() -> None:
        fleet = Fleet(TWO)
        fleet.settings = replace(fleet.settings, worker_lost_timeout_seconds=lost_timeout)
        await fleet.start()
        try:
            _, metrics = await fleet.run_controller()
            fleet.manager.put(WORKLOADS, workload("job", cpu="1"))
            assert await until(lambda: fleet.nominations("job")) == ["w2"]
            fleet.workers["w2"].down = True
            fleet.workers["w2"].compact()
            await until(lambda: _unhealthy(metrics, "w2"), what="w2 reported unhealthy")
            # Something else changes on the workload: it is decided again.
            changed = workload("job", cpu="1")
            changed["status"]["nominatedClusterNames"] = fleet.nominations("job")
            changed["metadata"]["labels"] = {"touched": "yes"}
            fleet.manager.put(WORKLOADS, changed)
            expected = ["w2", "w1"] if lost_timeout else ["w1"]
            assert await until(lambda: fleet.nominations("job") == expected and expected)
            fleet.workers["w2"].down = False  # back before the controller stops
            await until(lambda: not _unhealthy(metrics, "w2"), what="w2 healthy again")
        finally:
            await fleet.stop()

    asyncio.run(asyncio.wait_for(main(), 60))


@fleet_test(TWO)
async def test_a_cordon_is_read_live_from_the_multikueue_cluster(fleet: Fleet) -> None:
    """The label `pulumi up` puts on a cordoned worker's MultiKueueCluster: the next
    decision leaves the worker out (the nomination there not yet admitted moves on), the
    gauge says so, and taking the label off puts the worker back; nothing restarts."""
    _, metrics = await fleet.run_controller()
    fleet.manager.put(WORKLOADS, workload("job", cpu="1"))
    assert await until(lambda: fleet.nominations("job")) == ["w2"]

    def label(cordoned: bool) -> None:
        labels = {CORDONED_LABEL: "true"} if cordoned else {}
        fleet.manager.put(
            f"{K}/multikueueclusters", {**multikueue_cluster("w2", labels), "status": ACTIVE}
        )

    def cordoned(worker: str) -> float | None:
        return metrics.registry.get_sample_value("mkf_worker_cordoned", {"cluster": worker})

    label(True)
    await until(lambda: cordoned("w2") == 1, what="w2 reported cordoned")
    assert cordoned("w1") == 0
    assert await until(lambda: fleet.nominations("job") == ["w1"] and ["w1"])
    fleet.manager.put(WORKLOADS, workload("second", cpu="1"))
    assert await until(lambda: fleet.nominations("second")) == ["w1"]
    label(False)
    await until(lambda: cordoned("w2") == 0, what="w2 reported uncordoned")
    fleet.manager.put(WORKLOADS, workload("third", cpu="1"))
    assert await until(lambda: fleet.nominations("third")) == ["w2"]


def _unhealthy(metrics: Any, worker: str) -> bool:
    value = metrics.registry.get_sample_value("mkf_worker_healthy", {"cluster": worker})
    return value == 0


@fleet_test(TWO)
async def test_eviction_clears_the_fields_and_the_workload_is_nominated_again(fleet: Fleet) -> None:
    await fleet.run_controller()
    fleet.manager.put(WORKLOADS, workload("job", cpu="1"))
    assert await until(lambda: fleet.nominations("job")) == ["w2"]
    fleet.manager.put(WORKLOADS, workload("job", cpu="1", cluster="w2", state="Ready"))
    await asyncio.sleep(0.3)
    # Kueue evicts: clusterName and nominations reset, the check back to Pending.
    fleet.manager.put(WORKLOADS, workload("job", cpu="1"))
    await until(lambda: len(fleet.manager.writes("/workloads/job/status")) == 2)
    assert fleet.nominations("job") == ["w2"]


@fleet_test(TWO)
async def test_a_malformed_workload_is_reported_and_the_loop_goes_on(fleet: Fleet) -> None:
    await fleet.run_controller()
    # The API server accepts it (the CRD leaves queueName optional); the dispatcher cannot
    # tell which policy governs it.
    bad = workload("bad")
    del bad["spec"]["queueName"]
    fleet.manager.put(WORKLOADS, bad)
    fleet.manager.put(WORKLOADS, workload("good"))
    assert await until(lambda: fleet.nominations("good"))
    (event,) = await until(lambda: fleet.events("bad"))
    assert (event["type"], event["reason"]) == ("Warning", "InvalidWorkload")
    assert "spec.queueName is missing" in event["message"]


@fleet_test(TWO)
async def test_no_feasible_cluster_is_an_event_and_a_metric(fleet: Fleet) -> None:
    _, metrics = await fleet.run_controller()
    fleet.manager.put(WORKLOADS, workload("huge", cpu="64"))
    (event,) = await until(lambda: fleet.events("huge"))
    assert (event["type"], event["reason"]) == ("Warning", "NoFeasibleCluster")
    assert "w1: never fits: needs cpu 64, the largest flavor offers 8" in event["message"]
    assert (
        metrics.registry.get_sample_value("mkf_no_feasible_cluster_total", {"reason": "too-large"})
        >= 1
    )
    assert patches(fleet, "huge") == []


@fleet_test(TWO)
async def test_watch_history_expiry_relists_and_keeps_working(fleet: Fleet) -> None:
    await fleet.run_controller()
    fleet.manager.put(WORKLOADS, workload("before"))
    assert await until(lambda: fleet.nominations("before"))
    fleet.manager.compact()
    fleet.manager.put(WORKLOADS, workload("after"))
    assert await until(lambda: fleet.nominations("after"))


@fleet_test(TWO)
async def test_two_replicas_only_the_leader_writes(fleet: Fleet) -> None:
    """No step waits a fixed time. It used to sleep 0.8 s and then count the Events: with
    an Event answered in 1 s (a loaded machine) it failed every time. It waits for what it
    counts instead, and for replica-b's own decision (a follower decides, then stops before
    writing), so b has had its chance to write. The lease is long (a minute): with the
    fleet's 2-second lease, a renewal of replica-a's late by 1.7 s lets b take it while a
    still runs. The takeover comes from replica-a releasing the lease as it stops, not from
    waiting for the clock (tests/emulated/test_leader.py has a lease that runs out)."""
    leases = "coordination.k8s.io/leases"
    lease_of = partial(
        fleet.manager.get, leases, "multikueue-fleet-dispatcher", fleet.settings.namespace
    )
    stop_a, metrics_a = await fleet.run_controller(identity="replica-a", lease_duration_seconds=60)
    await until(lambda: metrics_a.registry.get_sample_value("mkf_leader") == 1)
    _, metrics_b = await fleet.run_controller(identity="replica-b", lease_duration_seconds=60)
    fleet.manager.put(WORKLOADS, workload("one"))
    assert await until(lambda: fleet.nominations("one"))
    assert await until(lambda: fleet.events("one"))
    # replica-b decided on it too (it keeps its cache warm), and a follower's decision
    # stops before any write: nothing of b's can still be on its way.
    decisions = "mkf_dispatch_decision_seconds_count"
    await until(lambda: (metrics_b.registry.get_sample_value(decisions) or 0) >= 1)
    assert len(fleet.manager.writes("/workloads/one/status")) == 1
    assert len(fleet.events("one")) == 1
    assert metrics_b.registry.get_sample_value("mkf_leader") in (None, 0)
    # A clean stop hands the lease over (controller/leader.py `release`): replica-b takes
    # it within seconds, not after the minute the lease would have run.
    await fleet.stop_controller(stop_a)
    assert lease_of()["spec"]["holderIdentity"] in ("", "replica-b")
    await until(lambda: metrics_b.registry.get_sample_value("mkf_leader") == 1)
    fleet.manager.put(WORKLOADS, workload("two"))
    assert await until(lambda: fleet.nominations("two"))
    lease = lease_of()
    assert lease["spec"]["holderIdentity"] == "replica-b"
    assert lease["spec"]["leaseTransitions"] == 1


@fleet_test(TWO)
async def test_a_leader_that_steps_down_abandons_the_write_under_way(fleet: Fleet) -> None:
    """A nomination write sent while leading, whose answer hangs, is given up when the
    leader steps down at its renew deadline: not carried on through the client's retries
    (minutes) while another replica leads. client-go's leader stops everything it runs at
    that point (tools/leaderelection/leaderelection.go, OnStoppedLeading)."""
    stop, metrics = await fleet.run_controller(
        identity="replica-a",
        lease_duration_seconds=3,
        lease_renew_seconds=0.2,
        lease_renew_deadline_seconds=2,
    )
    leader = partial(metrics.registry.get_sample_value, "mkf_leader")
    await until(lambda: leader() == 1)
    fleet.manager.hung.add(("PATCH", "/workloads/one/status"))
    fleet.manager.put(WORKLOADS, workload("one"))
    await until(lambda: fleet.manager.writes("/workloads/one/status"), what="the write sent")
    assert not fleet.manager.abandoned
    loop = asyncio.get_running_loop()
    cut = loop.time()
    fleet.manager.fail("PUT", "/leases/", 500, times=100_000)  # no renewal succeeds now
    await until(lambda: leader() == 0, timeout=10, what="the leader stepped down")
    stepped_down = loop.time() - cut
    await until(lambda: fleet.manager.abandoned, timeout=2, what="the write abandoned")
    assert stepped_down <= 2 + 0.2 + 1.0, stepped_down
    assert [r.path for r in fleet.manager.abandoned] == [
        fleet.manager.writes("/workloads/one/status")[0].path
    ]
    fleet.manager.hung.clear()
    assert not fleet.nominations("one")
    await fleet.stop_controller(stop)


def _reserved_ago(wl: dict[str, Any], seconds: float) -> dict[str, Any]:
    then = (datetime.now(UTC) - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
    for condition in wl["status"]["conditions"]:
        condition["lastTransitionTime"] = then
    return wl


@fleet_test(TWO)
async def test_the_nomination_delay_is_counted_once_per_reservation_from_its_time(
    fleet: Fleet,
) -> None:
    """`mkf_nomination_delay_seconds`: from the manager's QuotaReserved to the first write,
    once per reservation; the dispatcher's own write coming back, and a decision that keeps
    the nominations, add nothing."""
    _, metrics = await fleet.run_controller()

    def delays() -> tuple[float, float]:
        get = metrics.registry.get_sample_value
        return (
            get("mkf_nomination_delay_seconds_count") or 0.0,
            get("mkf_nomination_delay_seconds_sum") or 0.0,
        )

    fleet.manager.put(WORKLOADS, _reserved_ago(workload("early"), 20))
    assert await until(lambda: fleet.nominations("early"))
    assert await until(lambda: delays()[0] == 1)
    total = delays()[1]
    assert 19 <= total <= 30, total
    fleet.manager.put(WORKLOADS, workload("now"))
    assert await until(lambda: fleet.nominations("now"))
    assert await until(lambda: delays()[0] == 2)
    assert delays()[1] - total <= 5
    fleet.manager.put(WORKLOADS, workload("held", reserved=False))
    await asyncio.sleep(1.5)  # a resync's look at everything: nothing nominated, nothing counted
    assert delays()[0] == 2 and not fleet.nominations("held")


@fleet_test(TWO)
async def test_probes_and_metrics_over_http(fleet: Fleet) -> None:
    await fleet.run_controller()
    fleet.manager.put(WORKLOADS, workload("job"))
    assert await until(lambda: fleet.nominations("job"))
    base = f"http://127.0.0.1:{await until(lambda: fleet.ports and fleet.ports[0])}"
    async with aiohttp.ClientSession() as session:
        for path in ("/healthz", "/readyz"):
            async with session.get(base + path) as response:
                assert response.status == 200, path
        async with session.get(base + "/metrics") as response:
            text = await response.text()
    assert 'mkf_nominations_total{cluster="w2"} 1.0' in text
    assert "mkf_dispatch_decision_seconds_count" in text
    assert "mkf_leader 1.0" in text


@fleet_test(TWO)
async def test_explain_prints_the_table_and_writes_nothing(fleet: Fleet) -> None:
    fleet.manager.put(WORKLOADS, workload("job", cpu="2", memory="4Gi"))
    kube = await Kube.from_kubeconfig(fleet.manager.kubeconfig(), "manager")
    try:
        text = await explain(kube, fleet.settings, f"{NS}/job", timeout=10)
    finally:
        await kube.close()
    lines = text.splitlines()
    assert lines[0].startswith("Dispatcher: none running (no process holds Lease ")
    assert lines[2] == f"Workload {NS}/job  (LocalQueue user-queue, ClusterQueue cluster-queue)"
    assert "Demand: cpu 2, memory 4Gi" in lines
    assert any(line.startswith("Policy: default (MostFreeQuota, nominate 1") for line in lines)
    # SCORE in the reason's own terms: the share of the tightest flavor left free.
    w1 = next(line for line in lines if line.startswith("w1 "))
    assert w1.split()[:3] == ["w1", "fits", "0%"] and "0% of the tightest flavor" in w1
    w2 = next(line for line in lines if line.startswith("w2 "))
    assert w2.split()[:3] == ["w2", "fits", "50%"] and "50% of the tightest flavor" in w2
    assert any(line.startswith("SCORE: the share of the tightest flavor") for line in lines)
    assert lines[-1] == "Would nominate, once a dispatcher runs: w2 (nominated)"
    assert fleet.manager.writes() == []
    renewed = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    fleet.manager.put(
        "coordination.k8s.io/leases",
        {
            "metadata": {"name": fleet.settings.lease_name, "namespace": fleet.settings.namespace},
            "spec": {"holderIdentity": "pod-a", "leaseDurationSeconds": 15, "renewTime": renewed},
        },
    )
    kube = await Kube.from_kubeconfig(fleet.manager.kubeconfig(), "manager")
    try:
        lines = (await explain(kube, fleet.settings, f"{NS}/job", timeout=10)).splitlines()
    finally:
        await kube.close()
    assert lines[0] == (
        f"Dispatcher: running (pod-a holds Lease {fleet.settings.namespace}/"
        f"{fleet.settings.lease_name})"
    )
    assert lines[-1] == "Would nominate: w2 (nominated)"


@fleet_test(TWO)
async def test_explain_says_why_a_workload_is_not_dispatched(fleet: Fleet) -> None:
    fleet.manager.put(WORKLOADS, workload("done", cluster="w1", state="Ready"))
    kube = await Kube.from_kubeconfig(fleet.manager.kubeconfig(), "manager")
    try:
        text = await explain(kube, fleet.settings, f"{NS}/done", timeout=10)
        with pytest.raises(NotFound, match=f"kubectl get workloads -n {NS}"):
            await explain(kube, fleet.settings, f"{NS}/nope", timeout=10)
    finally:
        await kube.close()
    assert "Not dispatched now: admitted on w1." in text


@fleet_test({"w1": {"cpu": "8"}, "w2": {"cpu": "8"}})
async def test_cluster_profile_status_is_kept_current(fleet: Fleet) -> None:
    profiles = "multicluster.x-k8s.io/clusterprofiles"
    for name in ("w1", "w2"):
        fleet.manager.put(
            profiles,
            {
                "metadata": {"name": name, "namespace": "kueue-system"},
                "spec": {"clusterManager": {"name": "multikueue-fleet"}},
            },
        )
    declared = (DeclaredProfile("w1", "https://w1.example:6443", "Q0E=", "w1-token"),)
    await fleet.run_controller(profiles=declared)

    def status() -> dict[str, Any]:
        return (fleet.manager.get(profiles, "w1", "kueue-system") or {}).get("status") or {}

    current = await until(lambda: status().get("version") and status())
    assert current["accessProviders"] == [
        {
            "name": "secretreader",
            "cluster": {
                "server": "https://w1.example:6443",
                "certificate-authority-data": "Q0E=",
                "extensions": [
                    {
                        "name": "client.authentication.k8s.io/exec",
                        "extension": {"clusterName": "w1-token"},
                    }
                ],
            },
        }
    ]
    assert current["conditions"][0]["type"] == "ControlPlaneHealthy"
    assert current["conditions"][0]["status"] == "True"
    assert current["version"] == {"kubernetes": "v1.36.4"}
    assert "status" not in (fleet.manager.get(profiles, "w2", "kueue-system") or {})
    writes = len(fleet.manager.writes("clusterprofiles/w1/status"))
    await asyncio.sleep(1.0)
    assert len(fleet.manager.writes("clusterprofiles/w1/status")) == writes  # no churn


if __name__ == "__main__":
    pytest.main([__file__, "-q"])


async def controller_cli(kubeconfig: Path, *args: str) -> tuple[int, str, str]:
    """`python -m controller --kubeconfig KUBECONFIG ARGS...` from the project: its exit
    code, stdout and stderr."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "controller",
        "--kubeconfig",
        str(kubeconfig),
        *args,
        cwd=Path(__file__).resolve().parents[2],
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    return process.returncode or 0, out.decode(), err.decode()


STRICT = {"cpu": "8", "reserved": "2", "queueing": "StrictFIFO"}


@fleet_test({"w1": STRICT, "w2": {**STRICT, "reserved": "3"}, "w3": STRICT})
async def test_explain_shows_a_hedged_workload(fleet: Fleet) -> None:
    """A DispatchPolicy with hedgeClusters 3: a whole-worker Job that fits on no worker
    would be nominated to three at once, explain says so (text and JSON), and the
    dispatcher does it; a smaller one gets one."""
    policies = "dispatch.multikueue-fleet.io/dispatchpolicies"
    hedging = Policy(hedge_clusters=3, hedge_share=0.9)
    fleet.manager.put(policies, policy_object("hedge", hedging, ["cluster-queue"]))
    fleet.manager.put(WORKLOADS, workload("whole", cpu="8"))
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "manager.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(fleet.manager.kubeconfig()))
        code, out, err = await controller_cli(kubeconfig, "explain", f"{NS}/whole")
        assert code == 0, err
        assert "Policy: hedge (BestFit, nominate 1, " in out
        assert ", hedge on 3 at 90%)" in out
        assert out.splitlines()[-1].endswith(
            "(waiting, hedged: it needs most of every queue that could hold it)"
        )
        code, out, _ = await controller_cli(kubeconfig, "explain", f"{NS}/whole", "-o", "json")
        (answer,) = json.loads(out)["workloads"]
        assert answer["hedged"] is True and len(answer["wouldNominate"]) == 3
        assert (answer["policy"]["hedgeClusters"], answer["policy"]["hedgeSharePercent"]) == (3, 90)
    await fleet.run_controller()
    assert sorted(await until(lambda: fleet.nominations("whole"))) == ["w1", "w2", "w3"]
    fleet.manager.put(WORKLOADS, workload("small", cpu="4"))
    assert len(await until(lambda: fleet.nominations("small"))) == 1  # below 90%: one


@fleet_test(TWO)
async def test_explain_command_line(fleet: Fleet) -> None:
    fleet.manager.put(WORKLOADS, workload("job", cpu="2"))
    owned = workload("job-train-1a2b3", cpu="1", memory="64Mi")
    owned["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u-1"}
    ]
    fleet.manager.put(WORKLOADS, owned)
    fleet.manager.put(WORKLOADS, workload("done", cluster="w1", state="Ready"))
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "manager.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(fleet.manager.kubeconfig()))

        async def cli(*args: str) -> tuple[int, str, str]:
            return await controller_cli(kubeconfig, *args)

        code, out, err = await cli("explain", f"{NS}/job")
        assert code == 0
        # The command's own default policy packs (BestFit): w1's 2 free cores fit it exactly.
        assert out.splitlines()[-1] == "Would nominate, once a dispatcher runs: w1 (nominated)"
        assert err == ""  # no INFO logs of the caches filling
        code, _, err = await cli("explain", "job-without-namespace")
        assert code == 2
        assert "<namespace>/<name>" in err
        # A Job's name finds its Workload; one named nowhere exits 1 with how to list them.
        code, out, _ = await cli("explain", f"{NS}/train")
        assert code == 0 and f"Workload {NS}/job-train-1a2b3  (Job train, " in out
        code, _, err = await cli("explain", f"{NS}/nothing")
        assert code == 1 and err.count("\n") == 1
        assert f"`kubectl get workloads -n {NS}` lists them" in err
        code, out, _ = await cli("explain", f"{NS}/job", "-o", "json")
        document = json.loads(out)
        assert document["dispatcher"]["running"] is False
        (answer,) = document["workloads"]
        assert answer["wouldNominate"] == ["w1"] and answer["demand"] == {
            "cpu": "2",
            "memory": "1Gi",
        }
        assert [c["score"] for c in answer["clusters"]] == ["0%", "50%"]
        code, out, _ = await cli("explain", "--all")
        assert code == 0
        lines = out.splitlines()
        assert lines[0].startswith("Dispatcher: none running")
        assert sorted(lines[1:])[0].startswith(f"{NS}/job  would nominate w1 (nominated): fits")
        assert len(lines) == 3  # the two pending workloads; the admitted one is left out
        code, _, err = await cli("explain", f"{NS}/job", "--all")
        assert code == 2 and "not both" in err
    assert fleet.manager.writes() == []


def test_lists_are_read_a_page_at_a_time() -> None:
    from tests.helpers.kube_emulator import Emulator

    async def main() -> None:
        emulator = Emulator("m")
        await emulator.start()
        for i in range(1203):
            emulator.put(WORKLOADS, workload(f"w{i}"))
        kube = await Kube.from_kubeconfig(emulator.kubeconfig(), "m")
        try:
            from controller.kinds import WORKLOADS as KIND

            items, version = await kube.list(KIND, transform=lambda o: o["metadata"]["name"])
        finally:
            await kube.close()
            await emulator.stop()
        assert len(items) == 1203 and len(set(items)) == 1203
        pages = [r for r in emulator.requests if r.path.endswith("/workloads")]
        assert [r.query.get("continue") for r in pages] == [None, "500", "1000"]
        assert version == str(emulator.revision)

    asyncio.run(main())


def test_our_own_nomination_coming_back_is_not_decided_again() -> None:
    """The watch brings every nomination back; only a change beyond it is a reason to
    decide again (the resync covers fleet changes)."""

    async def main() -> None:
        key = f"{NS}/job"
        async with dispatcher_on(TWO, [workload("job", cpu="1")]) as (fleet, dispatcher):
            await dispatcher.reconcile(key)
            await asyncio.gather(*dispatcher.writer.tasks)
            store = dispatcher.state.workloads.store
            await until(lambda: (store[key].get("status") or {}).get("nominatedClusterNames"))
            assert key not in dispatcher.queue.urgent
            # Kueue admits it on w2: that is news, and it is looked at.
            fleet.manager.put(WORKLOADS, workload("job", cpu="1", cluster="w2", state="Ready"))
            await until(lambda: key in dispatcher.queue.urgent, what="the admission to be queued")

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_queue_that_can_preempt_comes_first_as_read_from_the_workers_workloads() -> None:
    """w1 and w2 are full and their ClusterQueues preempt (withinClusterQueue
    LowerPriority); w1 comes first in the config. A workload of priority 100 asking for 3
    cores goes to the one whose work of lower priority holds enough to free them, read
    from the workers' Workloads through the reader identity (what holds quota, at what
    priority, in which flavor)."""

    def local(name: str, priority: int, cluster_queue_: str = "cluster-queue") -> dict[str, Any]:
        wl = workload(name, cpu="4")
        wl["spec"]["priority"] = priority
        wl["status"]["admission"]["clusterQueue"] = cluster_queue_
        return wl

    async def main() -> None:
        key = f"{NS}/job"
        job = workload("job", cpu="3")
        job["spec"]["priority"] = 100
        workers = {"w1": {"cpu": "8", "reserved": "8"}, "w2": {"cpu": "8", "reserved": "8"}}
        async with dispatcher_on(workers, [job]) as (fleet, dispatcher):
            preempting = cluster_queue("8", "32Gi", "8")
            preempting["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
            for emulator in fleet.workers.values():
                emulator.put(f"{K}/clusterqueues", preempting)

            def levels() -> tuple[tuple[int, ...] | None, ...]:
                views = dispatcher.state.worker_views()
                held = [views[w].queues["cluster-queue"].held for w in ("w1", "w2")]
                return tuple(None if h is None else tuple(p for p, _ in h) for h in held)

            async def nominated_when(*now: tuple[int, ...]) -> tuple[str, ...]:
                await until(lambda: levels() == now, what=f"priorities {now} held")
                _, decision, _ = dispatcher.evaluate(key)
                assert decision is not None
                return decision.nominate

            # w1 holds priority 200 only: it preempts, but not for this workload; w2 holds
            # nothing and has nothing to preempt.
            fleet.workers["w1"].put(f"{K}/workloads", local("high", 200))
            assert await nominated_when((200,), ()) == ("w1",)
            # Another queue's priority-0 work is no candidate for this queue's preemptor.
            fleet.workers["w2"].put(f"{K}/workloads", local("elsewhere", 0, "other-queue"))
            fleet.workers["w2"].put(f"{K}/workloads", local("low", 0))
            assert await nominated_when((200,), (0,)) == ("w2",)
            held = dispatcher.state.worker_views()["w2"].queues["cluster-queue"].held
            assert held == ((0, {"default-flavor": {"cpu": 4000, "memory": 1024**3 * 1000}}),)
            # Finished, it holds nothing (Kueue's HasActiveQuotaReservation).
            done = local("low", 0)
            done["status"]["conditions"].append(
                {
                    "type": "Finished",
                    "status": "True",
                    "reason": "Succeeded",
                    "message": "",
                    "lastTransitionTime": done["status"]["conditions"][0]["lastTransitionTime"],
                }
            )
            fleet.workers["w2"].put(f"{K}/workloads", done)
            assert await nominated_when((200,), ()) == ("w1",)

    asyncio.run(asyncio.wait_for(main(), 60))


def test_our_nomination_comes_back_recognised_and_is_cached_as_decoding_would() -> None:
    """The write answers with the workload's new resourceVersion; the watch event at that
    version is our nomination coming back, taken without decoding it. What is cached is
    what decoding and trimming the server's object gives, and it is not decided again. A
    change of anyone else's is decoded as before."""

    async def main() -> None:
        key = f"{NS}/job"
        async with dispatcher_on(TWO, [workload("job", cpu="1")]) as (fleet, dispatcher):
            workloads = dispatcher.state.workloads
            await dispatcher.reconcile(key)
            await asyncio.gather(*dispatcher.writer.tasks)
            await until(lambda: key in dispatcher.decided.settled, what="the echo to settle it")
            assert workloads.recognised == 1
            assert workloads.store[key] == trim(fleet.manager.get(WORKLOADS, "job", NS))
            assert key not in dispatcher.queue.urgent
            fleet.manager.put(WORKLOADS, workload("job", cpu="1", cluster="w2", state="Ready"))
            await until(lambda: key in dispatcher.queue.urgent, what="the admission to be queued")
            assert workloads.recognised == 1
            assert workloads.store[key] == trim(fleet.manager.get(WORKLOADS, "job", NS))

    asyncio.run(asyncio.wait_for(main(), 60))


def test_an_expected_watch_event_is_not_decoded_and_a_late_expectation_goes() -> None:
    """Against a server whose watch sends, at the expected version, a line that is not even
    JSON after the resourceVersion and name: the expected object is stored as it is. An
    expectation for a version that went by decoded is dropped by the object's next event.
    An event read while a write to its object waits for its answer waits for the answer."""

    def obj(version: str, nominated: list[str]) -> dict[str, Any]:
        return {
            "metadata": {"name": "job", "namespace": NS, "resourceVersion": version},
            "status": {"nominatedClusterNames": nominated},
        }

    async def main() -> None:
        lines: asyncio.Queue[bytes] = asyncio.Queue()

        async def listing(request: web.Request) -> web.StreamResponse:
            if request.query.get("watch") != "true":
                return web.json_response(
                    {"items": [obj("1", [])], "metadata": {"resourceVersion": "1"}}
                )
            response = web.StreamResponse()
            await response.prepare(request)
            while line := await lines.get():  # b"": the test is over
                await response.write(line)
            return response

        server = web.Application()
        server.router.add_get(f"/apis/{K}/v1beta2/workloads", listing)
        runner = web.AppRunner(server)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
            "users": [{"name": "c", "user": {"token": "t"}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "c"}}],
        }
        kube = await Kube.from_kubeconfig(config, "manager")
        seen: list[tuple[str, Any]] = []
        reflector = Reflector(kube, KUEUE_WORKLOADS, lambda e, o: seen.append((e, o)))
        task = asyncio.create_task(reflector.run())
        try:
            await until(lambda: reflector.synced.is_set())
            echo = obj("2", ["w1"])
            reflector.expect(echo)
            lines.put_nowait(
                b'{"type":"MODIFIED","object":{"metadata":{"name":"job","namespace":"'
                + NS.encode()
                + b'","resourceVersion":"2"}, not JSON from here on\n'
            )
            await until(lambda: len(seen) == 2, what="the expected event")
            assert seen[1] == ("MODIFIED", echo) and seen[1][1] is echo
            assert reflector.store[f"{NS}/job"] is echo and reflector.recognised == 1

            reflector.expect(obj("3", ["w2"]))  # its event came decoded, before this
            lines.put_nowait(
                json.dumps({"type": "MODIFIED", "object": obj("4", [])}).encode() + b"\n"
            )
            await until(lambda: len(seen) == 3, what="a decoded event")
            assert reflector.store[f"{NS}/job"] == obj("4", [])
            assert reflector._expected == {} and reflector._expected_version == {}

            # The event of a write under way, read before the write's answer: it waits.
            answer = reflector.writing(obj("4", []))
            lines.put_nowait(
                b'{"type":"MODIFIED","object":{"metadata":{"name":"job","namespace":"'
                + NS.encode()
                + b'","resourceVersion":"5"}, not JSON either\n'
            )
            await asyncio.sleep(0.2)
            assert len(seen) == 3  # held back
            made = obj("5", ["w2"])
            answer(made)
            await until(lambda: len(seen) == 4, what="the held event")
            assert reflector.store[f"{NS}/job"] is made and reflector.recognised == 2
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            lines.put_nowait(b"")
            await kube.close()
            await runner.cleanup()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_the_workloads_found_at_start_are_decided_without_waiting_for_a_resync() -> None:
    """The backlog a start lists is queued as soon as the snapshot is synced: with the
    resync loop idle, it is nominated all the same."""

    async def main() -> None:
        fleet = Fleet(TWO)
        await fleet.start()
        kube = await Kube.from_kubeconfig(fleet.manager.kubeconfig(), "manager")
        dispatcher = Dispatcher(kube, fleet.settings, Metrics(), Kube.from_kubeconfig)

        async def idle() -> None:
            await asyncio.Event().wait()

        try:
            for name in ("a", "b"):
                fleet.manager.put(WORKLOADS, workload(name, cpu="1"))
            with mock.patch.object(dispatcher, "_resync", idle):
                await dispatcher.start()
                await until(lambda: fleet.nominations("a") and fleet.nominations("b"))
        finally:
            await dispatcher.stop()
            await kube.close()
            await fleet.stop()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_settled_nomination_is_looked_at_again_only_when_something_changed() -> None:
    """A resync skips a workload nominated where it fits while nothing it was decided on
    changed; a worker's queues changing, or widening falling due, bring it back."""

    async def main() -> None:
        key = f"{NS}/job"
        async with dispatcher_on(
            TWO, [workload("job", cpu="1")], default_policy=Policy(widen_after_seconds=2)
        ) as (fleet, dispatcher):
            await dispatcher.reconcile(key)
            await asyncio.gather(*dispatcher.writer.tasks)
            await until(lambda: key in dispatcher.decided.settled, what="the echo to settle it")
            dispatcher.enqueue_pending()
            assert key not in dispatcher.queue.later  # nothing changed: not decided again

            # w1's queue frees up: the fleet changed, so it is looked at again.
            fleet.workers["w1"].put(f"{K}/clusterqueues", cluster_queue("8", "32Gi"))
            await until(lambda: (dispatcher.enqueue_pending(), key in dispatcher.queue.later)[1])
            dispatcher.queue.later.clear()
            await dispatcher.reconcile(key)  # still in place on w2: settled again
            assert key in dispatcher.decided.settled
            dispatcher.enqueue_pending()
            assert key not in dispatcher.queue.later

            # Widening is due two seconds after the nomination: then it is looked at.
            await until(
                lambda: (dispatcher.enqueue_pending(), key in dispatcher.queue.later)[1], timeout=5
            )

    asyncio.run(asyncio.wait_for(main(), 60))


def test_an_unchanged_decision_is_one_event_however_often_it_is_made() -> None:
    """Issue 14, item 3: w2's health reason carries a ticking age and w1 never fits; 20
    resyncs of the unchanged NoFeasibleCluster decision say it once. A different decision
    (w2 now disconnected) is a new Event."""

    async def main() -> None:
        key = f"{NS}/huge"
        async with dispatcher_on(TWO, [workload("huge", cpu="64")]) as (_, dispatcher):
            views, tick = dispatcher.state.worker_views, [0]

            def silent_w2(**change: Any) -> Callable[[], dict[str, WorkerView]]:
                def views_now() -> dict[str, WorkerView]:
                    tick[0] += 1
                    found = dict(views())
                    found["w2"] = replace(
                        found["w2"],
                        healthy=False,
                        health_reason=f"no update for {60 + tick[0]}s",
                        **change,
                    )
                    return found

                return views_now

            dispatcher.state.worker_views = silent_w2()  # type: ignore[method-assign]
            for _ in range(20):
                await dispatcher.reconcile(key)
            dispatcher.state.worker_views = silent_w2(connected=False)  # type: ignore[method-assign]
            await dispatcher.reconcile(key)
            await dispatcher.reconcile(key)
            queued = [
                dispatcher.events.queue.get_nowait() for _ in range(dispatcher.events.queue.qsize())
            ]
            assert [(e[2], "unreachable" in e[3]) for e in queued] == [
                ("NoFeasibleCluster", True),
                ("NoFeasibleCluster", False),
            ]
            assert "w2: unreachable for the dispatcher: no update for 6" in queued[0][3]

    asyncio.run(asyncio.wait_for(main(), 60))


def test_events_go_out_at_a_bounded_rate_after_a_burst() -> None:
    pace = Pace(rate=10, burst=100)
    waits = [pace.delay(0.0) for _ in range(130)]
    assert waits[:100] == [0.0] * 100  # the burst
    assert waits[100:] == pytest.approx([0.1 * n for n in range(1, 31)])  # then 10 a second
    assert pace.delay(100.0) == 0.0  # an idle while refills the burst


def test_widening_keeps_its_schedule_across_a_restart() -> None:
    """Issue 14, item 9: widening counts from the QuotaReserved transition on the workload,
    not from a clock in memory, so a restarted dispatcher widens when the first would have.
    Reserved 30 s ago, widen after 60 s: one cluster now, two 40 s later, before and after
    a restart."""
    reserved_at = datetime.now(UTC) - timedelta(seconds=30)
    wl = workload("job", cpu="1")
    wl["status"]["conditions"][0]["lastTransitionTime"] = reserved_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    key = f"{NS}/job"

    async def main() -> None:
        policy = Policy(strategy="MostFreeQuota", widen_after_seconds=60)
        async with dispatcher_on(TWO, [wl], default_policy=policy) as (fleet, first):
            await first.reconcile(key)
            await asyncio.gather(*first.writer.tasks)
            await until(lambda: fleet.nominations("job") == ["w2"])
            await until(
                lambda: first.state.workloads.store[key]["status"].get("nominatedClusterNames")
            )
            assert first.evaluate(key)[1].nominate == ("w2",)  # type: ignore[union-attr]
            kube = await Kube.from_kubeconfig(fleet.manager.kubeconfig(), "manager")
            restarted = Dispatcher(kube, first.settings, Metrics(), Kube.from_kubeconfig)
            try:
                await restarted.state.start()
                await restarted.state.wait_synced(10)
                await restarted.state.wait_workers(10)
                assert restarted.evaluate(key)[1].nominate == ("w2",)  # type: ignore[union-attr]
                later = datetime.now(UTC) + timedelta(seconds=40)
                with mock.patch("controller.dispatcher._now", return_value=later):
                    for dispatcher in (first, restarted):
                        decision = dispatcher.evaluate(key)[1]
                        assert decision is not None and decision.nominate == ("w2", "w1")
            finally:
                await restarted.state.stop()
                await kube.close()

    asyncio.run(asyncio.wait_for(main(), 60))


def _counted(dispatcher: Dispatcher) -> set[str]:
    return set(dispatcher.in_flight.workloads())


@pytest.mark.parametrize("change", ["deactivated", "evicted", "deleted during a relist"])
def test_in_flight_demand_is_forgotten_when_the_workload_no_longer_goes_anywhere(
    change: str,
) -> None:
    """A nominated workload's demand is counted against its worker until admission; one
    deactivated, evicted back to no reservation, or deleted while the watch was down (a
    relist brings no DELETED) must stop holding that room, or the worker looks full for
    good."""

    async def main() -> None:
        key = f"{NS}/job"
        async with dispatcher_on(TWO, [workload("job", cpu="1")]) as (fleet, dispatcher):
            await dispatcher.reconcile(key)
            await asyncio.gather(*dispatcher.writer.tasks)
            assert _counted(dispatcher) == {key}
            store = dispatcher.state.workloads.store
            if change == "deleted during a relist":
                fleet.manager.objects[fleet.manager._split(WORKLOADS)].pop((NS, "job"))
                fleet.manager.compact()
                reflector = dispatcher.state.workloads
                await until(lambda: key not in reflector.store, what="the relist")
            else:
                changed = workload("job", cpu="1", reserved=change != "evicted")
                if change == "deactivated":
                    changed["spec"]["active"] = False
                fleet.manager.put(WORKLOADS, changed)
                await until(
                    lambda: (
                        (store[key].get("spec") or {}).get("active") is False
                        or not (store[key].get("status") or {}).get("admission")
                    ),
                    what="the change",
                )
                await dispatcher.reconcile(key)
            assert _counted(dispatcher) == set()

    asyncio.run(asyncio.wait_for(main(), 60))
