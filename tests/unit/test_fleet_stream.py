"""The real-fleet comparison's stream (bench/fleet_stream.py): one trace scaled to a small
fleet, as the objects to submit and as the Scenario the simulation replays."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from dispatch_quality import measure
from dq_dispatchers import AllAtOnce, OurPolicy
from dq_sim import Settings, Sim
from fleet_stream import (
    PRIORITY_LABEL,
    QUEUE_LABEL,
    StreamError,
    draw,
    job_object,
    local_object,
)

FLEET = {"worker1": 4.0, "worker2": 6.0, "worker3": 8.0}
CLASSES = {0: "low", 100: "normal", 200: "high"}


def test_the_stream_is_the_trace_scaled_in_time_and_size() -> None:
    stream = draw(FLEET, minutes=3, time=60, seed=2)
    sc = stream.scenario
    assert [w.cpu for w in sc.workers] == [4, 6, 8]
    assert sc.jobs and all(0 <= j.arrival < 180 for j in sc.jobs)
    # The trace's median run time, 20 minutes, in seconds of the scaled run.
    assert 10 < statistics.median(j.duration for j in sc.jobs) < 40
    # A 64-core trace worker's shapes on 6 cores on average: 16 trace cores at most.
    assert max(j.requests["cpu"] for j in sc.jobs if j.kind == "cpu") <= 16 * 1000 * 6 / 64 + 1
    assert {job.worker for job in sc.local} <= set(FLEET)
    assert {j.kind for j in sc.jobs} <= {"cpu", "multi", "lws"}  # no GPUs on kind
    assert draw(FLEET, minutes=3, time=60, seed=2) == stream


def test_a_stream_for_two_one_core_workers_asks_no_workload_for_more_than_a_core() -> None:
    """CI's check on the dev fleet (--worker-cores 1, --cpu-unit 0.1): every workload fits
    a worker's core, which a kind node on a 2-core host holds beside its system pods."""
    stream = draw({"worker1": 1.0, "worker2": 1.0}, minutes=1, time=60, seed=1, unit=0.1)
    assert [w.cpu for w in stream.scenario.workers] == [10, 10]  # simulated cores
    assert stream.scenario.jobs
    assert max(j.requests["cpu"] for j in stream.scenario.jobs) * 0.1 <= 1000


def test_the_simulation_replays_the_stream_and_every_job_runs() -> None:
    """What the CI's small real run asserts, on its prediction: every workload admitted,
    none lost, none left pending."""
    queues = {"worker2": ("StrictFIFO", "LowerPriority")}
    stream = draw(FLEET, minutes=2, time=60, seed=1, queues=queues)
    assert [(w.queueing, w.preemption) for w in stream.scenario.workers] == [
        ("BestEffortFIFO", "Never"),
        ("StrictFIFO", "LowerPriority"),
        ("BestEffortFIFO", "Never"),
    ]
    for dispatcher in (AllAtOnce(), OurPolicy()):
        found = measure(Sim(stream.scenario, dispatcher, Settings()).run())
        assert (found["never"], found["lost"]) == (0, 0), dispatcher.name


@pytest.mark.parametrize(
    ("workers", "options", "message"),
    [
        ({"worker1": 4.0}, {}, "--worker: 1 given"),
        ({**FLEET, "worker3": 0.0}, {}, "is not a positive number of cores"),
        (FLEET, {"minutes": 30.0}, "--minutes must be in"),
        (FLEET, {"time": 0.5}, "--time-scale at least 1"),
    ],
)
def test_a_stream_that_cannot_be_drawn_is_one_line(
    workers: dict[str, float], options: dict[str, float], message: str
) -> None:
    with pytest.raises(StreamError, match=message) as caught:
        draw(workers, **options)  # type: ignore[arg-type]
    assert "\n" not in str(caught.value)


def test_each_kind_of_job_is_the_object_kueue_runs_it_as() -> None:
    stream = draw(FLEET, minutes=5, time=60, seed=3)
    by_kind = {j.kind: j for j in stream.scenario.jobs}
    assert set(by_kind) == {"cpu", "multi", "lws"}
    objects = {
        kind: job_object(j, stream, "team-a", "user-queue", CLASSES, "busybox")
        for kind, j in by_kind.items()
    }
    for obj in objects.values():
        labels = obj["metadata"]["labels"]
        assert labels == {QUEUE_LABEL: "user-queue", PRIORITY_LABEL: "normal"}
    job = objects["cpu"]
    assert (job["kind"], job["spec"]["suspend"]) == ("Job", True)
    pod = job["spec"]["template"]["spec"]
    seconds = int(pod["containers"][0]["command"][1])
    assert abs(seconds - by_kind["cpu"].duration) <= 1 and pod["restartPolicy"] == "Never"
    jobset = objects["multi"]
    driver, workers = jobset["spec"]["replicatedJobs"]
    assert (jobset["kind"], driver["template"]["spec"]["parallelism"]) == ("JobSet", 1)
    assert 2 <= workers["template"]["spec"]["parallelism"] <= 8  # dq_trace.shape's workers
    lws = objects["lws"]
    assert lws["spec"]["replicas"] == by_kind["lws"].parts
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == 1
    serving = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    assert serving["restartPolicy"] == "Always"  # a StatefulSet's pods; deleted by the replay
    local = local_object(stream.scenario.local[0], 0, "team-a", "local", CLASSES, "busybox")
    assert local["metadata"]["labels"][QUEUE_LABEL] == "local"


def test_a_priority_without_a_class_is_one_line() -> None:
    stream = draw(FLEET, minutes=3, time=60, seed=1)
    with pytest.raises(StreamError, match="--priority-class 100=NAME"):
        job_object(stream.scenario.jobs[0], stream, "team-a", "q", {0: "low"}, "busybox")


def test_a_fleet_in_tenths_of_a_core_gets_the_same_stream_a_tenth_the_size() -> None:
    whole = draw({"w1": 3.0, "w2": 4.0, "w3": 5.0}, minutes=2, seed=4)
    tenths = draw({"w1": 0.3, "w2": 0.4, "w3": 0.5}, minutes=2, seed=4, unit=0.1)
    # The simulation sees the same stream: whole cores, the same jobs.
    assert tenths.scenario.workers == whole.scenario.workers
    assert tenths.scenario.jobs == whole.scenario.jobs
    job = next(j for j in whole.scenario.jobs if j.kind == "cpu")
    big = job_object(job, whole, "team-a", "q", CLASSES, "busybox")
    small = job_object(job, tenths, "team-a", "q", CLASSES, "busybox")
    ask = big["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
    tenth = small["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
    assert int(tenth["cpu"][:-1]) == int(job.requests["cpu"] * 0.1)
    assert int(ask["cpu"][:-1]) == job.requests["cpu"]
    assert abs(int(tenth["memory"]) * 10 - int(ask["memory"])) <= 10
    local = local_object(whole.scenario.local[0], 0, "team-a", "q", CLASSES, "busybox", 0.1)
    limits = local["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert int(limits["cpu"][:-1]) == max(int(whole.scenario.local[0].requests["cpu"] * 0.1), 1)


def test_a_quota_that_is_not_whole_units_is_refused_with_the_fix() -> None:
    with pytest.raises(StreamError, match=r"not a whole number of --cpu-unit 0.1 cores"):
        draw({"w1": 0.3, "w2": 0.45, "w3": 0.5}, unit=0.1)
    with pytest.raises(StreamError, match="--cpu-unit"):
        draw({"w1": 3.0, "w2": 4.0, "w3": 5.0}, unit=0)
