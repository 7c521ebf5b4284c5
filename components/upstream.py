"""Upstream release manifests: fetched at deploy time from their pinned URL (never stored
in this repository), cached locally, and for Kueue edited before they are applied: our
Configuration in its ConfigMap, feature-gate flags, the ClusterProfile access-provider
plugin mounted into the controller, or a custom image. The edits are pure functions."""

from __future__ import annotations

import copy
import hashlib
import os
import tempfile
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

from components import gomodule, toolchain
from components.crd_schema import CrdSchemas
from components.fleet_objects import build_fleet, object_key
from components.kueue_config import (
    CONFIG_KEY,
    CONFIG_MAP,
    config_map,
    feature_gate_args,
    init_container_plugin_image,
    kueue_pod_annotations,
)
from components.problems import Problem
from components.spec import ClusterSpec, FleetSpec
from components.versions import (
    IMAGE_VOLUME_MIN_KUBERNETES,
    PINNED_SHA256,
    Bundle,
    clusterprofile_crd_bundle,
    kueue_bundle,
)

DEFAULT_CACHE = Path(__file__).resolve().parent.parent / ".cache" / "upstream"
KUEUE_DEPLOYMENT = "kueue-controller-manager"
KUEUE_CONTAINER = "manager"
PLUGIN_VOLUME = "access-provider-plugins"
PLUGIN_ROOT = "/plugins"

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
    SHA-256 beside it; a cached file that does not match it is fetched again."""
    cache = cache_dir or _cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    cached = cache / cache_key(url)
    digest = cached.with_suffix(".sha256")
    if cached.exists():
        text = cached.read_text()
        if digest.exists():
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


# libyaml's loader when PyYAML was built with it: Kueue's manifest (its CRDs) takes the pure
# Python loader about ten times as long.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def kustomization_without(bundle: Bundle) -> dict[str, Any]:
    """A kustomization of the bundle's remote one that deletes the objects named by
    `bundle.without` (a strategic-merge `$patch: delete` per name pattern)."""
    patches = [
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
    return {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [bundle.url],
        "patches": patches,
    }


def kustomize_directory(bundle: Bundle) -> str:
    """Where to point a kustomize install: the remote URL itself, or (with `without`) a
    local kustomization in the cache that wraps it."""
    if not bundle.without:
        return bundle.url
    text = yaml.safe_dump(kustomization_without(bundle), sort_keys=False)
    folder = _cache_dir() / "kustomize" / hashlib.sha256(text.encode()).hexdigest()[:16]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kustomization.yaml").write_text(text)
    return str(folder)


def whole_manifest_problem(text: str, expect_kinds: Iterable[str] = ()) -> str | None:
    """Why `text` is not a whole Kubernetes manifest, or None."""
    try:
        kinds = {d.get("kind") for d in yaml.load_all(text, Loader=_LOADER) if isinstance(d, dict)}
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


def documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.load_all(text, Loader=_LOADER) if isinstance(d, dict) and d.get("kind")]


def plugin_mount(spec: FleetSpec, cluster: ClusterSpec) -> str | None:
    """How the access-provider plugin reaches kueue-controller-manager, or None."""
    if cluster.role != "manager" or spec.credentials.mode != "clusterProfile":
        return None
    mode = spec.credentials.cluster_profile.plugin_mount
    if mode != "auto":
        return mode
    major, _, minor = (cluster.kubernetes_version or "0.0").partition(".")
    return (
        "imageVolume"
        if (int(major), int(minor)) >= IMAGE_VOLUME_MIN_KUBERNETES
        else "initContainer"
    )


def _edit_manager(deployment: dict[str, Any], spec: FleetSpec, cluster: ClusterSpec) -> None:
    template = deployment["spec"]["template"]
    annotations = template.setdefault("metadata", {}).setdefault("annotations", {})
    annotations.update(kueue_pod_annotations(spec, cluster))
    pod = template["spec"]
    container = next(c for c in pod["containers"] if c["name"] == KUEUE_CONTAINER)
    args = [a for a in container.get("args") or [] if not a.startswith("--feature-gates=")]
    container["args"] = args + feature_gate_args(spec, cluster)
    cp = spec.credentials.cluster_profile
    mode = plugin_mount(spec, cluster)
    if mode is None:
        return
    if mode == "customImage":
        container["image"] = cp.kueue_image
        return
    mount = {"name": PLUGIN_VOLUME, "mountPath": PLUGIN_ROOT, "readOnly": True}
    container["volumeMounts"] = [*(container.get("volumeMounts") or []), mount]
    volumes = pod.setdefault("volumes", [])
    if mode == "imageVolume":
        volumes.append(
            {
                "name": PLUGIN_VOLUME,
                "image": {"reference": cp.plugin_image, "pullPolicy": "IfNotPresent"},
            }
        )
        return
    # initContainer: copy the plugin out of its image into a shared emptyDir. The image must
    # have `sh` and `cp` (kueue_config.plugin_image_problems); the binary sits at plugin_path
    # with the /plugins prefix removed.
    source = cp.plugin_path.removeprefix(PLUGIN_ROOT) or cp.plugin_path
    target = str(Path(cp.plugin_path).parent)
    volumes.append({"name": PLUGIN_VOLUME, "emptyDir": {}})
    pod.setdefault("initContainers", []).append(
        {
            "name": "access-provider-plugin",
            "image": init_container_plugin_image(spec),
            "command": ["sh", "-c", f"mkdir -p {target} && cp {source} {target}/"],
            "volumeMounts": [{"name": PLUGIN_VOLUME, "mountPath": PLUGIN_ROOT}],
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
            },
        }
    )


def kueue_objects(text: str, spec: FleetSpec, cluster: ClusterSpec) -> list[dict[str, Any]]:
    """Kueue's release manifests with this cluster's configuration applied."""
    objects = [copy.deepcopy(d) for d in documents(text)]
    ours = config_map(spec, cluster)
    found = set()
    for obj in objects:
        meta = obj.get("metadata") or {}
        if obj["kind"] == "ConfigMap" and meta.get("name") == CONFIG_MAP:
            obj["data"] = {CONFIG_KEY: ours["data"][CONFIG_KEY]}
            found.add("config")
        elif obj["kind"] == "Deployment" and meta.get("name") == KUEUE_DEPLOYMENT:
            _edit_manager(obj, spec, cluster)
            found.add("deployment")
    names = {"config": f"{CONFIG_MAP} ConfigMap", "deployment": f"{KUEUE_DEPLOYMENT} Deployment"}
    missing = [names[k] for k in sorted(names) if k not in found]
    if missing:
        raise RuntimeError(
            f"the Kueue {spec.kueue.version} manifests have no {' and no '.join(missing)}; "
            "the fleet's configuration is applied by editing them, so this release's layout "
            "is not one this version of multikueue-fleet knows"
        )
    return objects


def cached_crds(spec: FleetSpec) -> CrdSchemas | None:
    """The pinned Kueue release's CRDs (and the ClusterProfile CRD) from the download cache,
    or None when no deploy has cached the Kueue release yet: offline, nothing is fetched."""
    text = cached(kueue_bundle(spec.kueue.version).url)
    if text is None:
        return None
    docs = documents(text)
    profiles = cached(clusterprofile_crd_bundle().url)
    if profiles is not None:
        docs += documents(profiles)
    return CrdSchemas.from_documents(docs)


def schema_problems(spec: FleetSpec, schemas: CrdSchemas | None) -> list[Problem]:
    """Every object the fleet writes for a kind `schemas` (or the fleet's own CRDs) knows,
    checked as the API server would: OpenAPI v3 value rules, CEL rules, and fields the
    server would silently drop. A CEL rule the checker cannot evaluate is a warning."""
    if schemas is None:
        return []
    problems = []
    for cluster in build_fleet(spec):
        own = CrdSchemas.from_documents(
            o for o in cluster.objects if o["kind"] == "CustomResourceDefinition"
        )
        known = schemas.merged(own)
        for obj in cluster.objects:
            if not known.knows(obj["apiVersion"], obj["kind"]):
                continue
            where = f"{cluster.directory}: {object_key(obj)}"
            for text in known.problems(obj):
                unchecked = text.startswith("unchecked rule")
                problems.append(
                    Problem(
                        where,
                        text,
                        ""
                        if unchecked
                        else "the API server would refuse this object: "
                        "report it as a multikueue-fleet bug",
                        "warning" if unchecked else "error",
                    )
                )
            for path in known.pruned_paths(obj):
                problems.append(
                    Problem(
                        where,
                        f"{path}: not in the {obj['kind']} schema, the server would drop it",
                        "report it as a multikueue-fleet bug",
                    )
                )
    return problems
