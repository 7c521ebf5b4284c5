"""The dispatcher's units on their own (controller/work_queue.py, decided.py,
nominations.py, in_flight.py): the order workloads are decided in, what needs no new
decision, what a refused or failed nomination write leads to, and where demand counts in
flight. The loop they make is tested on the emulated fleet in test_controller.py."""

from __future__ import annotations

import asyncio
import math
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from controller.decided import Decided
from controller.in_flight import FOLLOWERS_UNSEEN_SECONDS, InFlightDemand
from controller.kube import ApiError
from controller.metrics import Metrics
from controller.model import (
    Decision,
    FlavorCapacity,
    QueueCapacity,
    Verdict,
    WorkerView,
    WorkloadView,
)
from controller.nominations import NominationWriter, Written
from controller.work_queue import WorkQueue


def test_a_changed_workload_is_decided_before_re_evaluations_and_only_once() -> None:
    queue = WorkQueue()
    queue.add_later(["ns/a", "ns/b"])
    queue.add("ns/b")  # it changed: out of the re-evaluations, to the front
    queue.add("ns/b")
    assert [queue.next(), queue.next(), queue.next()] == ["ns/b", "ns/a", None]


def _workload(version: str, nominated: list[str] | None = None, **status: Any) -> dict[str, Any]:
    reserved = (datetime.now(UTC) - timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions = [{"type": "QuotaReserved", "status": "True", "lastTransitionTime": reserved}]
    return {
        "metadata": {"name": "a", "namespace": "ns", "uid": "u1", "resourceVersion": version},
        "spec": {"queueName": "q"},
        "status": {"conditions": conditions, "nominatedClusterNames": nominated or [], **status},
    }


def test_only_our_own_nomination_coming_back_is_an_echo_and_it_settles_the_workload() -> None:
    decided = Decided(lambda wl: 0.0)
    before = _workload("1")
    decided.expect_echo("ns/a", before, ("w1",), "fleet-1")
    evicted = _workload("2", ["w1"], clusterName="")
    evicted["status"]["conditions"] = []
    assert not decided.is_echo("ns/a", evicted)  # more than the nominations changed
    decided.expect_echo("ns/a", before, ("w1",), "fleet-1")
    assert not decided.is_echo("ns/a", _workload("2", ["w2"]))  # not what we wrote
    decided.expect_echo("ns/a", before, ("w1",), "fleet-1")
    echo = _workload("2", ["w1"])
    assert decided.is_echo("ns/a", echo)
    assert decided.is_settled("ns/a", echo, "fleet-1", now=0.0)
    assert not decided.is_settled("ns/a", echo, "fleet-2", now=0.0)  # the fleet changed
    assert not decided.is_echo("ns/a", echo)  # an echo is recognised once


def test_a_settled_workload_is_decided_again_when_widening_is_due() -> None:
    """Reserved 30 s ago, widening every 60 s: due in about 30 s; never without widening."""
    wl = _workload("1", ["w1"])
    widening = Decided(lambda wl: 60.0)
    widening.settle("ns/a", wl, "f")
    due = widening.settled["ns/a"][2]
    assert 25 < due - time.monotonic() <= 30
    assert not widening.is_settled("ns/a", wl, "f", now=due)
    never = Decided(lambda wl: 0.0)
    never.settle("ns/a", wl, "f")
    assert never.settled["ns/a"][2] == math.inf


def test_a_refused_write_waits_for_a_newer_version_only() -> None:
    decided = Decided(lambda wl: 0.0)
    decided.refuse("ns/a", "7")
    assert decided.still_refused("ns/a", "7")
    assert decided.still_refused("ns/a", "7")  # asked again, on the same version: still
    assert not decided.still_refused("ns/a", "8")  # the watch brought a newer one
    assert not decided.still_refused("ns/a", "7")  # and the refusal is gone


class _Manager:
    """Answers a status merge patch as the API server would: with `answer`, or by raising."""

    def __init__(self, answer: dict[str, Any] | ApiError) -> None:
        self.answer = answer
        self.patches: list[dict[str, Any]] = []

    async def merge_patch(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.patches.append(args[2])
        if isinstance(self.answer, ApiError):
            raise self.answer
        return self.answer


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"metadata": {"resourceVersion": "8"}}, Written("8")),
        (ApiError(409, "the object has been modified"), Written(None, refused=True, again=True)),
        (ApiError(422, "invalid"), Written(None, refused=True, again=True)),
        (ApiError(404, "not found"), Written(None)),
        (ApiError(503, "unavailable"), Written(None, again=True)),
    ],
)
def test_a_nomination_is_written_on_the_version_decided_on_and_a_refusal_is_told(
    answer: dict[str, Any] | ApiError, expected: Written
) -> None:
    manager = _Manager(answer)
    writer = NominationWriter(manager, Metrics(), concurrent=1)  # type: ignore[arg-type]
    written = asyncio.run(writer.write(_workload("7"), "ns/a", ["w1", "w2"]))
    assert written == expected
    assert manager.patches == [
        {"status": {"nominatedClusterNames": ["w1", "w2"]}, "metadata": {"resourceVersion": "7"}}
    ]


