"""Every upstream manifest the fleet applies goes through the pinned path
(components/upstream/releases.py): fetched (release URL, else its Go module), checked
against its pinned SHA-256 where one is pinned, cached, and applied from that local copy,
never downloaded by the Kubernetes provider itself; a mismatch stops the program before
any resource is registered."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import pulumi
import pytest

from components.model.frameworks import FRAMEWORKS
from components.model.versions import (
    MPI_OPERATOR_URL,
    PINNED_SHA256,
    clusterprofile_crd_bundle,
)
from components.resources.fleet import verified_manifests
from components.upstream import gomodule
from components.upstream import releases as upstream
from tests.helpers import pulumi_harness
from tests.helpers.fleet_config import base, load
from tests.helpers.pulumi_harness import ROOT, engine_config, prepare_environment, run_program


def _spec_with(frameworks: list[str], **more: Any) -> Any:
    config = base()
    config["frameworks"] = frameworks
    config.update(more)
    spec, problems = load(config)
    assert not [p for p in problems if p.severity == "error"], problems
    return spec


def test_every_manifest_bundle_is_applied_from_its_verified_local_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []

    def fetcher(url: str) -> str:
        seen.append(url)
        return f"kind: ConfigMap\nmetadata: {{name: from-{len(seen)}}}\n"

    monkeypatch.setenv("MKF_UPSTREAM_CACHE", str(tmp_path))
    spec = _spec_with(
        ["batch", "jobset", "leaderworkerset", "mpi", "appwrapper"],
        credentials={"mode": "clusterProfile"},
    )
    files = verified_manifests(spec, fetcher)
    wanted = {
        b.url
        for key in ("jobset", "leaderworkerset", "mpi", "appwrapper")
        for b in FRAMEWORKS[key].bundles
    } | {clusterprofile_crd_bundle().url}
    assert set(files) == wanted
    for url, path in files.items():
        assert (
            Path(path).read_text()
            == f"kind: ConfigMap\nmetadata: {{name: from-{seen.index(url) + 1}}}\n"
        )
        assert not path.startswith("http")


def test_a_fetch_or_digest_failure_is_one_line_naming_the_bundle() -> None:
    def tampered(url: str) -> str:
        raise RuntimeError(f"download of {url} has SHA-256 abc, not the pinned def")

    spec = _spec_with(["batch", "mpi"])
    with pytest.raises(pulumi.RunError) as info:
        verified_manifests(spec, tampered)
    (line,) = str(info.value).splitlines()
    assert line.startswith("upstream ")
    assert "not the pinned" in line and "nothing was changed on any cluster" in line


class _Response(io.BytesIO):
    def __init__(self, body: bytes) -> None:
        super().__init__(body)
        self.headers: dict[str, str] = {}


def test_a_tampered_release_stops_the_program_before_any_resource(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The eks stack installs the MPI Operator, whose file is pinned: a download with other
    content, and no Go module to make the file from instead, stops `pulumi up` before a
    single resource (not even a cluster) is registered."""
    prepare_environment(tmp_path, monkeypatch)
    (tmp_path / "upstream" / upstream.cache_key(MPI_OPERATOR_URL)).unlink()
    body = b"kind: ConfigMap\nmetadata: {name: not-the-release}\n"
    assert hashlib.sha256(body).hexdigest() != PINNED_SHA256[MPI_OPERATOR_URL]
    monkeypatch.setattr(upstream.urllib.request, "urlopen", lambda *_a, **_k: _Response(body))
    monkeypatch.setattr(upstream.gomodule, "has_source", lambda _url: False)
    config, secret = engine_config(ROOT / "stacks" / "Pulumi.eks.yaml")
    monitors: list[pulumi_harness.Monitor] = []

    class Recording(pulumi_harness.Monitor):
        def __init__(self, mocks: pulumi_harness.Mocks) -> None:
            super().__init__(mocks)
            monitors.append(self)

    monkeypatch.setattr(pulumi_harness, "Monitor", Recording)
    with pytest.raises(Exception, match="not the pinned") as info:
        run_program("eks", config, secret)
    assert "mpi-operator" in str(info.value), info.value
    (monitor,) = monitors
    # The stack and the Fleet component itself, nothing inside it: no cluster, no object.
    assert [r.typ for r in monitor.registered.values() if r.custom] == []
    types = [r.typ for r in monitor.registered.values()]
    assert "multikueue-fleet:index:Fleet" in types
    assert set(types) <= {"pulumi:pulumi:Stack", "multikueue-fleet:index:Fleet"}, types
    assert not (tmp_path / "upstream" / upstream.cache_key(MPI_OPERATOR_URL)).exists()


def test_the_docs_say_which_artifacts_are_pinned() -> None:
    """docs/ci-fleets.md's table names, as pinned, exactly the artifacts with a pinned
    SHA-256 (of the file, or of the kustomization's source tree), and as unpinned every
    other bundle the fleet can apply."""
    text = (ROOT / "docs" / "ci-fleets.md").read_text()
    table = text.split("<!-- supply-chain table")[1].split("\n\n")[0]
    rows = [r for r in table.splitlines() if r.startswith("| ") and "---" not in r][1:]
    pinned_rows = [r for r in rows if "its pinned" in r and "SHA-256" in r]
    unpinned_rows = [r for r in rows if "no pinned digest" in r]
    assert len(pinned_rows) + len(unpinned_rows) == len(rows)
    # Today every one is pinned.
    assert unpinned_rows == []
    names = {
        "jobset": "JobSet",
        "leaderworkerset": "LeaderWorkerSet",
        "appwrapper": "AppWrapper",
        "mpi-operator": "MPI Operator",
        "kubeflow-trainer": "Trainer",
        "kubeflow-trainer-runtimes": "Trainer",
        "training-operator": "training operator",
        "kuberay": "KubeRay",
    }
    for bundle in [b for f in FRAMEWORKS.values() for b in f.bundles]:
        pinned = bundle.url in PINNED_SHA256 or bool(bundle.source_sha256)
        said = pinned_rows if pinned else unpinned_rows
        assert any(names[bundle.name] in r for r in said), (bundle.name, pinned)
    assert "ClusterProfile CRD" in " ".join(pinned_rows)


# --- kustomize bundles: their source tree from the Go module of the tag -----------------

KUSTOMIZE_BUNDLES = [b for f in FRAMEWORKS.values() for b in f.bundles if b.method == "kustomize"]


def test_every_kustomize_bundle_has_a_pinned_module_source() -> None:
    for bundle in KUSTOMIZE_BUNDLES:
        assert len(bundle.source_sha256) == 64, bundle.name
        source = gomodule.KUSTOMIZATIONS[bundle.name]
        assert source.version == bundle.version, bundle.name
        # The URL names the same kustomization inside the same tag.
        assert f"{source.entry}?ref={bundle.version}" in bundle.url, bundle.name
