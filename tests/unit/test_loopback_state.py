"""`python -m loopback up --state DIR` writes only where `down` may remove everything: a new
or empty folder, or one an earlier `up` marked (its logs after a failed start)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from loopback import fleet
from loopback.processes import start, stop_all
from tests.helpers.stack_texts import ROOT


def _up(state: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopback", "up", "--stack", "dev", "--state", str(state)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_a_folder_with_files_of_its_own_is_refused_and_kept(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    result = _up(tmp_path)
    assert result.returncode == 2
    assert f"--state {tmp_path}: a folder with files of its own" in result.stderr
    assert "give a new or empty folder" in result.stderr and "Traceback" not in result.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "state").write_text("")
    with pytest.raises(fleet.FleetError, match="a file, not a folder"):
        fleet.claim(tmp_path / "state")


@pytest.mark.parametrize("content", [(), ("logs",)])
def test_a_new_empty_or_marked_folder_is_taken(tmp_path: Path, content: tuple[str, ...]) -> None:
    state = tmp_path / "state"
    fleet.claim(state)  # new: nothing made yet
    assert not state.exists()
    state.mkdir()
    if content:
        (state / fleet.MARK).touch()
        (state / "logs").mkdir()
    fleet.claim(state)


def test_processes_stop_last_started_first_each_within_its_own_grace(tmp_path: Path) -> None:
    """What started later is stopped first, and waited for, before what it may depend on
    gets SIGTERM; one that sits out SIGTERM is killed once its own grace is over."""
    order = tmp_path / "order"
    polite = start(
        "plane/etcd",
        ["sh", "-c", f"trap 'echo etcd >> {order}; exit 0' TERM; while :; do sleep 0.1; done"],
        tmp_path / "etcd.log",
    )
    deaf = start(
        "plane/kueue",
        ["sh", "-c", f"trap 'echo kueue >> {order}' TERM; while :; do sleep 0.1; done"],
        tmp_path / "kueue.log",
        grace=0.5,
    )
    time.sleep(0.3)  # both shells have set their traps
    began = time.monotonic()
    stopped = stop_all([polite.as_dict(), deaf.as_dict()], grace=10)
    took = time.monotonic() - began
    assert stopped == ["plane/kueue", "plane/etcd"]
    assert order.read_text().split() == ["kueue", "etcd"]
    assert 0.5 <= took < 5, took  # the deaf one's 0.5 s, not the 10 s given to the rest
    for process in (polite, deaf):
        assert process.process is not None and process.process.wait(5) is not None
    assert deaf.as_dict()["grace"] == 0.5 and "grace" not in polite.as_dict()


def test_the_egress_proxy_removes_its_socket_when_stopped(tmp_path: Path) -> None:
    """A deep state folder puts a plane's egress socket in /tmp (ControlPlane.egress_socket):
    `down` stops the proxy with SIGTERM, and the socket goes with it."""
    routes, sock = tmp_path / "routes.json", tmp_path / "egress.sock"
    routes.write_text("{}")
    proxy = start(
        "egress", [sys.executable, "-m", "loopback.egress", str(routes), str(sock)],
        tmp_path / "egress.log", env={"PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not sock.exists():
        assert time.monotonic() < deadline, (tmp_path / "egress.log").read_text()
        time.sleep(0.05)
    assert stop_all([proxy.as_dict()], grace=10) == ["egress"]
    assert not sock.exists()


def test_down_leaves_a_folder_up_did_not_make(tmp_path: Path) -> None:
    """A fleet record beside a user's files, without the mark `up` writes: `down` stops
    nothing, removes nothing, and says so in one line."""
    (tmp_path / fleet.RECORD).write_text('{"processes": [], "clusters": {}}')
    (tmp_path / "notes.txt").write_text("mine")
    result = subprocess.run(
        [sys.executable, "-m", "loopback", "down", "--state", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"error: --state {tmp_path}: not a folder")
    assert "remove it by hand" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [fleet.RECORD, "notes.txt"]
