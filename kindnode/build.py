"""`python -m kindnode build`: every binary and image a kind fleet needs on a machine without an
image registry, each step skipped when its inputs are unchanged, with the time each took.

Writes MANIFEST (.cache/kind-tier/images.json): the node image pinned by the digest the
mirror gives it, and the registry mirrors a stack's kind settings name (see
docs/loopback-fleet.md, "The kind tier").
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from components.upstream import toolchain
from kindnode import clean, host, images, nodeimage, registry

MANIFEST = host.STATE / "images.json"
KIND_TIER_BINARIES = (
    *toolchain.CONTROL_PLANE,
    *toolchain.NODE_KUBERNETES,
    "lws",
    *(t.name for t in toolchain.KIND_TIER_TOOLS),
)


def _timed(rows: list[tuple[str, float]], name: str, step: Callable[[], object]) -> None:
    started = time.monotonic()
    step()
    rows.append((name, time.monotonic() - started))


def node_image_reference() -> str:
    """The node image as the mirror serves it, pinned by its digest."""
    digest = registry.push_as(nodeimage.NODE_IMAGE_LOCAL, nodeimage.NODE_IMAGE)
    return f"{registry.mirror_name(nodeimage.NODE_IMAGE)}@{digest}"


def build_all(log: Callable[[str], object] = print) -> dict[str, Any]:
    rows: list[tuple[str, float]] = []
    if not host.docker_answers():
        raise host.HostError(
            "no Docker engine answers: start one, or run `python -m kindnode host --prepare`"
        )
    _timed(rows, "Go binaries", lambda: toolchain.build(list(KIND_TIER_BINARIES), log=log))
    _timed(rows, "pause (gcc)", images.build_pause)
    _timed(rows, "Debian base", lambda: nodeimage.debian_base(log))
    wanted = [*images.images(), registry.registry_image()]
    for image in wanted:
        _timed(rows, f"image {image.name}", lambda image=image: images.build_image(image, log))
    _timed(rows, "kind base image", lambda: nodeimage.kind_base(log))
    # What kind's node image holds: Kubernetes' images and the pod network's.
    preloaded = [i for i in images.images() if not i.mirrored and i.name != images.PYTHON]
    _timed(rows, "node image", lambda: nodeimage.node_image(preloaded, log))
    _timed(rows, "registry mirror", lambda: registry.start(log))
    mirrored = [i for i in wanted if i.mirrored]
    _timed(rows, "push to the mirror", lambda: [registry.push(i) for i in mirrored])
    reference: list[str] = []
    _timed(rows, "node image by digest", lambda: reference.append(node_image_reference()))
    # Last, once nothing here runs from them: the published names earlier builds used.
    _timed(rows, "published names given back", lambda: clean.release_published_names(log))
    manifest = {
        "nodeImage": reference[0],
        "registryMirrors": {r: registry.ENDPOINT for r in registry.MIRRORED_REGISTRIES},
        "images": [i.name for i in mirrored],
        # What controller/Dockerfile builds FROM here (its BASE build argument).
        "dispatcherBase": images.stand_in(images.PYTHON),
    }
    MANIFEST.parent.mkdir(parents=True, exist_ok=True)
    MANIFEST.write_text(json.dumps(manifest, indent=2) + "\n")
    width = max(len(name) for name, _ in rows)
    log(f"\n  {'step':<{width}} seconds")
    for name, seconds in rows:
        log(f"  {name:<{width}} {seconds:7.1f}")
    log(f"  {'total':<{width}} {sum(s for _, s in rows):7.1f}")
    log(f"node image: {manifest['nodeImage']}\nwritten: {MANIFEST}")
    return manifest


def read_manifest(path: Path = MANIFEST) -> dict[str, object] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
