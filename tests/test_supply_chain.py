"""Every upstream manifest the fleet applies goes through the pinned path
(components/upstream/releases.py): fetched (release URL, else its Go module), checked
against its pinned SHA-256 where one is pinned, cached, and applied from that local copy,
never downloaded by the Kubernetes provider itself; a mismatch stops the program before
any resource is registered."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from components.model.frameworks import FRAMEWORKS
from components.model.versions import (
    MPI_OPERATOR_URL,
    PINNED_SHA256,
    clusterprofile_crd_bundle,
)
from components.resources.fleet import verified_manifests
from components.upstream import gomodule, toolchain
from components.upstream import releases as upstream
from tests import pulumi_harness
from tests.conftest import base, load
from tests.pulumi_harness import ROOT, engine_config, prepare_environment, run_program


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


def test_a_release_made_of_a_checked_in_file_is_pinned_and_made_from_its_module() -> None:
    """The MPI Operator's install file and the ClusterProfile CRD are files at their tags:
    their digests are pinned, and the Go module of the tag gives the same bytes."""
    assert gomodule.has_source(MPI_OPERATOR_URL) and MPI_OPERATOR_URL in PINNED_SHA256
    assert gomodule.has_source(clusterprofile_crd_bundle().url)
    if not shutil.which("go"):
        pytest.skip("needs Go and the Go module proxy to make the file from its module")
    text = gomodule.artifact_text(MPI_OPERATOR_URL)  # raises when the digest differs
    assert hashlib.sha256(text.encode()).hexdigest() == PINNED_SHA256[MPI_OPERATOR_URL]
    assert "mpioperator/mpi-operator:0.8.2" in text


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


def _needs_go() -> None:
    if not shutil.which("go"):
        pytest.skip("needs Go and the Go module proxy for the module source")


def test_a_kustomization_whose_source_tree_differs_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _needs_go()
    monkeypatch.setenv("MKF_UPSTREAM_CACHE", str(tmp_path))
    (kuberay,) = FRAMEWORKS["kuberay"].bundles
    with pytest.raises(RuntimeError, match=r"has tree SHA-256 .*not the pinned 0000") as info:
        upstream.verified_kustomization(replace(kuberay, source_sha256="0" * 64))
    assert "\n" not in str(info.value)
    assert not list((tmp_path / "kustomize-src").iterdir())  # nothing kept


def test_a_cached_kustomization_copy_that_differs_is_made_again_from_the_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy in the cache is checked against the pin on every use, not only when made:
    an edited copy is replaced by the module's checked tree. Trainer's overlay, whose
    JobSet line the fleet drops, is built from a copy of the checked tree less that line."""
    _needs_go()
    monkeypatch.setenv("MKF_UPSTREAM_CACHE", str(tmp_path))
    (kuberay,) = FRAMEWORKS["kuberay"].bundles
    entry = Path(upstream.verified_kustomization(kuberay))
    pristine = tmp_path / "kustomize-src" / f"kuberay-{kuberay.source_sha256[:16]}"
    assert gomodule.tree_sha256(pristine) == kuberay.source_sha256
    (pristine / "default" / "kustomization.yaml").write_text("resources: [evil.yaml]\n")
    (pristine / "default" / "evil.yaml").write_text("kind: Namespace\nmetadata: {name: e}\n")
    assert Path(upstream.verified_kustomization(kuberay)) == entry
    assert gomodule.tree_sha256(pristine) == kuberay.source_sha256
    trainer = next(b for b in FRAMEWORKS["trainer"].bundles if b.name == "kubeflow-trainer")
    upstream.verified_kustomization(trainer)
    copy = tmp_path / "kustomize-src" / f"kubeflow-trainer-{trainer.source_sha256[:16]}"
    assert gomodule.tree_sha256(copy) == trainer.source_sha256  # the checked tree, whole
    overlay = Path("overlays") / "manager" / "kustomization.yaml"
    assert "third-party/jobset" in (copy / overlay).read_text()
    edited = copy.with_name(f"{copy.name}-edited") / overlay
    assert "third-party/jobset" not in edited.read_text()
    assert edited.read_text() == "".join(
        x for x in (copy / overlay).read_text().splitlines(keepends=True) if "jobset" not in x
    )


def _kustomize() -> list[str]:
    built = Path(os.environ.get("MKF_TOOLS_BIN", str(toolchain.BIN_DIR))) / "kustomize"
    if built.exists():
        return [str(built), "build"]
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize"]
    pytest.skip("neither kustomize (MKF_TOOLS_BIN or .tools/bin) nor kubectl is installed")
    raise AssertionError("unreachable")


def test_the_verified_kustomizations_build_offline_as_the_fleet_wants(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From the module copies alone (no GitHub): Trainer without the JobSet its overlay
    would pull from a GitHub release, the training operator without mpijobs."""
    _needs_go()
    kustomize = _kustomize()
    monkeypatch.setenv("MKF_UPSTREAM_CACHE", str(tmp_path))
    built: dict[str, list[dict[str, Any]]] = {}
    for bundle in KUSTOMIZE_BUNDLES:
        folder = upstream.verified_kustomization(bundle)
        result = subprocess.run(
            [*kustomize, folder], capture_output=True, text=True, check=False, timeout=300
        )
        assert result.returncode == 0, (bundle.name, result.stderr[-1000:])
        built[bundle.name] = [d for d in yaml.safe_load_all(result.stdout) if d]
    names = {k: {o["metadata"]["name"] for o in v} for k, v in built.items()}
    assert "trainjobs.trainer.kubeflow.org" in names["kubeflow-trainer"]
    assert not [n for n in names["kubeflow-trainer"] if n.startswith("jobset")]
    assert "pytorchjobs.kubeflow.org" in names["training-operator"]
    assert "mpijobs.kubeflow.org" not in names["training-operator"]
    assert "rayjobs.ray.io" in names["kuberay"]
    kinds = {o["kind"] for o in built["kubeflow-trainer-runtimes"]}
    assert kinds == {"ClusterTrainingRuntime"}


@pytest.mark.parametrize("url", sorted(gomodule.SOURCES))
def test_every_module_source_makes_its_pinned_bytes(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each artifact with a module source, made from the Go module of its tag, has its
    pinned SHA-256 (artifact_text refuses it otherwise): for Kueue that is the release's
    own digest, which shows the recipe reproduces a kustomize-built release."""
    _needs_go()
    assert url in PINNED_SHA256
    kustomize = Path(os.environ.get("MKF_TOOLS_BIN", str(toolchain.BIN_DIR))) / "kustomize"
    if not kustomize.exists():
        pytest.skip("needs the pinned kustomize (MKF_TOOLS_BIN or .tools/bin)")
    monkeypatch.setattr(gomodule.toolchain, "build", lambda *_a, **_k: {"kustomize": kustomize})
    text = gomodule.artifact_text(url)
    assert hashlib.sha256(text.encode()).hexdigest() == PINNED_SHA256[url]
    assert upstream.whole_manifest_problem(text) is None
