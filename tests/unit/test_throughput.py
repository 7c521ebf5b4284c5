"""bench/throughput.py, Kueue's throughput measure with our dispatcher in the loop: the fleet
it asks for, how it sums a run, and what it refuses before starting anything."""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import throughput  # noqa: E402

from components.checks.load import load_stack  # noqa: E402
from components.objects.kueue_config import configuration  # noqa: E402


def _spec(tmp_path: Path, document: dict):  # type: ignore[no-untyped-def,type-arg]
    stack = tmp_path / f"{len(list(tmp_path.iterdir()))}" / "Pulumi.throughput.yaml"
    stack.parent.mkdir()
    stack.write_text(yaml.safe_dump(document, sort_keys=False))
    spec, _ = load_stack(str(stack))
    return spec


def test_the_fleet_is_kueues_shape_and_only_the_dispatcher_differs(tmp_path: Path) -> None:
    from tests.helpers.real_fleet import loopback_document, without_our_dispatcher

    ours = _spec(tmp_path, loopback_document(3))
    theirs = _spec(tmp_path, without_our_dispatcher(loopback_document(3)))
    for spec in (ours, theirs):
        assert [w.name for w in spec.workers] == ["worker1", "worker2", "worker3"]
        assert len({w.labels["region"] for w in spec.workers}) == 3
    ours_config = configuration(ours, ours.manager)
    theirs_config = configuration(theirs, theirs.manager)
    assert ours_config["multiKueue"]["dispatcherName"] == ours.dispatcher.name
    # No dispatcherName: Kueue v0.19.2's default, AllAtOnce.
    assert "dispatcherName" not in (theirs_config.get("multiKueue") or {})
    ours_config.pop("multiKueue")
    theirs_config.pop("multiKueue")
    # The gate the project turns on with its dispatcher (components/objects/kueue_config.py)
    # is the only other difference.
    gates = ours_config.pop("featureGates")
    assert gates == {"WorkloadRequestUseMergePatch": True}, gates
    assert ours_config == theirs_config


def test_a_job_asks_for_so_little_that_quota_never_makes_it_wait() -> None:
    job = throughput.job("tp-00001")
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == throughput.QUEUE
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["requests"] == {"cpu": "1m", "memory": "1Mi"}


def test_a_run_is_summed_as_rates_and_nearest_rank_percentiles() -> None:
    run = throughput.Run("policy", started=100.0)
    for i in range(100):
        run.created[f"j{i}"] = 100.0 + i * 0.01
        run.admitted[f"j{i}"] = 100.0 + i * 0.01 + (i + 1) * 0.1
    run.copies = {f"uid{i}" for i in range(100)}
    row = run.row()
    assert row["admitted"] == row["workloads"] == 100
    assert row["P50 s"] == 5.0 and row["P99 s"] == 9.9
    assert row["seconds"] == pytest.approx(10.99, abs=0.1)
    assert row["workloads/s"] == pytest.approx(100 / 10.99, abs=0.1)
    assert row["copies/wl"] == 1.0
    assert math.isnan(throughput.percentile([], 50))


def test_the_table_gives_ours_against_all_at_once_and_kueues_figure() -> None:
    rows = [
        {"dispatcher": "AllAtOnce", "workloads/s": 4.0, "admitted": 10},
        {"dispatcher": "policy", "workloads/s": 12.0, "admitted": 10},
    ]
    text = throughput.table(rows)
    assert "ours / AllAtOnce, workloads per second: 3.00" in text
    assert "1.31 workloads/s at Kueue's default client limits" in text


def test_bad_arguments_and_missing_binaries_are_one_line_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit) as exited:
        throughput.main(["--dispatchers", "Incremental"])
    assert exited.value.code == 2
    assert "--dispatchers: Incremental" in capsys.readouterr().err
    from components.upstream import toolchain

    monkeypatch.setattr(toolchain, "path_of", lambda name: tmp_path / name)
    assert throughput.main(["--workloads", "5"]) == 2
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and "python -m loopback build" in said[0], said


def test_the_dispatchers_cost_is_read_from_its_metrics_page() -> None:
    page = (
        "# TYPE process_cpu_seconds_total counter\n"
        "process_cpu_seconds_total 12.34\n"
        "# TYPE mkf_write_errors_total counter\n"
        'mkf_write_errors_total{kind="Workload"} 2.0\n'
        'mkf_write_errors_total{kind="Event"} 1.0\n'
    )
    assert throughput.dispatcher_metrics(page) == {"cpu": 12.3, "write_errors": 3.0}


def test_the_simulation_of_the_shape_is_bound_by_kueues_worker_clients(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--simulate`: the same shape in the simulation, with Kueue's worker clients (5 QPS,
    burst 10 per worker). 60 workloads at once: AllAtOnce's copy on every worker spends
    each worker's budget on every workload, ours one copy each, so ours sends fewer
    requests; packing (the default's BestFit) sends the whole burst to one worker, whose
    client then binds as every worker's binds AllAtOnce, so ours admits them no later
    (BENCHMARKS.md section 6); nothing needs the binaries."""
    assert throughput.main(["--simulate", "--workloads", "60"]) == 0
    out = capsys.readouterr().out
    rows = {
        cells[0]: cells
        for line in out.splitlines()
        if line.startswith("| AllAtOnce") or line.startswith("| policy")
        for cells in [[c.strip() for c in line.strip("|").split("|")]]
    }
    assert rows["AllAtOnce"][1:3] == ["60", "60"] and rows["policy"][1:3] == ["60", "60"]
    assert rows["AllAtOnce"][8] == "3.0" and rows["policy"][8] == "1.0"  # copies/wl
    assert float(rows["policy"][3]) <= float(rows["AllAtOnce"][3])  # seconds to the last
    sent = re.search(
        r"AllAtOnce \d+ \(([\d.]+) a workload\), policy \d+ \(([\d.]+) a workload", out
    )
    assert sent and float(sent[2]) < float(sent[1]), out
    # 60 workloads, each read from all three workers and copied to each: past the burst
    # of 10, 5 requests a second per worker; at least (60 * 2 - 10) / 5 s for AllAtOnce.
    assert float(rows["AllAtOnce"][3]) >= (60 * 2 - 10) / 5
