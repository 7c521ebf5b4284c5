"""Upstream release manifests: fetched at deploy time from their pinned URL (never stored
in this repository), kept whole and verified by their SHA-256 in a local cache, and
wrapped in a kustomization when parts of a release are left out. Nothing here builds or
edits an object: objects/kueue_install.py edits Kueue's manifest for a cluster."""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

from components.model.versions import PINNED_SHA256, Bundle
from components.objects.manifests import LOADER
from components.upstream import gomodule, toolchain

DEFAULT_CACHE = Path(__file__).resolve().parents[2] / ".cache" / "upstream"

Fetch = Callable[[str], str]


def cache_key(url: str) -> str:
    return hashlib.sha256(url.encode()).hexdigest()


def _cache_dir() -> Path:
    return Path(os.environ.get("MKF_UPSTREAM_CACHE") or DEFAULT_CACHE)


def cached(url: str) -> str | None:
    """The document at `url` if a deploy (or `fetch`) already put it in the cache."""
    path = _cache_dir() / cache_key(url)
    return path.read_text() if path.is_file() else None


def fetch(
    url: str,
    timeout: float = 60,
    expect_kinds: Iterable[str] = (),
    cache_dir: Path | None = None,
) -> str:
    """The document at `url`, from the local cache when it was fetched whole before (a
    pinned release never changes). A download is used and cached only when it is whole: as
    long as its Content-Length, parseable YAML with at least one object, and every kind in
    `expect_kinds` present; a truncated manifest would silently drop objects that Pulumi then
    deletes. The cache is written atomically (temporary file, then rename) with the content's
    SHA-256 beside it; a cached file that does not match it is fetched again. A pinned
    artifact's cached copy must have the pinned SHA-256 itself (the sidecar is only as
    trustworthy as the folder it sits in): one that does not is fetched again, through the
    same pinned check as any download."""
    cache = cache_dir or _cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    cached = cache / cache_key(url)
    digest = cached.with_suffix(".sha256")
    pinned = PINNED_SHA256.get(url)
    if cached.exists():
        text = cached.read_text()
        if pinned:
            if hashlib.sha256(text.encode()).hexdigest() == pinned:
                return text
        elif digest.exists():
            if hashlib.sha256(text.encode()).hexdigest() == digest.read_text().strip():
                return text
        elif whole_manifest_problem(text, expect_kinds) is None:
            # Cached before digests were kept (or seeded by hand): whole, so recorded now.
            _write_atomically(digest, hashlib.sha256(text.encode()).hexdigest() + "\n")
            return text
    try:
        text = _download(url, timeout, expect_kinds)
    except RuntimeError as download_error:
        if not gomodule.has_source(url):
            raise
        # The same artifact from the Go module of its tag (a machine that reaches only the Go
        # module proxy); checked by go.sum and the pinned SHA-256 like a download.
        try:
            text = gomodule.artifact_text(url)
        except (gomodule.ModuleSourceError, toolchain.ToolchainError) as module_error:
            raise RuntimeError(
                f"{download_error}; nor from its Go module: {module_error}"
            ) from None
    _write_atomically(digest, hashlib.sha256(text.encode()).hexdigest() + "\n")
    _write_atomically(cached, text)
    return text


def _download(url: str, timeout: float, expect_kinds: Iterable[str]) -> str:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            body = response.read()
            length = response.headers.get("Content-Length")
    except OSError as exc:
        raise RuntimeError(
            f"cannot download {url}: {exc}; check the network, or that the "
            "pinned release still exists"
        ) from exc
    if length is not None and length.isdigit() and int(length) != len(body):
        raise RuntimeError(
            f"download of {url} is truncated ({len(body)} of {length} bytes); run again"
        )
    text = body.decode()
    problem = whole_manifest_problem(text, expect_kinds)
    if problem:
        raise RuntimeError(f"download of {url} is not a whole manifest: {problem}; run again")
    pinned = PINNED_SHA256.get(url)
    if pinned and (got := hashlib.sha256(body).hexdigest()) != pinned:
        raise RuntimeError(
            f"download of {url} has SHA-256 {got}, not the pinned {pinned}: the release was "
            "changed or the download was tampered with; do not deploy it"
        )
    return text


