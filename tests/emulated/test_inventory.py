"""Inventory automation: ClusterProfiles joining and leaving MultiKueue. The planner with
plain data, then the controller against emulated API servers."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controller.inventory import (
    OWNER,
    OWNER_LABEL,
    InventorySpec,
    cluster_object,
    parse_inventory,
    plan,
    running_per_cluster,
)
from controller.policy_api import InvalidPolicy
from tests.helpers.fleet_harness import (
    ACTIVE,
    NS,
    Fleet,
    K,
    admission_check,
    dispatcher_on,
    reader_token_secret,
    seed_worker,
    until,
    workload,
)
from tests.helpers.kube_emulator import Emulator

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
INV = InventorySpec(
    policy="inv",
    config="inventory",
    selector={"env": "prod"},
    access_provider="secretreader",
    order_by="label:zone",
    drain_timeout_seconds=600,
)


def profile(
    name: str,
    *,
    zone: str = "a",
    env: str = "prod",
    provider: str = "secretreader",
    properties: tuple[str, ...] = (),
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "kueue-system",
            "labels": {"env": env, "zone": zone},
            "creationTimestamp": f"2026-11-0{len(name) % 9 + 1}T00:00:00Z",
        },
        # The ClusterProfile CRD requires spec.clusterManager and each provider's server.
        "spec": {"clusterManager": {"name": "test-inventory"}},
        "status": {
            "accessProviders": [
                {"name": provider, "cluster": {"server": f"https://{name}.invalid:6443"}}
            ],
            "properties": [{"name": p, "value": "x"} for p in properties],
        },
    }


def config(clusters: list[str], owned: bool = True) -> dict[str, Any]:
    labels = {OWNER_LABEL: OWNER} if owned else {"app.kubernetes.io/managed-by": "multikueue-fleet"}
    return {"metadata": {"name": "inventory", "labels": labels}, "spec": {"clusters": clusters}}


def existing(*names: str) -> dict[str, dict[str, Any]]:
    return {n: cluster_object(n, {"env": "prod"}) for n in names}


def test_selected_profiles_join_in_a_stable_order() -> None:
    profiles = [
        profile("c1", zone="b"),
        profile("c2", zone="a"),
        profile("dev", env="dev"),
        profile("other", provider="token-exchange"),
    ]
    step = plan(INV, profiles, {}, None, {}, {}, NOW)
    assert step.clusters == ["c2", "c1"]  # by zone, then name
    assert step.create == ["c2", "c1"]
    assert step.problems == []
    # A later profile is appended: the order already in the config never changes.
    later = plan(
        INV,
        [*profiles, profile("c0", zone="a")],
        existing("c1", "c2"),
        config(["c2", "c1"]),
        {},
        {},
        NOW,
    )
    assert later.clusters == ["c2", "c1", "c0"]


def test_required_properties() -> None:
    inv = InventorySpec(policy="p", config="inventory", required_properties=("gpu-count",))
    step = plan(
        inv, [profile("no"), profile("yes", properties=("gpu-count",))], {}, None, {}, {}, NOW
    )
    assert step.clusters == ["yes"]


def test_never_more_than_twenty() -> None:
    profiles = [profile(f"c{i:02}") for i in range(23)]
    step = plan(INV, profiles, {}, None, {}, {}, NOW)
    assert len(step.clusters) == 20
    assert step.over_limit == ["c20", "c21", "c22"]


def test_labels_are_copied_and_kept_current() -> None:
    obj = cluster_object("c1", {"env": "prod", "zone": "b"})
    assert obj["metadata"]["labels"] == {"env": "prod", "zone": "b", OWNER_LABEL: OWNER}
    assert obj["spec"] == {"clusterSource": {"clusterProfileRef": {"name": "c1"}}}
    step = plan(INV, [profile("c1", zone="c")], existing("c1"), config(["c1"]), {}, {}, NOW)
    assert step.relabel == {"c1": {"env": "prod", "zone": "c"}}


def test_leaving_with_and_without_running_work() -> None:
    current = config(["c1", "c2", "c3"])
    profiles = [profile("c1")]
    step = plan(INV, profiles, existing("c1", "c2", "c3"), current, {}, {"c2": 1}, NOW)
    # c3 has nothing running: out now. c2 still runs a workload: it drains.
    assert step.clusters == ["c1", "c2"]
    assert step.delete == ["c3"]
    assert step.draining == {"c2": NOW}
    assert step.joined == ["c1"]
    # Once nothing runs there, it leaves too.
    done = plan(
        INV,
        profiles,
        existing("c1", "c2"),
        config(["c1", "c2"]),
        {"c2": NOW},
        {},
        NOW + timedelta(minutes=1),
    )
    assert done.clusters == ["c1"] and done.delete == ["c2"]


def test_drain_timeout() -> None:
    args = (INV, [profile("c1")], existing("c1", "c2"), config(["c1", "c2"]))
    waiting = plan(*args, {"c2": NOW}, {"c2": 3}, NOW + timedelta(seconds=599))
    assert waiting.clusters == ["c1", "c2"]
    over = plan(*args, {"c2": NOW}, {"c2": 3}, NOW + timedelta(seconds=600))
    assert over.clusters == ["c1"] and over.delete == ["c2"]


def test_the_config_is_never_left_empty() -> None:
    step = plan(INV, [], existing("c1"), config(["c1"]), {}, {}, NOW)
    assert step.clusters == ["c1"]
    assert step.delete == []
    assert "last cluster and stays until another joins" in step.problems[0]
    replaced = plan(INV, [profile("c2")], existing("c1"), config(["c1"]), {}, {}, NOW)
    assert replaced.clusters == ["c2"] and replaced.delete == ["c1"]


def test_stack_managed_objects_are_left_alone() -> None:
    stack = {
        "c1": {
            "metadata": {
                "name": "c1",
                "labels": {"app.kubernetes.io/managed-by": "multikueue-fleet"},
            }
        }
    }
    step = plan(INV, [profile("c1"), profile("c2")], stack, None, {}, {}, NOW)
    assert step.clusters == ["c2"]
    assert "MultiKueueCluster c1 is managed by the stack" in step.problems[0]
    refused = plan(INV, [profile("c2")], {}, config(["worker1"], owned=False), {}, {}, NOW)
    assert refused.clusters == ["worker1"] and refused.create == []
    assert "not managed by the dispatcher" in refused.problems[0]
    # Leaving never deletes a cluster the controller did not create.
    left = plan(
        INV, [profile("c2")], {**existing("c2"), **stack}, config(["c1", "c2"]), {}, {}, NOW
    )
    assert left.delete == []


def test_running_work_is_counted_per_cluster() -> None:
    finished = workload("f", cluster="c1", state="Ready")
    finished["status"]["conditions"].append({"type": "Finished", "status": "True"})
    store = {"a": workload("a", cluster="c1", state="Ready"), "b": workload("b"), "f": finished}
    assert running_per_cluster(store) == {"c1": 1}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({}, "spec.inventory.multiKueueConfig: required and missing; fix: set"),
        ({"multiKueueConfig": "x", "orderBy": "random"}, "orderBy: 'random' is refused: not name"),
        ({"multiKueueConfig": "x", "drainTimeout": "soon"}, "drainTimeout: 'soon' .* duration"),
        (
            {"multiKueueConfig": "x", "selectr": {}},
            r"selectr: unknown key \(did you mean 'selector'",
        ),
    ],
)
def test_invalid_inventory_settings(raw: dict, message: str) -> None:
    with pytest.raises(InvalidPolicy, match=message):
        parse_inventory("p", raw)


PROFILES = "multicluster.x-k8s.io/clusterprofiles"
POLICIES = "dispatch.multikueue-fleet.io/dispatchpolicies"


def test_profiles_join_drain_and_leave_through_the_controller() -> None:
    async def main() -> None:
        fleet = Fleet({"w1": {"cpu": "8"}})  # a stack-managed worker, left alone
        await fleet.start()
        m = fleet.manager
        try:
            for p in (
                profile("inv-b", zone="b"),
                profile("inv-a", zone="a"),
                profile("dev", env="dev"),
            ):
                m.put(PROFILES, p)
            m.put(
                POLICIES,
                {
                    "metadata": {"name": "inventory"},
                    "spec": {
                        "clusterQueues": ["inventory-queue"],
                        "inventory": {
                            "multiKueueConfig": "inventory",
                            "selector": {"matchLabels": {"env": "prod"}},
                            "accessProvider": "secretreader",
                            "orderBy": "label:zone",
                            "drainTimeout": "1h",
                        },
                    },
                },
            )
            stop, _ = await fleet.run_controller()

            def config() -> list[str] | None:
                obj = m.get(f"{K}/multikueueconfigs", "inventory")
                return obj and obj["spec"]["clusters"]

            assert await until(config, timeout=30) == ["inv-a", "inv-b"]
            mkc = m.get(f"{K}/multikueueclusters", "inv-b")
            assert mkc["metadata"]["labels"]["zone"] == "b"
            assert mkc["spec"]["clusterSource"] == {"clusterProfileRef": {"name": "inv-b"}}
            assert m.get(f"{K}/multikueueclusters", "w1")["metadata"]["labels"] == {}
            assert m.get(f"{K}/multikueueconfigs", "multikueue")["spec"]["clusters"] == ["w1"]

            # A workload runs on inv-a; then its profile goes away.
            m.put(f"{K}/workloads", workload("running", cluster="inv-a", state="Ready"))
            m.remove(PROFILES, "inv-a", "kueue-system")

            def inventory_status() -> dict[str, Any]:
                return ((m.get(POLICIES, "inventory") or {}).get("status") or {}).get(
                    "inventory"
                ) or {}

            draining = await until(lambda: inventory_status().get("draining"), timeout=30)
            assert [d["cluster"] for d in draining] == ["inv-a"]
            assert config() == ["inv-a", "inv-b"]  # still there: work runs on it
            # Events go out in the background, just after the status.
            await until(
                lambda: (
                    {"ClusterJoined", "ClusterDraining"}
                    <= {e["reason"] for e in fleet.events("inventory")}
                ),
                timeout=10,
                what="the ClusterJoined and ClusterDraining Events",
            )

            # The controller restarts while inv-a drains: the drain start is kept.
            since = draining[0]["since"]
            stop.set()
            await asyncio.sleep(0.3)
            await fleet.run_controller(identity="after-restart")
            # A profile appears after the restart: once the new replica has let it join, the
            # status it wrote shows whether it kept inv-a's drain start or began it anew.
            m.put(PROFILES, profile("inv-c", zone="c"))
            await until(lambda: "inv-c" in inventory_status().get("joined", []), timeout=40)
            assert inventory_status()["draining"][0]["since"] == since
            assert config() == ["inv-a", "inv-b", "inv-c"]

            # The work finishes: inv-a leaves the config and its MultiKueueCluster goes.
            done = workload("running", cluster="inv-a", state="Ready")
            done["status"]["conditions"].append(
                {
                    "type": "Finished",
                    "status": "True",
                    "reason": "Succeeded",
                    "message": "",
                    "lastTransitionTime": done["status"]["conditions"][0]["lastTransitionTime"],
                }
            )
            m.put(f"{K}/workloads", done)
            assert await until(lambda: config() == ["inv-b", "inv-c"], timeout=40)
            await until(lambda: m.get(f"{K}/multikueueclusters", "inv-a") is None, timeout=30)
            assert m.get(f"{K}/multikueueclusters", "w1") is not None
            await until(
                lambda: "ClusterLeft" in {e["reason"] for e in fleet.events("inventory")},
                timeout=30,
            )
        finally:
            await fleet.stop()

    asyncio.run(asyncio.wait_for(main(), 150))


def test_draining_clusters_get_no_new_nominations() -> None:
    async def main() -> None:
        workers = {"w1": {"cpu": "8"}, "w2": {"cpu": "8", "reserved": "6"}}
        async with dispatcher_on(workers, [workload("job", cpu="1")]) as (_, dispatcher):
            _, decision, _ = dispatcher.evaluate(f"{NS}/job")
            assert decision.nominate == ("w1",)  # the most room
            dispatcher.excluded = {"w1"}  # what the inventory keeper sets while w1 drains
            _, decision, _ = dispatcher.evaluate(f"{NS}/job")
            assert decision.nominate == ("w2",)
            assert [v.cluster for v in decision.verdicts] == ["w2"]

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_joined_cluster_is_reached_with_its_reader_token_and_gets_work() -> None:
    """End to end in the controller: a profile appears, joins, and the dispatcher reaches
    the cluster with nothing but a token Secret; a wrong token is reported, not guessed."""

    async def main() -> None:
        fleet = Fleet({"w1": {"cpu": "8", "reserved": "8"}})  # full: work must go elsewhere
        await fleet.start()
        fleet.settings = replace(fleet.settings, inventory=True)
        m = fleet.manager
        joined = Emulator("inv-a", required_token="reader-token")
        await joined.start()
        seed_worker(joined, {"cpu": "16"})
        try:
            # The workloads' check now points at the inventory's config.
            check = admission_check()
            check["spec"]["parameters"]["name"] = "inventory"
            m.put(f"{K}/admissionchecks", check)
            reachable = profile("inv-a")
            reachable["status"]["accessProviders"][0]["cluster"] = {"server": joined.url}
            m.put(PROFILES, reachable)
            m.put(
                POLICIES,
                {
                    "metadata": {"name": "inventory"},
                    "spec": {"inventory": {"multiKueueConfig": "inventory"}},
                },
            )
            m.put("secrets", reader_token_secret("inv-a", "wrong", fleet.settings.namespace))
            await fleet.run_controller()
            await until(lambda: m.get(f"{K}/multikueueclusters", "inv-a"), timeout=30)
            # Kueue marks the joined cluster Active once its own access works.
            mkc = m.get(f"{K}/multikueueclusters", "inv-a")
            m.put(f"{K}/multikueueclusters", {**mkc, "status": ACTIVE})
            m.put(f"{K}/workloads", workload("job", cpu="2"))

            def refused() -> bool:
                return any(
                    "inv-a" in e["message"] and "Unauthorized" in e["message"]
                    for e in fleet.events("job")
                )

            await until(refused, timeout=30, what="the wrong token reported")
            assert fleet.nominations("job") is None

            m.put(
                "secrets",
                reader_token_secret("inv-a", "reader-token\n", fleet.settings.namespace),
            )
            assert await until(lambda: fleet.nominations("job"), timeout=30) == ["inv-a"]
            assert all(
                r.path.startswith(("/apis/kueue.x-k8s.io/v1beta2/", "/version"))
                for r in joined.requests
            ), "the dispatcher only reads queues (and the version) on a worker"
        finally:
            await joined.stop()
            await fleet.stop()

    asyncio.run(asyncio.wait_for(main(), 120))