def test_writes_run_a_bounded_number_at_once() -> None:
    async def main() -> None:
        writer = NominationWriter(_Manager({}), Metrics(), concurrent=1)  # type: ignore[arg-type]
        release = asyncio.Event()

        async def write(key: str) -> None:
            await release.wait()
            writer.done(key)

        await writer.start("ns/a", lambda: write("ns/a"))
        second = asyncio.create_task(writer.start("ns/b", lambda: write("ns/b")))
        await asyncio.sleep(0.05)
        assert writer.writing == {"ns/a", "ns/b"} and not second.done()  # waits for a slot
        release.set()
        await asyncio.wait_for(second, 5)
        await asyncio.gather(*writer.tasks)
        assert not writer.writing

    asyncio.run(main())


def test_a_write_cancelled_before_it_began_gives_its_slot_and_workload_back() -> None:
    """Leadership lost in the same turn of the loop that started a write: the task is
    cancelled before its first step, so its coroutine (and its `finally`) never runs. The
    writer must still free the slot and the workload, and undo what the caller counted;
    before, the workload was never written again and the slot was gone (the emulated
    restart test, on a loaded host, waited 30 s for one workload)."""

    async def main() -> None:
        writer = NominationWriter(_Manager({}), Metrics(), concurrent=1)  # type: ignore[arg-type]
        ran: list[str] = []
        abandoned: list[str] = []

        async def write(key: str) -> None:
            ran.append(key)
            writer.done(key)

        await writer.start("ns/a", lambda: write("ns/a"), abandoned=lambda: abandoned.append("a"))
        tasks = list(writer.tasks)
        for task in tasks:  # what Dispatcher.stop_writing does
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert (ran, abandoned, writer.writing, writer.tasks) == ([], ["a"], set(), set())
        # Its slot is free and the workload can be written again.
        await asyncio.wait_for(
            writer.start("ns/a", lambda: write("ns/a"), abandoned=lambda: abandoned.append("x")),
            1,
        )
        await asyncio.gather(*writer.tasks)
        assert (ran, abandoned, writer.writing) == (["ns/a"], ["a"], set())

    asyncio.run(main())


def _views(strict_fifo: bool) -> dict[str, WorkerView]:
    queue = QueueCapacity(
        "cq",
        ((FlavorCapacity("default", {"cpu": 8000}, {"cpu": 8000}),),),
        strict_fifo=strict_fifo,
    )
    return {
        name: WorkerView(name, True, True, "", {}, {"ns/user-queue": "cq"}, {"cq": queue})
        for name in ("w1", "w2")
    }


@pytest.mark.parametrize("strict_fifo", [False, True])
def test_demand_counts_in_flight_where_it_takes_room(strict_fifo: bool) -> None:
    """Nominated to w1, where it fits, and to w2, where it waits: it counts on w1, and on w2
    only if w2's queue is StrictFIFO (its copy at the head admits nothing behind it); in a
    BestEffortFIFO queue Kueue admits what fits behind it, so counting it would keep others
    from that room."""
    views = _views(strict_fifo)
    state = SimpleNamespace(worker_views=lambda: views, workers={})
    demand = InFlightDemand(state)  # type: ignore[arg-type]
    chosen = (
        Verdict("w1", "fits", "", 0.5, {"cpu": "default"}),
        Verdict("w2", "waits", "", -0.5, {"cpu": "default"}),
    )
    decision = Decision(("w1", "w2"), "nominated", "", None, chosen)  # type: ignore[arg-type]
    view = WorkloadView("ns/a", "user-queue", {"cpu": 4000}, ("w1", "w2"))
    demand.record("ns/a", decision, view)
    assert demand.index.clusters_of("ns/a") == ({"w1", "w2"} if strict_fifo else {"w1"})


def test_the_dispatcher_page_says_how_long_a_sets_groups_count_in_flight() -> None:
    """docs/dispatcher.md states the bound on a LeaderWorkerSet's groups counted where its
    primary was admitted: the code's."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "dispatcher.md").read_text()
    assert f"(at most {FOLLOWERS_UNSEEN_SECONDS:.0f} s, in case an event" in " ".join(page.split())
