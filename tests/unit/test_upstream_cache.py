"""Upstream downloads: cached atomically with their digest, used only when whole; a
truncated download or cached file is refused and fetched again."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import pytest

from components.upstream import releases as upstream

URL = "https://example.com/manifests.yaml"
WHOLE = "kind: CustomResourceDefinition\n---\nkind: Deployment\nmetadata: {name: m}\n"


class Response(io.BytesIO):
    def __init__(self, body: bytes, length: int | None = None) -> None:
        super().__init__(body)
        self.headers = {} if length is None else {"Content-Length": str(length)}


@pytest.fixture
def net(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Response]:
    monkeypatch.setenv("MKF_UPSTREAM_CACHE", str(tmp_path))
    served: list[Response] = []

    def urlopen(url: str, timeout: float) -> Response:
        return served.pop(0)

    monkeypatch.setattr(upstream.urllib.request, "urlopen", urlopen)
    return served


def test_a_whole_download_is_cached_and_reused(net: list[Any], tmp_path: Path) -> None:
    net.append(Response(WHOLE.encode(), len(WHOLE)))
    assert upstream.fetch(URL, expect_kinds=["Deployment"]) == WHOLE
    assert upstream.fetch(URL) == WHOLE  # no second download: `net` is empty
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp left


def test_a_truncated_download_is_refused_and_not_cached(net: list[Any], tmp_path: Path) -> None:
    net.append(Response(WHOLE[:30].encode(), len(WHOLE)))
    with pytest.raises(RuntimeError, match=r"truncated \(30 of \d+ bytes\)"):
        upstream.fetch(URL)
    assert list(tmp_path.iterdir()) == []
    net.append(Response(b"kind: CustomResourceDefinition\n"))  # cut at a document boundary
    with pytest.raises(RuntimeError, match="no Deployment in it"):
        upstream.fetch(URL, expect_kinds=["CustomResourceDefinition", "Deployment"])
    net.append(Response(b"kind: Deployment\nmetadata: {name: [\n"))
    with pytest.raises(RuntimeError, match="not parseable YAML"):
        upstream.fetch(URL)


def test_a_truncated_cache_file_is_fetched_again(net: list[Any], tmp_path: Path) -> None:
    net.append(Response(WHOLE.encode()))
    upstream.fetch(URL)
    cached = tmp_path / upstream.cache_key(URL)
    cached.write_text(WHOLE[:20])  # as a write cut short by an older version left it
    net.append(Response(WHOLE.encode()))
    assert upstream.fetch(URL) == WHOLE
    assert cached.read_text() == WHOLE


def test_a_cache_entry_without_digest_is_used_only_when_whole(
    net: list[Any], tmp_path: Path
) -> None:
    cached = tmp_path / upstream.cache_key(URL)
    cached.write_text(WHOLE)  # an unpinned artifact, seeded by hand or by an older version
    assert upstream.fetch(URL, expect_kinds=["Deployment"]) == WHOLE
    assert cached.with_suffix(".sha256").exists()
    cached.with_suffix(".sha256").unlink()
    cached.write_text("kind: Deployment\nmetadata: {name: [\n")  # cut mid-object
    net.append(Response(WHOLE.encode()))
    assert upstream.fetch(URL) == WHOLE


def test_a_pinned_artifact_must_match_its_digest(
    net: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(upstream.PINNED_SHA256, URL, "0" * 64)
    monkeypatch.setattr(upstream.gomodule, "SOURCES", {})
    net.append(Response(WHOLE.encode()))
    with pytest.raises(RuntimeError, match=r"not the pinned 0000.*tampered"):
        upstream.fetch(URL)


def test_without_the_release_url_the_go_module_of_its_tag_is_used(
    net: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unreachable(url: str, timeout: float) -> Response:
        raise OSError("network is unreachable")

    monkeypatch.setattr(upstream.urllib.request, "urlopen", unreachable)
    monkeypatch.setattr(upstream.gomodule, "has_source", lambda url: url.startswith(URL))
    monkeypatch.setattr(upstream.gomodule, "artifact_text", lambda url: WHOLE)
    assert upstream.fetch(URL) == WHOLE
    assert (tmp_path / upstream.cache_key(URL)).read_text() == WHOLE  # cached like a download

    def broken(url: str) -> str:
        raise upstream.gomodule.ModuleSourceError("go mod download failed")

    monkeypatch.setattr(upstream.gomodule, "artifact_text", broken)
    with pytest.raises(RuntimeError, match=r"cannot download .*; nor from its Go module: go mod"):
        upstream.fetch(URL + "?other")  # not cached


def test_a_pinned_artifacts_cached_copy_must_have_the_pinned_digest(
    net: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sidecar digest is only as trustworthy as the folder: a cached copy of a pinned
    artifact is checked against the pin itself, and one that differs is fetched again
    (through the pinned check), whether it has a matching sidecar or none."""
    monkeypatch.setitem(upstream.PINNED_SHA256, URL, hashlib.sha256(WHOLE.encode()).hexdigest())
    net.append(Response(WHOLE.encode()))
    assert upstream.fetch(URL) == WHOLE
    assert upstream.fetch(URL) == WHOLE  # untouched: used as it is, nothing downloaded
    cached = tmp_path / upstream.cache_key(URL)
    evil = "kind: Namespace\nmetadata: {name: evil}\n"
    for sidecar in (True, False):
        cached.write_text(evil)
        sidecar_file = cached.with_suffix(".sha256")
        if sidecar:
            sidecar_file.write_text(hashlib.sha256(evil.encode()).hexdigest() + "\n")
        else:
            sidecar_file.unlink()
        net.append(Response(WHOLE.encode()))
        assert upstream.fetch(URL) == WHOLE
        assert upstream.verified_file(URL) and cached.read_text() == WHOLE
    # And when the pinned bytes cannot be had again, the tampered copy is refused, not used.
    cached.write_text(evil)
    monkeypatch.setattr(upstream.gomodule, "SOURCES", {})
    net.append(Response(evil.encode()))
    with pytest.raises(RuntimeError, match="not the pinned"):
        upstream.fetch(URL)
