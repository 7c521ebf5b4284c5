"""The supply chain made from Go modules: each pinned artifact with a module source made from the
module of its tag has the pinned digest, and each kustomization's tree is checked and builds
offline."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.model.frameworks import FRAMEWORKS
from components.model.versions import (
    MPI_OPERATOR_URL,
    PINNED_SHA256,
    clusterprofile_crd_bundle,
)
from components.upstream import gomodule, toolchain
from components.upstream import releases as upstream


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


KUSTOMIZE_BUNDLES = [b for f in FRAMEWORKS.values() for b in f.bundles if b.method == "kustomize"]


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
