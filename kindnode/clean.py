"""`python -m kindnode clean`: what `kindnode build` left on this host's Docker, removed:
the registry mirror's container and volume, and every image it built (each by its name and
the name the mirror serves it under), and nothing else.

Builds before the stand-ins had names of the project's own kept them under the published
names (debian:bookworm-slim, busybox:1.36, registry.k8s.io/...). `release_published_names`
takes those names back off this host's Docker wherever the label proves a build put them
there, so that they mean the published images again; `kindnode build` runs it after each
build, and `clean` removes them as well.

An image counts as built here only by its name and the stand-in label `build` gives it: a
label alone is not enough, since images built FROM a stand-in inherit it (a user's own
`FROM python:3.11-slim-bookworm` included), and a name alone is not either (the user may
have the published image of that name). The Debian base (`docker import` of debootstrap)
carries the label since this command exists; an older unlabelled one is named, not removed.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable

from kindnode import docker, images, nodeimage, registry
from kindnode.host import HostError

# Docker's label on every kind node container (kind v0.33.0 pkg/cluster/internal/providers/
# docker/constants.go, clusterLabelKey).
KIND_CLUSTER_LABEL = "io.x-k8s.kind.cluster"


def built_names() -> list[str]:
    """Every image name `kindnode build` writes, with the mirror's name for the pushed ones:
    each under the project's own names (localhost/multikueue-fleet/, the mirror's port)."""
    names = [
        images.DEBIAN,
        nodeimage.BASE_IMAGE,
        nodeimage.NODE_IMAGE_LOCAL,
        *(i.local for i in images.images()),
        registry.registry_image().local,
    ]
    mirrored = [
        registry.mirror_name(name)
        for name in (*(i.name for i in images.images() if i.mirrored), nodeimage.NODE_IMAGE)
    ]
    return list(dict.fromkeys([*names, *mirrored]))


def published_names() -> list[str]:
    """The published names earlier builds kept their stand-ins under."""
    names = [
        "debian:bookworm-slim",
        "kindest/base:mkf-v0.33.0",
        nodeimage.NODE_IMAGE,
        *(i.name for i in images.images() if i.local != i.name),
        registry.IMAGE,
    ]
    return list(dict.fromkeys(names))


def release_published_names(log: Callable[[str], object] = print) -> None:
    """Each published name a build put on this host's Docker, taken off it (the image stays
    under the project's name while it has one); a name whose image the label does not prove
    a build's is the user's, left alone."""
    for name in published_names():
        if docker.image_label(name, docker.STAND_IN_LABEL) is None:
            continue
        removed = _quiet("rmi", name)
        if removed.returncode == 0:
            log(f"  gave back {name}: an earlier build kept its stand-in under that name")
        else:
            last = (removed.stderr.strip().splitlines() or ["?"])[-1]
            log(f"  kept {name}, an earlier build's stand-in: {last}")


def _quiet(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=False)


def clean(log: Callable[[str], object] = print) -> list[str]:
    """Removes what the build left; returns the names left alone because they are not
    provably the build's. Refused while a kind cluster runs (its nodes pull through the
    mirror): bring it down first."""
    clusters = _quiet("ps", "-a", "--filter", f"label={KIND_CLUSTER_LABEL}", "--format",
                      f'{{{{index .Labels "{KIND_CLUSTER_LABEL}"}}}}')  # fmt: skip
    running = sorted(set(clusters.stdout.split()))
    if running:
        raise HostError(
            f"kind clusters {', '.join(running)} still run and pull through the registry "
            "mirror: bring them down first (scripts/down.sh STACK, mkf down, or kind delete "
            "cluster --name NAME), then run this again"
        )
    if _quiet("container", "inspect", registry.CONTAINER).returncode == 0:
        docker.docker("rm", "-f", "-v", registry.CONTAINER)
        log(f"  removed container {registry.CONTAINER}")
    if _quiet("volume", "inspect", registry.VOLUME).returncode == 0:
        docker.docker("volume", "rm", registry.VOLUME)
        log(f"  removed volume {registry.VOLUME}")
    release_published_names(log)
    kept = []
    for name in built_names():
        if not docker.image_exists(name):
            continue
        if not docker.image_label(name, docker.STAND_IN_LABEL):
            kept.append(name)
            continue
        # The name only: the image goes with its last name, and an image a user built FROM
        # it keeps its layers.
        removed = _quiet("rmi", name)
        if removed.returncode == 0:
            log(f"  removed image {name}")
        else:
            kept.append(name)
            log(f"  kept image {name}: {(removed.stderr.strip().splitlines() or ['?'])[-1]}")
    for name in kept:
        log(f"  left alone {name}: not labelled as built here (remove it yourself if it is)")
    return kept
