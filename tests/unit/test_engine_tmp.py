"""The engine's own temporary folder (components/cli/engine_tmp.py): private, removed at the
end of the command, and one a killed command left removed by the next."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from components.cli.engine_tmp import engine_tmpdir, sweep


def test_each_command_gets_a_private_folder_removed_at_its_end(tmp_path: Path) -> None:
    with engine_tmpdir(tmp_path) as folder:
        assert folder.parent == tmp_path / "tmp"
        assert folder.name.startswith(f"engine-{os.getpid()}-")
        assert folder.stat().st_mode & 0o777 == 0o700
        assert (tmp_path / "tmp").stat().st_mode & 0o777 == 0o700
        (folder / "kubeconfig123").write_text("client-key-data: ...")
    assert list((tmp_path / "tmp").iterdir()) == []


def test_a_folder_is_removed_even_when_the_command_fails(tmp_path: Path) -> None:
    try:
        with engine_tmpdir(tmp_path) as folder:
            (folder / "kubeconfig1").write_text("x")
            raise RuntimeError("pulumi up failed")
    except RuntimeError:
        pass
    assert list((tmp_path / "tmp").iterdir()) == []


def test_only_the_folders_of_commands_that_are_gone_are_swept(tmp_path: Path) -> None:
    gone = tmp_path / "engine-999999999-abc"  # beyond any pid_max: no such process
    live = tmp_path / f"engine-{os.getpid()}-abc"
    other = tmp_path / "engine-notapid-abc"
    mine = tmp_path / "something-else"
    for folder in (gone, live, other, mine):
        folder.mkdir()
    assert sweep(tmp_path) == [gone]
    assert sorted(tmp_path.iterdir()) == sorted([live, other, mine])


def test_the_scripts_get_their_folder_by_the_same_rule(tmp_path: Path) -> None:
    """scripts/up.sh and down.sh ask for theirs by the script's pid (scripts/env.sh
    private_engine_tmp): a folder named for it, private, after a gone command's was swept."""
    gone = tmp_path / "tmp" / "engine-999999999-abc"
    gone.mkdir(parents=True)
    script_pid = os.getppid()  # a process that outlives the command, as the script does
    made = subprocess.run(
        [sys.executable, "-m", "components.cli.engine_tmp", str(tmp_path), str(script_pid)],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    folder = Path(made.stdout.strip())
    assert folder.parent == tmp_path / "tmp" and folder.is_dir()
    assert folder.name.startswith(f"engine-{script_pid}-")
    assert folder.stat().st_mode & 0o777 == 0o700
    assert not gone.exists()
