"""Pinned upstream data from the Go module of the same tag, for when the release URL cannot be
reached (a machine that reaches only a Go module proxy, as CI here does).

Two checks make it the same data as the release: Go verifies the module against
tools/go.sum (its h1 hash) as it downloads it, and the result must have the SHA-256 pinned
in components/model/versions.py for the release artifact.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.model.frameworks import FRAMEWORKS
from components.model.versions import (
    CLUSTER_INVENTORY_API_VERSION,
    KUEUE_VERSION,
    MPI_OPERATOR_URL,
    MPI_OPERATOR_VERSION,
    PINNED_SHA256,
    Bundle,
    clusterprofile_crd_bundle,
    kueue_bundle,
)
from components.objects.manifests import LOADER
from components.upstream import toolchain


class ModuleSourceError(Exception):
    """A one-line reason the module source could not give the artifact."""


@dataclass(frozen=True)
class ModuleArtifact:
    module: str
    version: str
    make: Callable[[Path], str]  # the module's directory -> the artifact's text


def module_dir(module: str, version: str, within: Path = toolchain.TOOLS_MODULE) -> Path:
    """The module's files, downloaded through the Go module proxy into Go's module cache and
    checked against the go.sum of the module `within` (tools/ by default), run there for
    that reason."""
    result = subprocess.run(
        [toolchain.go_binary(), "mod", "download", "-json", f"{module}@{version}"],
        cwd=within,
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        info = json.loads(result.stdout or "{}")
    except json.JSONDecodeError:
        info = {}
    if result.returncode != 0 or not info.get("Dir"):
        reason = info.get("Error") or result.stderr.strip().splitlines()[-1:] or ["no output"]
        raise ModuleSourceError(f"go mod download {module}@{version} failed: {reason}")
    return Path(info["Dir"])


def release_build(manager_dir: str, image: str) -> Callable[[Path], str]:
    """A release manifest as a kubebuilder project's `make artifacts` makes it:
    `kustomize edit set image controller=<image>` in `manager_dir`, then `kustomize build
    config/default` (Kueue's Makefile at v0.19.2, prepare-manifests and artifacts; JobSet's
    at v0.12.0 and LWS's at v0.9.0, artifacts; AppWrapper's at v1.2.2, build-installer).
    The module cache is read-only, so on a copy; the kustomize is the pinned one."""

    def make(module: Path) -> str:
        kustomize = toolchain.build(["kustomize"], log=lambda _line: None)["kustomize"]
        with tempfile.TemporaryDirectory(prefix="release-config-") as tmp:
            config = Path(tmp) / "config"
            shutil.copytree(module / "config", config)
            for path in config.rglob("*"):
                path.chmod(0o755 if path.is_dir() else 0o644)
            for args, cwd in (
                (["edit", "set", "image", f"controller={image}"], Path(tmp) / manager_dir),
                (["build", str(config / "default")], Path(tmp)),
            ):
                result = subprocess.run(
                    [str(kustomize), *args], cwd=cwd, capture_output=True, text=True, check=False
                )
                if result.returncode != 0:
                    raise ModuleSourceError(
                        f"kustomize {args[0]} failed on {module.name}'s config: "
                        + " | ".join(result.stderr.strip().splitlines()[-3:])
                    )
            return result.stdout

    return make


kueue_manifest = release_build(
    "config/components/manager", f"registry.k8s.io/kueue/kueue:{KUEUE_VERSION}"
)


def clusterprofile_crd(module: Path) -> str:
    return (
        module / "config" / "crd" / "bases" / "multicluster.x-k8s.io_clusterprofiles.yaml"
    ).read_text()


def mpi_operator_manifest(module: Path) -> str:
    """The release's install file is checked in at the tag (deploy/v2beta1)."""
    return (module / "deploy" / "v2beta1" / "mpi-operator.yaml").read_text()


def _framework_release(name: str, module: str, manager_dir: str, image: str) -> ModuleArtifact:
    (bundle,) = FRAMEWORKS[name].bundles
    return ModuleArtifact(module, bundle.version, release_build(manager_dir, image))


# Release manifests built by kustomize at release time: made the same way from the module.
_RELEASE_BUILDS = {
    FRAMEWORKS["jobset"].bundles[0].url: _framework_release(
        "jobset",
        "sigs.k8s.io/jobset",
        "config/components/manager",
        f"registry.k8s.io/jobset/jobset:{FRAMEWORKS['jobset'].bundles[0].version}",
    ),
    FRAMEWORKS["leaderworkerset"].bundles[0].url: _framework_release(
        "leaderworkerset",
        "sigs.k8s.io/lws",
        "config/manager",
        f"registry.k8s.io/lws/lws:{FRAMEWORKS['leaderworkerset'].bundles[0].version}",
    ),
    FRAMEWORKS["appwrapper"].bundles[0].url: _framework_release(
        "appwrapper",
        "github.com/project-codeflare/appwrapper",
        "config/manager",
        f"quay.io/ibm/appwrapper:{FRAMEWORKS['appwrapper'].bundles[0].version}",
    ),
}

