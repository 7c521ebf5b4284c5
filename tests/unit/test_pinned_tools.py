"""`mkf`'s kind and Pulumi CLI (components/cli/pinned_tools.py): the pinned version on PATH,
else the project's tools folder put first on PATH, else another version with a warning."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from components.cli.pinned_tools import use_pinned_tools
from components.model.versions import KIND_VERSION, PULUMI_CLI_VERSION

PINNED = {"kind": f"kind {KIND_VERSION} go1.26.8 linux/amd64", "pulumi": f"v{PULUMI_CLI_VERSION}"}


def _tool(folder: Path, name: str, version: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\necho '{version}'\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def logged(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("MKF_TOOLS_DIR", str(tmp_path / "tools"))
    return []


def test_the_pinned_tools_on_path_are_used_as_they_are(tmp_path: Path, logged: list[str]) -> None:
    mine = tmp_path / "mine"
    for name, version in PINNED.items():
        _tool(mine, name, version)
        _tool(tmp_path / "tools", name, version)
    os.environ["PATH"] = str(mine)
    use_pinned_tools(tmp_path, logged.append)
    assert os.environ["PATH"] == str(mine) and logged == []


def test_an_other_version_on_path_gives_way_to_the_pinned_one_in_the_tools_folder(
    tmp_path: Path, logged: list[str]
) -> None:
    old = tmp_path / "old"
    _tool(old, "kind", "kind v0.20.0 go1.20 linux/amd64")
    _tool(old, "pulumi", "v3.100.0")
    for name, version in PINNED.items():
        _tool(tmp_path / "tools", name, version)
    os.environ["PATH"] = str(old)
    use_pinned_tools(tmp_path, logged.append)
    assert os.environ["PATH"].split(os.pathsep)[0] == str(tmp_path / "tools")
    assert logged == []


def test_only_an_other_version_is_used_with_a_warning(tmp_path: Path, logged: list[str]) -> None:
    old = tmp_path / "old"
    _tool(old, "kind", "kind v0.20.0 go1.20 linux/amd64")
    _tool(old, "pulumi", "v3.100.0")
    os.environ["PATH"] = str(old)
    use_pinned_tools(tmp_path, logged.append)
    assert os.environ["PATH"] == str(old)
    kind, pulumi = logged
    assert (
        kind.startswith(f"warning: kind at {old / 'kind'} is kind v0.20.0") and KIND_VERSION in kind
    )
    assert "scripts/up.sh installs it" in kind
    assert pulumi.startswith("warning: pulumi at") and f"v{PULUMI_CLI_VERSION}" in pulumi


def test_nothing_found_is_left_to_the_pre_flight(tmp_path: Path, logged: list[str]) -> None:
    """Missing tools are require_tools' to name (one line), not a warning here."""
    use_pinned_tools(tmp_path, logged.append)
    assert logged == []
