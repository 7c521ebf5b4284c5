"""The test tiers themselves (tests/conftest.py): the marker a folder gives, a skip that fails
under CI, a unit test that reaches off this machine failing, and a test outside every tier
refused. Each runs pytest on a small tree made like tests/ with the project's own conftest."""

from __future__ import annotations

from pathlib import Path

import pytest

CONFTEST = (Path(__file__).resolve().parents[1] / "conftest.py").read_text()


@pytest.fixture
def tree(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("MKF_REQUIRE_ALL_TIERS", raising=False)
    pytester.makeconftest(CONFTEST)
    for tier in ("unit", "real"):
        (pytester.path / tier).mkdir()
    return pytester


def test_the_folder_is_the_marker(tree: pytest.Pytester) -> None:
    (tree.path / "unit" / "test_a.py").write_text("def test_a():\n    pass\n")
    (tree.path / "real" / "test_b.py").write_text("def test_b():\n    pass\n")
    tree.runpytest("-m", "real").assert_outcomes(passed=1, deselected=1)
    tree.runpytest("-m", "unit or real").assert_outcomes(passed=2)


SKIPS = """import pytest

def test_needs_go():
    pytest.skip("Go is not on PATH: install Go 1.26.8")
"""


def test_a_skip_is_a_skip_outside_ci(tree: pytest.Pytester) -> None:
    (tree.path / "real" / "test_go.py").write_text(SKIPS)
    result = tree.runpytest("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*Go is not on PATH: install Go 1.26.8*"])


@pytest.mark.parametrize("variable", ["CI=true", "MKF_REQUIRE_ALL_TIERS=1"])
def test_under_ci_a_skip_fails_naming_what_is_missing(
    tree: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    name, value = variable.split("=")
    monkeypatch.setenv(name, value)
    (tree.path / "real" / "test_go.py").write_text(SKIPS)
    result = tree.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*skipped under CI, where every tier is required: Go is not on PATH*"]
    )
    assert tree.runpytest().ret == pytest.ExitCode.TESTS_FAILED


def test_a_test_in_no_tier_is_refused(tree: pytest.Pytester) -> None:
    (tree.path / "test_loose.py").write_text("def test_loose():\n    pass\n")
    result = tree.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test_loose.py::test_loose is in no tier folder*"])


def test_a_unit_test_that_leaves_this_machine_fails(tree: pytest.Pytester) -> None:
    """192.0.2.1 is TEST-NET-1 (RFC 5737): refused before any packet is sent."""
    (tree.path / "unit" / "test_net.py").write_text(
        "import socket\n\n"
        "def test_out():\n"
        "    with socket.socket() as s:\n"
        "        s.settimeout(1)\n"
        "        s.connect(('192.0.2.1', 443))\n\n"
        "def test_loopback_is_this_machine():\n"
        "    with socket.socket() as server, socket.socket() as client:\n"
        "        server.bind(('127.0.0.1', 0))\n"
        "        server.listen()\n"
        "        client.connect(server.getsockname())\n"
    )
    result = tree.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*a unit test connected to ('192.0.2.1', 443)*"])


LEAVES_A_KUBECONFIG = """import tempfile
from pathlib import Path

def test_writes_a_credential():
    (Path(tempfile.gettempdir()) / "kubeconfig123").write_text("client-key-data: x")
"""


@pytest.mark.parametrize("ci", [False, True])
def test_a_kubeconfig_left_in_the_temporary_folder_is_named_and_fails_ci(
    tree: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ci: bool
) -> None:
    """What pulumi-kubernetes leaves in $TMPDIR (components/cli/engine_tmp.py): a run that
    leaves one there says so, and under CI fails."""
    private = tmp_path / "machine-tmp"
    private.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(private))
    if ci:
        monkeypatch.setenv("CI", "true")
    (private / "kubeconfig-from-before").write_text("")  # not this run's: not named
    (tree.path / "unit" / "test_leaves.py").write_text(LEAVES_A_KUBECONFIG)
    result = tree.runpytest()
    result.assert_outcomes(passed=1)
    word = "error" if ci else "warning"
    result.stdout.fnmatch_lines([f"{word}: left in {private} while the tests ran*kubeconfig123;*"])
    assert "kubeconfig-from-before" not in result.stdout.str()
    assert result.ret == (pytest.ExitCode.TESTS_FAILED if ci else pytest.ExitCode.OK)


HOLDS_A_FLEET = """import time
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def fleet():
    yield
    Path("torn-down").write_text("the fleet's processes stopped")


def test_runs_long(fleet):
    Path("started").write_text("")
    time.sleep(60)
"""


def test_sigterm_runs_every_teardown_as_ctrl_c_does(tree: pytest.Pytester) -> None:
    """A tier's pytest stopped with SIGTERM (a CI's cancel, `kill`) stops its fixtures'
    fleets, as Ctrl-C does (tests/helpers/sigterm.py): Python's default would end it with
    the loopback fleet's processes still running."""
    import os
    import signal
    import subprocess
    import sys
    import time

    (tree.path / "real" / "test_holds.py").write_text(HOLDS_A_FLEET)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    child = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "real"],
        cwd=tree.path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (tree.path / "started").exists():
            assert child.poll() is None and time.monotonic() < deadline, child.communicate()[0]
            time.sleep(0.1)
        child.send_signal(signal.SIGTERM)
        out, _ = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    assert (tree.path / "torn-down").exists(), out
    assert child.returncode == pytest.ExitCode.INTERRUPTED, out
