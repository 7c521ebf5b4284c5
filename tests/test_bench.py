"""The benchmark scripts still run (at a tiny size): a benchmark that rots is worse than
none. Their numbers are in BENCHMARKS.md, never asserted here."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import controller_bench  # noqa: E402
import policy_bench  # noqa: E402
import provisioning_bench  # noqa: E402


def test_policy_benchmark_runs() -> None:
    row = policy_bench.run(3, 40)
    assert row["nominated"] == 40
    assert row["p99_ms"] >= row["p50_ms"] > 0


def test_controller_benchmark_runs() -> None:
    row = asyncio.run(controller_bench.measure(2, 30, 5))
    assert row["rate"] > 0 and row["raw"] > 0 and row["rss_mb"] > 0


def test_provisioning_benchmark_runs(tmp_path: Path) -> None:
    from tests.pulumi_harness import prepare_environment

    prepare_environment(tmp_path)
    row = provisioning_bench.measure(2, 3)
    assert row["resources"] > 0 and row["objects"] >= 3 * 3
