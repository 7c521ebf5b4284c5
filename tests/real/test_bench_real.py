"""The controller benchmark's real-server mode, on a real kube-apiserver."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from tests.helpers.apiserver import missing

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import controller_bench


@pytest.mark.skipif(bool(missing()), reason=missing())
def test_real_server_mode_runs() -> None:
    """The controller benchmark against a real kube-apiserver (the binaries built from Go
    modules, as CI builds them), at a small size."""
    row = asyncio.run(controller_bench.measure(2, 30, 5, "real", None))
    assert row["server"] == "real"
    assert row["rate"] > 0 and row["raw"] > 0
    assert row["p99_ms"] >= row["p50_ms"] > 0
    # The server's CPU is kube-apiserver's and etcd's, found by their flags.
    assert row["srv_ms"] > 0 and row["raw_ms"] > 0
