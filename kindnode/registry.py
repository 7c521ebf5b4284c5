"""A registry mirror on this Docker for kind nodes: what a user behind a firewall points
their nodes' containerd at (kind's "local registry" pattern, site/content/docs/user/
local-registry.md at v0.33.0), here serving the images this tier builds under the
repositories of their upstream names.

The registry is distribution v3 (the `registry` binary toolchain.py builds from
github.com/distribution/distribution/v3), as a container named CONTAINER with its storage in
the Docker volume VOLUME, kept between runs; it answers the host on 127.0.0.1:HOST_PORT (for
`docker push`) and the kind nodes at http://CONTAINER:5000 once the fleet joins it to the
`kind` network (components/resources/clusters.py does, for each mirror it is given).
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request

from kindnode import docker, images

CONTAINER = "mkf-registry"
VOLUME = "mkf-registry-data"
HOST_PORT = 5001
IMAGE = "registry:3.1.2"  # published name; kept here as its stand-in (images.stand_in)
ENDPOINT = f"http://{CONTAINER}:5000"
# The upstream registries whose images the fleet's objects name; the mirror holds them all.
MIRRORED_REGISTRIES = ("registry.k8s.io", "docker.io", images.KUEUE_E2E_REGISTRY)
CONFIG = """version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: /var/lib/registry
http:
  addr: :5000
"""


def registry_image() -> images.Image:
    return images.Image(
        IMAGE,
        f"FROM {images.DEBIAN}\nCOPY registry /usr/local/bin/registry\nCOPY config.yml "
        "/etc/distribution/config.yml\nRUN chmod 0755 /usr/local/bin/registry\n"
        'ENTRYPOINT ["registry"]\nCMD ["serve", "/etc/distribution/config.yml"]',
        (("registry", "registry"),),
        mirrored=False,
        extra={"config.yml": CONFIG},
    )


def _answers() -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{HOST_PORT}/v2/", timeout=2) as reply:
            return reply.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _container_image() -> str | None:
    """The image id the registry container runs; None when there is no such container."""
    state = subprocess.run(
        ["docker", "inspect", "--format", "{{.Image}}", CONTAINER],
        capture_output=True,
        text=True,
        check=False,
    )
    return state.stdout.strip() if state.returncode == 0 else None


def start(log=print) -> None:
    """The registry container, started (or restarted after a reboot) unless it answers; made
    again, its volume kept, when it runs another image than the one built (an earlier
    build's, or one kept under the published name)."""
    image = registry_image().local
    existing = _container_image()
    networks: list[str] = []
    if (
        existing is not None
        and existing != docker.docker("image", "inspect", "--format", "{{.Id}}", image).strip()
    ):
        # The networks it was joined to (a running fleet's `kind`), joined again below.
        joined = docker.docker(
            "inspect", "--format", "{{json .NetworkSettings.Networks}}", CONTAINER
        )
        networks = [n for n in json.loads(joined or "{}") if n != "bridge"]
        docker.docker("rm", "-f", CONTAINER)
        existing = None
    if existing is not None and _answers():
        return
    if existing is not None:
        docker.docker("start", CONTAINER)
    else:
        docker.docker(
            "run", "-d", "--restart=always", "--name", CONTAINER,
            "-v", f"{VOLUME}:/var/lib/registry",
            "-p", f"127.0.0.1:{HOST_PORT}:5000", image,
        )  # fmt: skip
        for network in networks:
            docker.docker("network", "connect", network, CONTAINER)
    deadline = time.monotonic() + 30
    while not _answers():
        if time.monotonic() > deadline:
            raise docker.HostError(
                f"the registry mirror {CONTAINER} does not answer on 127.0.0.1:{HOST_PORT}; "
                f"see `docker logs {CONTAINER}`"
            )
        time.sleep(0.5)
    log(f"  registry mirror {CONTAINER} on 127.0.0.1:{HOST_PORT} ({ENDPOINT} on the kind network)")


def repository(name: str) -> str:
    """The path an image has in the mirror: its name less the registry, as containerd asks
    a mirror for it (docker.io's official images under library/)."""
    path, _, tag = name.rpartition(":")
    first = path.split("/", 1)[0]
    if "." in first or ":" in first:
        path = path.split("/", 1)[1]
    elif "/" not in path:
        path = f"library/{path}"
    return f"{path}:{tag}"


def mirror_name(published: str) -> str:
    """The name this host's Docker pushes PUBLISHED's stand-in to the mirror under."""
    return f"127.0.0.1:{HOST_PORT}/{repository(published)}"


def push(image: images.Image) -> None:
    """The stand-in, served by the mirror under the repository of its published name."""
    push_as(image.local, image.name)


def push_as(local: str, published: str) -> str:
    """LOCAL pushed to the mirror under PUBLISHED's repository; its digest there. The name
    the push needs is taken off this host's Docker again: the image stays as LOCAL."""
    remote = mirror_name(published)
    docker.docker("tag", local, remote)
    try:
        docker.docker("push", remote)
        digest = docker.docker("image", "inspect", "--format", "{{index .RepoDigests 0}}", remote)
    finally:
        subprocess.run(["docker", "rmi", remote], capture_output=True, check=False)
    return digest.strip().split("@", 1)[1]
