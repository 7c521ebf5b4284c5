"""The simulated nodes of a loopback worker (loopback/kwok.py): the stages KWOK is given, the
Nodes it manages, and the comparison's fleet on them (bench/kwok_compare.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from components.checks.load import load_stack
from components.upstream import toolchain
from loopback import kwok
from loopback.controlplane import StartError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from fleet_stream import draw, job_object, local_object
from kwok_compare import stack_document, workload_gets

# The shape of kustomize/stage/pod/general/pod-complete.yaml at v0.8.0, abridged.
GENERAL_COMPLETE = {
    "apiVersion": "kwok.x-k8s.io/v1alpha1",
    "kind": "Stage",
    "metadata": {"name": "pod-complete"},
    "spec": {
        "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
        "selector": {"matchExpressions": [{"key": ".status.phase", "operator": "In"}]},
        "delay": {
            "durationMilliseconds": 1000,
            "durationFrom": {"expressionFrom": '.metadata.annotations["x"]'},
            "jitterDurationMilliseconds": 5000,
            "jitterDurationFrom": {"expressionFrom": '.metadata.annotations["y"]'},
        },
        "next": {"statusTemplate": "phase: Succeeded"},
    },
}


def test_a_pod_completes_after_its_own_time_and_no_jitter() -> None:
    stage = kwok.timed_complete(GENERAL_COMPLETE)
    # A jitter no longer than the delay would become the delay (lifecycle.go Stage.Delay):
    # none is left, and nothing but the pod's annotation sets the time.
    assert stage["spec"]["delay"] == {
        "durationMilliseconds": 0,
        "durationFrom": {"expressionFrom": f'.metadata.annotations["{kwok.RUN_ANNOTATION}"]'},
    }
    assert stage["spec"]["selector"] == GENERAL_COMPLETE["spec"]["selector"]
    assert stage["spec"]["next"] == GENERAL_COMPLETE["spec"]["next"]
    assert "jitterDurationMilliseconds" in GENERAL_COMPLETE["spec"]["delay"]  # not changed


def _module(tmp_path: Path, complete_name: str = "pod-complete") -> Path:
    for index, name in enumerate(kwok.STAGE_FILES):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        stage = {"kind": "Stage", "metadata": {"name": f"stage-{index}"}, "spec": {}}
        path.write_text(yaml.safe_dump(stage))
    path = tmp_path / kwok.TIMED_COMPLETE
    path.parent.mkdir(parents=True, exist_ok=True)
    complete = {**GENERAL_COMPLETE, "metadata": {"name": complete_name}}
    path.write_text(yaml.safe_dump(complete))
    return tmp_path


def test_the_stages_are_the_modules_with_the_timed_complete(tmp_path: Path) -> None:
    found = kwok.stages(_module(tmp_path))
    assert [s["metadata"]["name"] for s in found] == [
        *(f"stage-{i}" for i in range(len(kwok.STAGE_FILES))),
        "pod-complete",
    ]
    assert found[-1]["spec"]["delay"]["durationMilliseconds"] == 0
    # The fast stages' files, never the fast pod-complete: two stages of one name would
    # let a pod complete at once.
    assert not any(f.endswith("pod/fast/pod-complete.yaml") for f in kwok.STAGE_FILES)


def test_two_stages_of_one_name_are_refused(tmp_path: Path) -> None:
    with pytest.raises(StartError, match="repeat a name"):
        kwok.stages(_module(tmp_path, complete_name="stage-0"))


def test_a_simulated_node_offers_its_shape_and_is_kwoks() -> None:
    shape = kwok.NodeShape(count=2, cpu="8", memory="32Gi", pods="50")
    names = kwok.node_names("worker1", shape)
    assert names == ["worker1-kwok-0", "worker1-kwok-1"]
    node = kwok.node(names[0], shape)
    assert node["metadata"]["labels"] == {"type": "kwok", "kubernetes.io/hostname": names[0]}
    wanted = {"cpu": "8", "memory": "32Gi", "pods": "50"}
    assert node["status"] == {"allocatable": wanted, "capacity": wanted}
    assert "spec" not in node  # no taint: the stream's pods need no toleration


def test_every_pod_the_stream_makes_carries_its_run_time() -> None:
    stream = draw({"w1": 3, "w2": 4}, minutes=5, time=60, seed=3)
    classes = {0: "low", 100: "normal", 200: "high"}
    templates = []
    for job in stream.scenario.jobs:
        obj = job_object(job, stream, "team-a", "user-queue", classes, "busybox")
        if obj["kind"] == "Job":
            templates.append(obj["spec"]["template"])
        elif obj["kind"] == "JobSet":
            templates += [r["template"]["spec"]["template"] for r in obj["spec"]["replicatedJobs"]]
    templates += [
        local_object(j, i, "team-a", "user-queue", classes, "busybox")["spec"]["template"]
        for i, j in enumerate(stream.scenario.local)
    ]
    assert templates
    for template in templates:
        sleep = template["spec"]["containers"][0]["command"][1]
        assert template["metadata"]["annotations"] == {kwok.RUN_ANNOTATION: f"{sleep}s"}


@pytest.mark.parametrize("workers", [3, 10])
def test_the_comparisons_fleet_is_a_stack_the_project_accepts(workers: int, tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.kwok.yaml"
    stack.write_text(yaml.safe_dump(stack_document(workers), sort_keys=False))
    spec, _ = load_stack(str(stack))
    assert [w.name for w in spec.workers] == [f"worker{i + 1}" for i in range(workers)]
    assert len({w.labels["region"] for w in spec.workers}) == workers
    cores = [w.quotas["cluster-queue"]["default-flavor"]["cpu"] for w in spec.workers]
    assert [str(c) for c in cores[:3]] == ["3", "4", "5"]
    assert spec.dispatcher.enabled  # Kueue's own are chosen by dispatched_fleet
    queue = next(q for q in spec.queues.cluster_queues if q.name == "cluster-queue")
    assert queue.preemption.within_cluster_queue == "LowerPriority"


@pytest.mark.parametrize(("flag", "shape"), [([], None), (["--kwok"], kwok.NodeShape())])
def test_up_gives_workers_simulated_nodes_only_when_asked(
    flag: list[str], shape: kwok.NodeShape | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loopback import __main__ as cli
    from loopback import fleet

    asked: dict[str, object] = {}

    def up(stack: str, state: Path, **options: object) -> fleet.Fleet:
        asked.update(options)
        return fleet.Fleet(state, {"clusters": {}})

    monkeypatch.setattr(fleet, "up", up)
    assert cli.main(["up", "--stack", "loopback", *flag]) == 0
    assert asked["kwok"] == shape


def test_a_missing_kwok_build_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from loopback import __main__ as cli
    from loopback import fleet

    def up(stack: str, state: Path, **options: object) -> fleet.Fleet:
        raise toolchain.ToolchainError("kwok not built from the current pins: run `x`")

    monkeypatch.setattr(fleet, "up", up)
    assert cli.main(["up", "--kwok"]) == 2
    assert capsys.readouterr().err == "error: kwok not built from the current pins: run `x`\n"


def test_the_table_simulates_again_the_stream_each_seed_drew(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    import fleet_compare
    import kwok_compare

    # What stream_of assumes of the fleet is what stack_document gives it.
    document = stack_document(4)
    queue = document["config"]["multikueue-fleet:queues"]["clusterQueues"][0]
    assert queue["preemption"] == {"withinClusterQueue": "LowerPriority"}
    assert "queueingStrategy" not in queue  # Kueue's default, BestEffortFIFO
    quotas = [w["quotas"]["cluster-queue"]["default-flavor"]["cpu"] for w in
              document["config"]["multikueue-fleet:workers"]]  # fmt: skip
    assert quotas == [3, 4, 5, 3]

    real = {"p50": 1.0, "p95": 9.0, "copies": 1.0, "unfinished": 0.0}
    rows = [{"dispatcher": "policy", "seed": 2, "real": real, "simulated": {"p95": 99.0}}]
    path = tmp_path / "runs.csv"
    fleet_compare._csv(path, rows)
    assert kwok_compare.main(["--table", str(path), "--minutes", "1"]) == 0
    out = capsys.readouterr().out
    args = argparse.Namespace(workers=3, minutes=1.0, time_scale=60.0)
    expected = kwok_compare._predicted(
        kwok_compare.stream_of(args, 2), "policy", kwok_compare.KWOK_SETTINGS
    )
    simulated_row = next(line for line in out.splitlines() if "simulated" in line)
    assert f"| {fleet_compare._cell(expected['p95'])} |" in simulated_row
    assert "| 99 |" not in simulated_row  # the CSV's own simulated side is not used
    assert kwok_compare.main(["--table", str(tmp_path / "none.csv")]) == 2


def test_the_workload_reads_are_the_gets_of_workloads_a_worker_served() -> None:
    """What a worker's kube-apiserver counts (v1.36 `apiserver_request_total`): the GETs of
    Workloads, found or not, and nothing else (a list, a status write, a Job's GET)."""

    def sample(verb: str, n: int, code: int = 200, resource: str = "workloads",
               sub: str = "") -> str:  # fmt: skip
        group = "batch" if resource == "jobs" else "kueue.x-k8s.io"
        return (
            f'apiserver_request_total{{code="{code}",component="apiserver",dry_run="",'
            f'group="{group}",resource="{resource}",scope="resource",subresource="{sub}",'
            f'verb="{verb}",version="v1"}} {n}'
        )

    page = "\n".join(
        [
            "# TYPE apiserver_request_total counter",
            sample("GET", 93),
            sample("GET", 381, code=404),
            sample("GET", 5, sub="status"),
            sample("LIST", 7),
            sample("GET", 119, resource="jobs"),
        ]
    )
    assert workload_gets(page) == 93 + 381
    assert workload_gets("") == 0


@pytest.mark.parametrize(
    ("dispatcher", "name"),
    [
        ("policy", "ours"),  # the stack's own dispatcher name
        ("AllAtOnce", None),  # no dispatcherName: Kueue v0.19.2's default
        ("Incremental", "kueue.x-k8s.io/multikueue-dispatcher-incremental"),
    ],
)
def test_each_dispatcher_gets_the_kueue_configuration_that_names_it(
    dispatcher: str, name: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from components.objects.kueue_config import configuration
    from tests.helpers import real_fleet

    started: list[object] = []

    def up(_stack: str, _state: Path, *, spec: object, **_options: object) -> None:
        started.append(spec)
        raise RuntimeError("stop here")

    downed: list[Path] = []
    monkeypatch.setattr(real_fleet.loopback_fleet, "up", up)
    monkeypatch.setattr(real_fleet.loopback_fleet, "down", lambda state, **_: downed.append(state))
    with pytest.raises(RuntimeError, match="stop here"):
        real_fleet.dispatched_fleet(stack_document(4), tmp_path, dispatcher=dispatcher)
    (spec,) = started
    manager = spec.manager  # type: ignore[attr-defined]
    found = (configuration(spec, manager).get("multiKueue") or {}).get("dispatcherName")
    if name == "ours":
        name = spec.dispatcher.name  # type: ignore[attr-defined]
    assert found == name
    assert downed == []  # nothing was up to bring down
    with pytest.raises(ValueError, match="'Random': not policy, AllAtOnce or Incremental"):
        real_fleet.dispatched_fleet(stack_document(4), tmp_path, dispatcher="Random")
