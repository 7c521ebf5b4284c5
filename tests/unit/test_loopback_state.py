"""`python -m loopback up --state DIR` writes only where `down` may remove everything: a new
or empty folder, or one an earlier `up` marked (its logs after a failed start)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from loopback import fleet
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
