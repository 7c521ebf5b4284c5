"""The docker commands the kind tier's builds run, with one-line errors."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kindnode.host import HostError

# Docker 20.10 (Debian bookworm's docker.io) has no BuildKit: the Dockerfiles here use only
# what the legacy builder knows (no COPY --chmod, no RUN --mount).
LEGACY_BUILDER = {"DOCKER_BUILDKIT": "0"}
# Marks every image this tier makes: a stand-in, built here, for the published image it is
# named after (the same sources at the same versions).
STAND_IN_LABEL = "io.multikueue-fleet.stand-in"


def docker(*args: str, stdin: bytes | None = None, timeout: float = 1800) -> str:
    result = subprocess.run(
        ["docker", *args],
        input=stdin,
        capture_output=True,
        check=False,
        timeout=timeout,
        env={**os.environ, **LEGACY_BUILDER},
    )
    if result.returncode != 0:
        tail = result.stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise HostError(f"docker {' '.join(args[:2])} failed: {' | '.join(tail) or 'no output'}")
    return result.stdout.decode(errors="replace")


def image_exists(name: str) -> bool:
    return (
        subprocess.run(
            ["docker", "image", "inspect", name], capture_output=True, check=False
        ).returncode
        == 0
    )


def image_label(name: str, label: str) -> str | None:
    if not image_exists(name):
        return None
    value = docker("image", "inspect", "--format", f'{{{{index .Config.Labels "{label}"}}}}', name)
    return value.strip() or None


@contextmanager
def build_context() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="mkf-image-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def build(name: str, dockerfile: str, context: Path, recipe: str) -> None:
    """docker build, labelled with the recipe's hash (to skip an unchanged image next time)
    and as a stand-in."""
    (context / "Dockerfile").write_text(f"{dockerfile}\nLABEL {STAND_IN_LABEL}={recipe}\n")
    docker("build", "--network", "host", "-t", name, str(context))
