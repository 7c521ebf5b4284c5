"""A fake `docker` first on PATH for the kindnode unit tests: a bash script of the test's,
which logs every call to the file FAKE_LOG names."""

from __future__ import annotations

from pathlib import Path

import pytest


def install_fake_docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> Path:
    """SCRIPT as `docker` on PATH (before /usr/bin and /bin only); returns the call log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(script)
    (bin_dir / "docker").chmod(0o755)
    log = tmp_path / "calls.log"
    log.touch()
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_LOG", str(log))
    return log
