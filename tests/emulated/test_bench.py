"""The benchmark scripts still run (at a tiny size): a benchmark that rots is worse than
none. Their numbers are in BENCHMARKS.md, never asserted here."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import controller_bench  # noqa: E402
import policy_bench  # noqa: E402
import provisioning_bench  # noqa: E402

from controller.settings import Settings  # noqa: E402
from tests.helpers.apiserver import stop  # noqa: E402


def test_policy_benchmark_runs() -> None:
    row = policy_bench.run(3, 40)
    assert row["nominated"] == 40
    assert row["p99_ms"] >= row["p50_ms"] > 0


def test_controller_benchmark_runs() -> None:
    row = asyncio.run(controller_bench.measure(2, 30, 5, "emulator", None))
    assert row["rate"] > 0 and row["raw"] > 0 and row["rss_mb"] > 0
    assert row["p99_ms"] >= row["p50_ms"] > 0
    # The ceiling is measured with as many writes in flight as the controller keeps.
    assert row["in_flight"] == Settings().concurrent_writes and row["same"] > 0


def test_a_server_slow_to_stop_is_killed_after_its_grace() -> None:
    """kube-apiserver can take well over 10 s to stop: the benchmark (and the tests'
    server) wait a grace period, then kill, instead of losing the run to a timeout."""
    slow = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
    )
    assert slow.stdout is not None and slow.stdout.readline() == b"ready\n"
    stop(slow, grace=0.5)
    assert slow.returncode == -signal.SIGKILL


def test_controller_benchmark_against_a_given_server(tmp_path: Path) -> None:
    """The path a real kube-apiserver takes (status through /status, nominations seen by a
    watcher), here with an emulator in another process standing in for the server."""
    import json
    import time

    import yaml

    urls = tmp_path / "urls.json"
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.kube_emulator", "--no-schemas", str(urls), "manager"],
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 30
        while not urls.exists() or not urls.read_text():
            assert time.monotonic() < deadline, "the emulator did not start"
            time.sleep(0.1)
        given = tmp_path / "kubeconfig.yaml"
        url = json.loads(urls.read_text())["manager"]
        given.write_text(yaml.safe_dump(controller_bench.kubeconfig("manager", url)))
        row = asyncio.run(controller_bench.measure(2, 30, 5, "emulator", str(given)))
    finally:
        stop(server)
    assert row["server"] == "given"
    assert row["rate"] > 0 and row["raw"] > 0
    assert row["p99_ms"] >= row["p50_ms"] > 0


def test_real_server_mode_says_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tests.helpers.apiserver

    for assets, said in (("", "is not set"), (str(tmp_path), "lacks kube-apiserver, etcd")):
        monkeypatch.setattr(tests.helpers.apiserver, "ASSETS", assets)
        with (
            pytest.raises(SystemExit, match=f"--server real: KUBEBUILDER_ASSETS.*{said}"),
            controller_bench.manager_server("real", None, {}),
        ):
            pass


def test_provisioning_benchmark_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.helpers.pulumi_harness import prepare_environment

    prepare_environment(tmp_path, monkeypatch)
    row = provisioning_bench.measure(2, 3)
    assert row["resources"] > 0 and row["objects"] >= 3 * 3
