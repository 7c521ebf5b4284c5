"""Where tests find Kueue's real CRDs: the project's download cache first (where a deploy
puts the pinned release manifest), then `../shared/upstream` beside the checkout. A test
that needs them skips, saying so, when neither has them."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from components.checks.crd_schema import CrdSchemas, load_upstream_crds
from components.model.versions import KUEUE_VERSION, clusterprofile_crd_bundle, kueue_bundle
from components.upstream.releases import DEFAULT_CACHE, cache_key

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
ROOT = Path(__file__).resolve().parent.parent
SHARED_UPSTREAM = ROOT.parent / "shared" / "upstream"
SHARED_KUEUE_MANIFEST = SHARED_UPSTREAM / f"kueue-{KUEUE_VERSION}" / "manifests.yaml"


def _real(text: str) -> bool:
    """A release with schemas, not the synthetic stand-in the mock-engine tests put in the
    cache (tests/pulumi_harness.py, prepare_environment, which also points
    MKF_UPSTREAM_CACHE at it for the rest of the session)."""
    return "openAPIV3Schema" in text


def _cached(url: str) -> list[dict] | None:
    cache = Path(os.environ.get("MKF_UPSTREAM_CACHE") or DEFAULT_CACHE)
    path = cache / cache_key(url)
    if not path.is_file() or not _real(text := path.read_text()):
        return None
    return [d for d in yaml.load_all(text, Loader=_LOADER) if isinstance(d, dict)]


def find_upstream_crds() -> tuple[CrdSchemas | None, str]:
    """The CRDs and where they came from; (None, why) when there are none."""
    kueue = _cached(kueue_bundle(KUEUE_VERSION).url)
    if kueue:
        schemas = CrdSchemas.from_documents(kueue)
        profiles = _cached(clusterprofile_crd_bundle().url)
        shared = load_upstream_crds(SHARED_UPSTREAM / "cluster-inventory-api")
        if profiles:
            schemas = schemas.merged(CrdSchemas.from_documents(profiles))
        elif shared:
            schemas = schemas.merged(shared)
        if schemas.kinds():
            return schemas, "the download cache"
    shared_all = load_upstream_crds(SHARED_UPSTREAM)
    if shared_all:
        return shared_all, str(SHARED_UPSTREAM)
    return None, (
        f"Kueue {KUEUE_VERSION}'s CRDs are neither in the download cache nor in {SHARED_UPSTREAM}"
    )


def real_kueue_manifest() -> str | None:
    """Kueue's whole pinned install manifest text, or None."""
    docs_url = kueue_bundle(KUEUE_VERSION).url
    cache = Path(os.environ.get("MKF_UPSTREAM_CACHE") or DEFAULT_CACHE)
    cached = cache / cache_key(docs_url)
    for path in (cached, SHARED_KUEUE_MANIFEST):
        if path.is_file() and _real(text := path.read_text()):
            return text
    return None