def verified_file(url: str, fetcher: Fetch = fetch) -> str:
    """A local file holding the artifact at `url` as `fetcher` returned it (downloaded or made
    from its Go module, checked against its pinned SHA-256 where one is pinned, and cached):
    what Pulumi applies, so that the provider never downloads an upstream manifest itself,
    unchecked. Relative to the project when the cache is inside it (the default), so the
    path in the stack's state is the same on every machine."""
    text = fetcher(url)
    folder = _cache_dir() / "verified"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{cache_key(url)}.yaml"
    if not path.is_file() or path.read_text() != text:
        _write_atomically(path, text)
    return _shown(path)


def local_kustomization(bundle: Bundle, resource: str | None = None) -> dict[str, Any]:
    """A kustomization of `resource` (the bundle's remote one unless given: a local copy)
    that deletes the objects named by `bundle.without` (a strategic-merge `$patch: delete`
    per name pattern) and applies `bundle.patches`."""
    deletes = [
        {
            "target": {"name": pattern},
            "patch": yaml.safe_dump(
                {
                    "$patch": "delete",
                    "apiVersion": "v1",
                    "kind": "Left-out",
                    "metadata": {"name": "left-out"},
                }
            ),
        }
        for pattern in bundle.without
    ]
    edits = [
        {"target": {"kind": kind, "name": f"^{re.escape(name)}$"}, "patch": patch}
        for kind, name, patch in bundle.patches
    ]
    return {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [resource or bundle.url],
        "patches": deletes + edits,
    }


def kustomize_directory(bundle: Bundle, source: Path | None = None) -> str:
    """Where to point a kustomize install: `source` (a verified local copy of the bundle's
    kustomization) or the remote URL itself, or (with `without` or `patches`) a local
    kustomization in the cache that wraps it. kustomize takes a local resource only by a
    path relative to the wrapping kustomization."""
    if not bundle.without and not bundle.patches:
        return _shown(source) if source is not None else bundle.url
    key = yaml.safe_dump(local_kustomization(bundle, str(source or "")), sort_keys=False)
    folder = _cache_dir() / "kustomize" / hashlib.sha256(key.encode()).hexdigest()[:16]
    resource = os.path.relpath(source, folder) if source is not None else None
    text = yaml.safe_dump(local_kustomization(bundle, resource), sort_keys=False)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kustomization.yaml").write_text(text)
    return _shown(folder)


def verified_kustomization(bundle: Bundle) -> str:
    """A kustomize bundle's directory to build, from the Go module of its tag, its source
    tree checked against its pinned SHA-256 (gomodule.kustomization_source): the remote
    URL is never built. RuntimeError, one line, when it cannot be had or does not match."""
    into = _cache_dir() / "kustomize-src"
    into.mkdir(parents=True, exist_ok=True)
    try:
        source = gomodule.kustomization_source(bundle, into)
    except (gomodule.ModuleSourceError, toolchain.ToolchainError) as exc:
        raise RuntimeError(f"{bundle.url} from its Go module: {exc}") from None
    return kustomize_directory(bundle, source)


def _shown(path: Path) -> str:
    """Relative to the project when the cache is inside it (the default), so the path in
    the stack's state is the same on every machine."""
    try:
        return str(path.resolve().relative_to(DEFAULT_CACHE.parents[1]))
    except ValueError:
        return str(path)


def whole_manifest_problem(text: str, expect_kinds: Iterable[str] = ()) -> str | None:
    """Why `text` is not a whole Kubernetes manifest, or None."""
    try:
        kinds = {d.get("kind") for d in yaml.load_all(text, Loader=LOADER) if isinstance(d, dict)}
    except yaml.YAMLError as exc:
        return f"not parseable YAML ({str(exc).splitlines()[0]})"
    kinds.discard(None)
    if not kinds:
        return "no Kubernetes object in it"
    missing = sorted(set(expect_kinds) - kinds)
    return f"no {', '.join(missing)} in it" if missing else None


def _write_atomically(path: Path, text: str) -> None:
    """Readers see the old file or the whole new one, never a part (rename is atomic)."""
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