SOURCES: dict[str, ModuleArtifact] = {
    **_RELEASE_BUILDS,
    MPI_OPERATOR_URL: ModuleArtifact(
        "github.com/kubeflow/mpi-operator", MPI_OPERATOR_VERSION, mpi_operator_manifest
    ),
    kueue_bundle(KUEUE_VERSION).url: ModuleArtifact(
        "sigs.k8s.io/kueue", KUEUE_VERSION, kueue_manifest
    ),
    clusterprofile_crd_bundle().url: ModuleArtifact(
        "sigs.k8s.io/cluster-inventory-api", CLUSTER_INVENTORY_API_VERSION, clusterprofile_crd
    ),
}


def has_source(url: str) -> bool:
    return url in SOURCES


def artifact_text(url: str) -> str:
    """The artifact published at `url`, made from its Go module and checked by its pinned
    SHA-256; ModuleSourceError (or toolchain.ToolchainError without Go) otherwise."""
    artifact = SOURCES.get(url)
    if artifact is None:
        raise ModuleSourceError(f"no Go module source is known for {url}")
    text = artifact.make(module_dir(artifact.module, artifact.version))
    digest = hashlib.sha256(text.encode()).hexdigest()
    if digest != PINNED_SHA256[url]:
        raise ModuleSourceError(
            f"{url} made from {artifact.module}@{artifact.version} has SHA-256 {digest}, "
            f"not the pinned {PINNED_SHA256[url]}: the module or the build changed"
        )
    return text


# The Go module of each framework's controller, at the version the project installs (the
# same versions Kueue v0.19.2's go.mod requires, so tools/go.sum already pins them).
FRAMEWORK_MODULES = {
    "jobset": "sigs.k8s.io/jobset",
    "leaderworkerset": "sigs.k8s.io/lws",
    "mpi": "github.com/kubeflow/mpi-operator",
    "training-operator": "github.com/kubeflow/training-operator",
    "trainer": "github.com/kubeflow/trainer/v2",
    "kuberay": "github.com/ray-project/kuberay/ray-operator",
    "appwrapper": "github.com/project-codeflare/appwrapper",
}


def framework_crds(key: str) -> list[dict[str, Any]]:
    """A copy of `_framework_crds(key)`: callers may change what they get."""
    return copy.deepcopy(list(_framework_crds(key)))


@functools.cache
def _framework_crds(key: str) -> tuple[dict[str, Any], ...]:
    """The CRDs of a framework's API groups, read from its Go module at the pinned version: what
    a cluster needs for Kueue to watch those kinds (MultiKueue makes a worker inactive when
    one is missing), without the controller. A CRD can stand in several files of a module
    (kustomize bases, Helm charts); the first parseable one is taken, bases first."""
    if key not in FRAMEWORK_MODULES or not FRAMEWORKS[key].bundles:
        return ()
    framework = FRAMEWORKS[key]
    # Every kind of the framework's API groups, not only those Kueue manages: Kueue's trainjob
    # integration indexes TrainingRuntimes as it starts and exits without their CRD
    # (pkg/controller/jobs/trainjob at v0.19.2).
    groups = {r.group for r in framework.resources}
    folder = module_dir(FRAMEWORK_MODULES[key], framework.bundles[0].version)
    found: dict[str, dict[str, Any]] = {}
    paths = sorted(folder.rglob("*.yaml"), key=lambda p: ("bases" not in p.parts, len(p.parts)))
    for path in paths:
        text = path.read_text(errors="replace")
        if "kind: CustomResourceDefinition" not in text or "{{" in text:
            continue
        try:
            docs = list(yaml.load_all(text, Loader=LOADER))
        except yaml.YAMLError:
            continue
        for doc in docs:
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc.get("spec") or {}
            if spec.get("group") in groups and doc["metadata"]["name"] not in found:
                found[doc["metadata"]["name"]] = doc
    return tuple(found.values())


@dataclass(frozen=True)
class KustomizationSource:
    """Where a kustomize bundle's remote kustomization lives in the Go module of its tag:
    `folder` (a directory of the module, copied whole with everything it refers to) and
    `entry` (the kustomization inside it that the bundle's URL names). `drop` lists lines
    taken out of a file of the copy after its digest was checked, each (file, line): the
    edits the upstream file itself asks for when a part is installed another way."""

    module: str
    version: str
    folder: str
    entry: str
    drop: tuple[tuple[str, str], ...] = ()


