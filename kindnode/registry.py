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

import subprocess
import time
import urllib.error
import urllib.request

from kindnode import docker, images

CONTAINER = "mkf-registry"
VOLUME = "mkf-registry-data"
HOST_PORT = 5001
IMAGE = "registry:3.1.2"
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


def start(log=print) -> None:
    """The registry container, started (or restarted after a reboot) unless it answers."""
    if _answers():
        return
    state = subprocess.run(
        ["docker", "inspect", "--format", "{{.State.Running}}", CONTAINER],
        capture_output=True,
        text=True,
        check=False,
    )
    if state.returncode == 0:
        docker.docker("start", CONTAINER)
    else:
        docker.docker(
            "run", "-d", "--restart=always", "--name", CONTAINER,
            "-v", f"{VOLUME}:/var/lib/registry",
            "-p", f"127.0.0.1:{HOST_PORT}:5000", IMAGE,
        )  # fmt: skip
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


def push(image: images.Image) -> None:
    local = f"127.0.0.1:{HOST_PORT}/{repository(image.name)}"
    docker.docker("tag", image.name, local)
    docker.docker("push", local)
