"""The machine's build cache of the real tiers' binaries (components/upstream/toolchain.py):
a clone takes a binary built from the same pins from there instead of linking it again,
as a copy; one it builds goes there for the next; "off" leaves it alone. Go is faked here
(the unit tier has none): the fingerprint and `go build` are stood in for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from components.upstream import toolchain


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    bin_dir, cache = tmp_path / "clone" / ".tools" / "bin", tmp_path / "cache"
    bin_dir.mkdir(parents=True)
    monkeypatch.setattr(toolchain, "BIN_DIR", bin_dir)
    monkeypatch.setenv("MKF_BUILD_CACHE", str(cache))
    monkeypatch.setattr(toolchain, "go_binary", lambda: "go")
    monkeypatch.setattr(toolchain, "_fingerprint", lambda tool: f"pins-of-{tool.name}")
    builds: list[str] = []

    def go_build(_go: str, args: list[str], _cwd: Path, *, cgo: bool = False) -> str:
        target = Path(args[args.index("-o") + 1])
        target.write_bytes(b"linked " + target.name.encode())
        builds.append(target.name)
        return ""

    monkeypatch.setattr(toolchain, "_go", go_build)
    return type("Tools", (), {"bin": bin_dir, "cache": cache, "builds": builds})


def test_a_binary_of_the_same_pins_is_copied_from_the_cache_not_linked(tools: Any) -> None:
    cached = tools.cache / "pins-of-etcd" / "etcd"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"built by another clone")
    said: list[str] = []
    built = toolchain.build(["etcd"], log=said.append)
    assert tools.builds == []
    assert built["etcd"].read_bytes() == b"built by another clone"
    assert built["etcd"].stat().st_ino != cached.stat().st_ino  # a copy, not a link
    assert toolchain.is_built("etcd")
    assert "from this machine's build cache" in said[0]
    assert {p.name for p in tools.bin.iterdir()} == {"etcd", ".etcd.built"}


def test_a_binary_built_here_goes_into_the_cache_for_the_next_clone(tools: Any) -> None:
    toolchain.build(["etcd"], log=lambda _line: None)
    assert tools.builds == ["etcd"]
    assert (tools.cache / "pins-of-etcd" / "etcd").read_bytes() == b"linked etcd"
    assert [p.name for p in (tools.cache / "pins-of-etcd").iterdir()] == ["etcd"]


def test_other_pins_are_built_and_off_leaves_the_cache_alone(
    tools: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = tools.cache / "pins-of-an-older-etcd" / "etcd"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"older")
    monkeypatch.setenv("MKF_BUILD_CACHE", "off")
    toolchain.build(["etcd"], log=lambda _line: None)
    assert tools.builds == ["etcd"]
    assert [p.name for p in tools.cache.iterdir()] == ["pins-of-an-older-etcd"]


def test_a_current_binary_the_cache_lacks_is_put_there(tools: Any) -> None:
    toolchain.build(["etcd"], log=lambda _line: None)
    (tools.cache / "pins-of-etcd" / "etcd").unlink()
    said: list[str] = []
    toolchain.build(["etcd"], log=said.append)
    assert tools.builds == ["etcd"] and "up to date" in said[0]
    assert (tools.cache / "pins-of-etcd" / "etcd").read_bytes() == b"linked etcd"