KUSTOMIZATIONS: dict[str, KustomizationSource] = {
    "kubeflow-trainer": KustomizationSource(
        "github.com/kubeflow/trainer/v2",
        "v2.2.1",
        "manifests",
        "overlays/manager",
        # "Comment this line if JobSet is installed on the Kubernetes cluster": the `jobset`
        # framework installs JobSet (the line pulls JobSet v0.11.0's release from GitHub).
        (("overlays/manager/kustomization.yaml", "  - ../../third-party/jobset"),),
    ),
    "kubeflow-trainer-runtimes": KustomizationSource(
        "github.com/kubeflow/trainer/v2", "v2.2.1", "manifests", "overlays/runtimes"
    ),
    "training-operator": KustomizationSource(
        "github.com/kubeflow/training-operator", "v1.9.3", "manifests", "overlays/standalone"
    ),
    "kuberay": KustomizationSource(
        "github.com/ray-project/kuberay/ray-operator", "v1.6.2", "config", "default"
    ),
}


def tree_sha256(root: Path) -> str:
    """One SHA-256 of a directory tree: every file's path (relative, '/'-separated, sorted)
    and the SHA-256 of its bytes."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        content = hashlib.sha256(path.read_bytes()).hexdigest()
        digest.update(f"{path.relative_to(root).as_posix()}\0{content}\n".encode())
    return digest.hexdigest()


def _drop_line(file: Path, line: str, bundle: str) -> None:
    """Takes out the line that is `line` once its trailing comment is ignored."""
    lines = file.read_text().splitlines(keepends=True)
    kept = [x for x in lines if x.split(" #", 1)[0].rstrip() != line]
    if len(kept) == len(lines):
        raise ModuleSourceError(f"{bundle}: the line {line!r} is not in {file.name}")
    file.write_text("".join(kept))


def kustomization_source(bundle: Bundle, into: Path) -> Path:
    """The bundle's kustomization, copied from the Go module of its tag (checked by
    tools/go.sum) into `into`, its tree checked against `bundle.source_sha256`; the path of
    the kustomization to build. ModuleSourceError on a mismatch or an unknown bundle."""
    source = KUSTOMIZATIONS.get(bundle.name)
    if source is None or not bundle.source_sha256:
        raise ModuleSourceError(f"no pinned Go module source is known for {bundle.url}")
    if source.version != bundle.version:
        raise ModuleSourceError(
            f"{bundle.name} is {bundle.version} but its module source is {source.version}"
        )
    # The copy is checked against the pin on every use, not only when made: a cached tree
    # is only as trustworthy as the folder it sits in. One that differs (edited, or cut
    # short) is made again from the module, which is checked in turn.
    copy = into / f"{bundle.name}-{bundle.source_sha256[:16]}"
    if copy.is_dir() and tree_sha256(copy) != bundle.source_sha256:
        shutil.rmtree(copy)
    if not copy.is_dir():
        folder = module_dir(source.module, source.version) / source.folder
        got = tree_sha256(folder)
        if got != bundle.source_sha256:
            raise ModuleSourceError(
                f"{source.module}@{source.version}/{source.folder} has tree SHA-256 {got}, "
                f"not the pinned {bundle.source_sha256}: the module changed; do not deploy it"
            )
        _copy_whole(folder, copy)
    if not source.drop:
        return copy / source.entry
    # The lines the bundle drops come out of a copy of the checked tree, made anew each
    # time (a few small files), so what kustomize builds is always the pinned tree less
    # exactly those lines.
    edited = into / f"{bundle.name}-{bundle.source_sha256[:16]}-edited"
    staged = Path(tempfile.mkdtemp(dir=into, prefix=f".{bundle.name}-edited-"))
    try:
        shutil.copytree(copy, staged / "tree")
        for name, line in source.drop:
            _drop_line(staged / "tree" / name, line, bundle.name)
        shutil.rmtree(edited, ignore_errors=True)
        (staged / "tree").rename(edited)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    return edited / source.entry


def _copy_whole(folder: Path, copy: Path) -> None:
    """`folder` copied to `copy` whole or not at all (copied aside, then renamed)."""
    temp = Path(tempfile.mkdtemp(dir=copy.parent, prefix=f".{copy.name}-"))
    try:
        shutil.copytree(folder, temp / "tree")
        for path in (temp / "tree").rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        (temp / "tree").rename(copy)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
