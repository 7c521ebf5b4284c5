"""The API emulator behaves as a real kube-apiserver where the dispatcher depends on it
(each rule's upstream source is named in tests/helpers/kube_emulator.py): idle watches, bookmarks,
409 on a stale resourceVersion, 410 on an expired watch, status subresource rules, and,
with Kueue's real CRDs, pruning, defaults and the Workload's CEL rules."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from controller.kinds import LOCAL_QUEUES, WORKLOADS
from controller.kube import ApiError, Kube
from tests.helpers.fleet_harness import NS, K, workload
from tests.helpers.kube_emulator import Emulator, real_crds_missing

WL = f"{K}/workloads"


def on_emulator(test: Callable[[Emulator, Kube], Awaitable[None]], **fields: Any) -> None:
    async def main() -> None:
        emulator = Emulator("e", **fields)
        await emulator.start()
        kube = await Kube.from_kubeconfig(emulator.kubeconfig(), "e")
        kube.attempts = 1  # errors are what is tested: no retries
        try:
            await asyncio.wait_for(test(emulator, kube), 30)
        finally:
            await kube.close()
            await emulator.stop()

    asyncio.run(main())


async def watch_lines(url: str, query: str, seconds: float) -> list[dict[str, Any]]:
    """Every event a raw watch receives in `seconds`."""
    lines: list[dict[str, Any]] = []
    path = f"{url}/apis/{K}/v1beta2/workloads?watch=true&{query}"
    async with aiohttp.ClientSession() as session, session.get(path) as answer:
        try:
            async with asyncio.timeout(seconds):
                async for line in answer.content:
                    if line.strip():
                        lines.append(json.loads(line))
        except TimeoutError:
            pass
    return lines


def test_an_idle_watch_sends_nothing_and_bookmarks_come_only_when_asked() -> None:
    async def test(emulator: Emulator, kube: Kube) -> None:
        emulator.put(WL, workload("a"))
        rv = str(emulator.revision)
        # Nothing changes: nothing is sent, bookmarks asked for or not.
        assert await watch_lines(emulator.url, f"resourceVersion={rv}", 0.5) == []
        asked = f"resourceVersion={rv}&allowWatchBookmarks=true"
        bookmarks = await watch_lines(emulator.url, asked, 0.5)
        assert [e["type"] for e in bookmarks] == ["BOOKMARK"]  # bookmark_interval is 0.3 s
        assert bookmarks[0]["object"]["metadata"]["resourceVersion"] == rv
        # A bookmark is sent 2 s before the watch ends too, and never to who did not ask.
        ending = await watch_lines(emulator.url, f"resourceVersion={rv}&timeoutSeconds=3", 3.5)
        assert ending == []

    on_emulator(test, bookmark_interval=0.3)


def test_no_bookmark_for_a_resource_without_events_since_the_start() -> None:
    async def test(emulator: Emulator, kube: Kube) -> None:
        asked = f"resourceVersion={emulator.revision}&allowWatchBookmarks=true"
        assert await watch_lines(emulator.url, asked, 0.5) == []

    on_emulator(test, bookmark_interval=0.1)


def test_a_watch_without_resource_version_starts_with_the_objects_as_they_are() -> None:
    async def test(emulator: Emulator, kube: Kube) -> None:
        emulator.put(WL, workload("a"))
        emulator.put(WL, workload("b"))
        emulator.remove(WL, "b", NS)
        events = await watch_lines(emulator.url, "", 0.3)
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "a")]

    on_emulator(test)


def test_an_expired_watch_gets_410_gone() -> None:
    async def test(emulator: Emulator, kube: Kube) -> None:
        emulator.put(WL, workload("a"))
        old = emulator.revision
        emulator.put(WL, workload("b"))
        emulator.compact()
        (event,) = await watch_lines(emulator.url, f"resourceVersion={old}", 0.3)
        assert event["type"] == "ERROR"
        assert (event["object"]["code"], event["object"]["reason"]) == (410, "Expired")

    on_emulator(test)


def test_a_stale_resource_version_is_a_conflict() -> None:
    async def test(emulator: Emulator, kube: Kube) -> None:
        stored = emulator.put(WL, workload("a"))
        stale = stored["metadata"]["resourceVersion"]
        emulator.put(WL, workload("a", cluster=None, annotations={"moved": "on"}))
        for status in (True, False):
            with pytest.raises(ApiError) as caught:
                await kube.merge_patch(
                    WORKLOADS,
                    "a",
                    {
                        "metadata": {"resourceVersion": stale},
                        "status": {"nominatedClusterNames": ["w"]},
                    },
                    NS,
                    status=status,
                )
            assert caught.value.status == 409
        current = emulator.get(WL, "a", NS)["metadata"]["resourceVersion"]
        patched = await kube.merge_patch(
            WORKLOADS,
            "a",
            {"metadata": {"resourceVersion": current}, "status": {"nominatedClusterNames": ["w"]}},
            NS,
            status=True,
        )
        assert patched["status"]["nominatedClusterNames"] == ["w"]
        with pytest.raises(ApiError) as caught:
            await kube.request(
                "DELETE",
                WORKLOADS.path(NS, "a"),
                body={"preconditions": {"resourceVersion": current}},
            )
        assert caught.value.status == 409

    on_emulator(test)


def test_status_subresource_rules() -> None:
    async def test(emulator: Emulator, kube: Kube) -> None:
        body = workload("a")
        created = await kube.create(WORKLOADS, body, NS)
        assert "status" not in created  # only /status writes it
        assert created["metadata"]["generation"] == 1
        # The object's endpoint ignores status; a change of spec moves generation.
        spec = {"spec": {"priority": 5}, "status": {"nominatedClusterNames": ["w"]}}
        changed = await kube.merge_patch(WORKLOADS, "a", spec, NS)
        assert "status" not in changed and changed["metadata"]["generation"] == 2
        # /status ignores everything but status, and leaves generation alone.
        written = await kube.merge_patch(
            WORKLOADS,
            "a",
            {"metadata": {"labels": {"x": "y"}}, "spec": {"priority": 9}, "status": body["status"]},
            NS,
            status=True,
        )
        assert written["spec"]["priority"] == 5 and "labels" not in written["metadata"]
        assert written["metadata"]["generation"] == 2 and written["status"] == body["status"]
        # A write that changes nothing is not stored: no new resourceVersion, no event.
        again = await kube.merge_patch(WORKLOADS, "a", {"status": body["status"]}, NS, True)
        assert again["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]

    on_emulator(test)


needs_real_crds = pytest.mark.skipif(
    bool(real_crds_missing()),
    reason=f"needs Kueue's real CRDs: {real_crds_missing()} (the emulator is permissive)",
)


@needs_real_crds
def test_pruning_and_defaults_of_the_real_crds() -> None:
    async def test(emulator: Emulator, kube: Kube) -> None:
        created = await kube.create(
            LOCAL_QUEUES,
            {
                "metadata": {"name": "lq", "namespace": NS},
                "spec": {"clusterQueue": "cq", "notAField": 1},
            },
            NS,
        )
        assert "notAField" not in created["spec"]
        assert created["spec"]["stopPolicy"] == "None"  # the CRD's default
        assert (created["apiVersion"], created["kind"]) == (f"{K}/v1beta2", "LocalQueue")

    on_emulator(test)


@needs_real_crds
def test_the_workload_crds_cel_rules() -> None:
    async def test(emulator: Emulator, kube: Kube) -> None:
        emulator.put(WL, workload("a"))

        async def status(patch: dict[str, Any]) -> int:
            try:
                await kube.merge_patch(WORKLOADS, "a", {"status": patch}, NS, status=True)
            except ApiError as exc:
                return exc.status
            return 200

        assert await status({"nominatedClusterNames": [f"w{i}" for i in range(21)]}) == 422
        assert await status({"nominatedClusterNames": ["w1", "w2"]}) == 200
        # clusterName and nominatedClusterNames may not both be set...
        assert await status({"clusterName": "w1"}) == 422
        assert await status({"clusterName": "w1", "nominatedClusterNames": None}) == 200
        # ... and clusterName, once set, does not change.
        assert await status({"clusterName": "w2"}) == 422

    on_emulator(test)


@pytest.mark.parametrize("lag", [0.0, 0.3])
def test_a_workers_kueue_counts_an_admission_in_its_cluster_queue_status_late(lag: float) -> None:
    """Kueue v0.19.2 writes the copy's QuotaReserved at once and its ClusterQueue's
    status a batch period later (tests/helpers/kueue_actor.py): the emulated worker does the same,
    `status_lag` seconds later (0: in the same step)."""
    from tests.helpers.fleet_harness import cluster_queue
    from tests.helpers.kueue_actor import WorkerKueue

    async def test(emulator: Emulator, kube: Kube) -> None:
        cqs = f"{K}/clusterqueues"
        emulator.put(cqs, cluster_queue("4", "32Gi", "1", "1Gi"))
        worker = WorkerKueue(emulator, status_lag=lag)
        copy = worker.admit(workload("job", cpu="1500m"))
        kept = emulator.get(WL, "job", NS)
        assert kept is not None and copy["metadata"]["name"] == "job"
        conditions = {c["type"]: c["status"] for c in kept["status"]["conditions"]}
        assert conditions == {"QuotaReserved": "True", "Admitted": "True"}

        def reserved() -> dict[str, str]:
            status = emulator.get(cqs, "cluster-queue")["status"]
            (flavor,) = status["flavorsReservation"]
            return {r["name"]: r["total"] for r in flavor["resources"]}

        if lag:
            assert reserved() == {"cpu": "1", "memory": "1Gi"}  # not yet
            await asyncio.sleep(lag + 0.2)
        assert reserved() == {"cpu": "2500m", "memory": str(2 * 1024**3)}
        assert emulator.get(cqs, "cluster-queue")["status"]["reservingWorkloads"] == 1

    on_emulator(test)
