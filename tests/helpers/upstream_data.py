"""Where tests find Kueue's real CRDs and install manifest and the ClusterProfile CRD: the
same pinned sources a deploy uses (components/upstream.py fetch: the release URL, else the
Go module of the same tag; checked by the pinned SHA-256), cached in the project's own
upstream cache. Never the cache a test points MKF_UPSTREAM_CACHE at (tests/helpers/pulumi_harness.py
fills that one with synthetic releases). A test that needs them skips, saying why, when
neither source can be reached."""

from __future__ import annotations

import functools
from typing import Any

import yaml

from components.checks.crd_schema import CrdSchemas
from components.model.versions import KUEUE_VERSION, clusterprofile_crd_bundle, kueue_bundle
from components.upstream import releases as upstream

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def _pinned(url: str) -> tuple[str | None, str]:
    """The artifact's text and "", or None and why it could not be had."""
    try:
        return upstream.fetch(url, cache_dir=upstream.DEFAULT_CACHE), ""
    except RuntimeError as exc:
        return None, str(exc)


def real_kueue_manifest() -> str | None:
    """Kueue's whole pinned install manifest text, or None."""
    return _pinned(kueue_bundle(KUEUE_VERSION).url)[0]


def why_missing() -> str:
    """Why the real upstream data is not here ("" when it is)."""
    for url in (kueue_bundle(KUEUE_VERSION).url, clusterprofile_crd_bundle().url):
        text, why = _pinned(url)
        if text is None:
            return f"Kueue {KUEUE_VERSION}'s pinned upstream data cannot be had: {why}"
    return ""


@functools.cache
def real_crd_documents() -> tuple[dict[str, Any], ...]:
    """Kueue's CRDs (from its install manifest) and the ClusterProfile CRD; () without them."""
    if why_missing():
        return ()
    texts = [
        _pinned(kueue_bundle(KUEUE_VERSION).url)[0],
        _pinned(clusterprofile_crd_bundle().url)[0],
    ]
    return tuple(
        d
        for text in texts
        for d in yaml.load_all(text or "", Loader=_LOADER)
        if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"
    )


def find_upstream_crds() -> tuple[CrdSchemas | None, str]:
    """The CRDs and where they came from; (None, why) when there are none."""
    docs = real_crd_documents()
    if not docs:
        return None, why_missing()
    return CrdSchemas.from_documents(list(docs)), "the pinned release (or its Go module)"
