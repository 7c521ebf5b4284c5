"""`python -m kindnode build` writes only names the project owns to the host's Docker (#36):
each stand-in is built under localhost/multikueue-fleet/stand-in/<published name>, built FROM
the Debian stand-in, and pushed to the mirror under its published repository through a name
that is taken off the host again. A fake docker records every call."""

from __future__ import annotations

from pathlib import Path

import pytest

from kindnode import images, registry
from tests.helpers.fake_docker import install_fake_docker

FAKE = r"""#!/usr/bin/env bash
echo "docker $*" >> "$FAKE_LOG"
case "$1 $2" in
  "image inspect")
    [ "$4" = "{{index .RepoDigests 0}}" ] || exit 1
    echo "x@sha256:$(printf 'c%.0s' {1..64})" ;;
  "build --network") cp "${@: -1}/Dockerfile" "$FAKE_DOCKERFILE" ;;
esac
exit 0
"""


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    calls = install_fake_docker(tmp_path, monkeypatch, FAKE)
    monkeypatch.setenv("FAKE_DOCKERFILE", str(tmp_path / "Dockerfile"))
    return calls


def _written(calls: list[str]) -> list[str]:
    """Every name a call gives an image on the host's Docker."""
    names = []
    for call in calls:
        words = call.split()
        if words[1] == "build":
            names.append(words[words.index("-t") + 1])
        elif words[1] in ("tag", "commit", "import"):
            names.append(words[-1])
    return names


def test_a_stand_in_is_built_and_pushed_under_the_projects_names(log: Path) -> None:
    (busybox,) = [i for i in images.images() if i.name == "busybox:1.36"]
    assert images.build_image(busybox, log=lambda _line: None)
    registry.push(busybox)
    calls = log.read_text().splitlines()
    own = images.stand_in("busybox:1.36")
    assert own == "localhost/multikueue-fleet/stand-in/docker.io/library/busybox:1.36"
    mirror = f"127.0.0.1:{registry.HOST_PORT}/library/busybox:1.36"
    assert _written(calls) == [own, mirror]
    # FROM the Debian stand-in, not the published debian:bookworm-slim.
    dockerfile = (log.parent / "Dockerfile").read_text()
    assert dockerfile.startswith(f"FROM {images.DEBIAN}\n")
    assert images.DEBIAN.startswith(images.OWNED)
    # The mirror's name only for the push: taken off again, the image stays as `own`.
    assert calls[-1] == f"docker rmi {mirror}"
    assert f"docker push {mirror}" in calls


def test_every_image_is_kept_under_a_project_name() -> None:
    for image in [*images.images(), registry.registry_image()]:
        assert image.local.startswith(images.OWNED), image.name
        assert f"FROM {images.DEBIAN}" in image.dockerfile, image.name
