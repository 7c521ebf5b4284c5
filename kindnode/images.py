"""The images a kind fleet runs, built here from the binaries toolchain.py builds from the
pinned Go modules and from Debian's packages, for the names the published images have.

Each is a stand-in for the published image: the same program from the same source at the
same version, on a Debian bookworm base instead of the publisher's (distroless or scratch),
labelled STAND_IN_LABEL. It is kept in this host's Docker under a name the project owns,
`localhost/multikueue-fleet/stand-in/<registry>/<path>:<tag>` (`stand_in()`), never under the
published name, so that a user's own `docker pull` or `FROM` of that name gets the published
image, not this one. The fleet asks for the published name: the registry mirror serves the
stand-in under that repository (registry.py), and the node image holds Kubernetes' own under
their published names inside its containerd (nodeimage.py), as a mirror and kind's node image
do. Names, versions and entrypoints follow the publishers':
- Kubernetes' images at the names `kubeadm config images list --kubernetes-version v1.36.4`
  prints (cmd/kubeadm/app/constants/constants.go at v1.36.4: etcd 3.6.8-0, CoreDNS v1.14.2,
  pause 3.10.2), and pause:3.10, the sandbox image kind v0.33.0's containerd config names
  (images/base/files/etc/containerd/config.toml); both pause tags hold the pause.c of the
  k8s.io/kubernetes v1.36.4 module (build/pause/linux/pause.c);
- Kueue, JobSet and LeaderWorkerSet: `ENTRYPOINT ["/manager"]`, user 65532 (their Dockerfiles
  at v0.19.2, v0.12.0, v0.9.0), at the registry.k8s.io names their release manifests use;
- the ClusterProfile secretreader plugin at /bin/secretreader-plugin (cluster-inventory-api
  hack/Dockerfile.plugin at v0.1.3), and KUEUE_E2E_SECRETREADER, the same plugin in an image
  with a shell, as Kueue's own e2e builds it for init containers (below);
- busybox:1.36 for the sample jobs: Debian's busybox-static (1.35 in bookworm; the jobs use
  only sh, echo and sleep);
- python:3.11-slim-bookworm, the base of controller/Dockerfile: Debian's python3.11 with a
  venv first on PATH and this machine's CA bundle (pip in `docker build` reaches PyPI through
  it). The dispatcher image builds FROM it through the Dockerfile's BASE build argument
  (the stack's dispatcher.baseImage, which `kindnode build --for-stack` sets for this host).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from components.model.versions import CLUSTER_INVENTORY_API_VERSION, KUEUE_VERSION
from components.upstream import toolchain
from kindnode import docker
from kindnode.host import HostError

# The project's own names: every image the kind tier builds is kept under one of them.
OWNED = "localhost/multikueue-fleet/"
STAND_INS = f"{OWNED}stand-in/"


def stand_in(published: str) -> str:
    """The name this host keeps the stand-in for PUBLISHED under: the published name in full
    (its registry, docker.io's official images under library/) below STAND_INS."""
    path, _, tag = published.rpartition(":")
    first = path.split("/", 1)[0]
    if "." not in first and ":" not in first and first != "localhost":
        path = f"docker.io/{path}" if "/" in path else f"docker.io/library/{path}"
    # A registry's port is no path component Docker's reference grammar allows.
    return f"{STAND_INS}{path.replace(':', '-')}:{tag}"


# debootstrap's bookworm, the base every image here is built FROM.
DEBIAN = stand_in("debian:bookworm-slim")
PYTHON = "python:3.11-slim-bookworm"
# This project's own image (not a stand-in): the pod network of the node image in kindnetd's
# place (kindnode/nodeimage.py), preloaded on every node as kindnetd's image is.
# Under localhost/: `docker save` drops a docker.io/ prefix, and `ctr images import` then
# names a short name import-<date>@<digest>, which no pod spec finds.
NODE_NETWORK_IMAGE = f"{OWNED}kind-node-network:v1"
KUBERNETES_VERSION = toolchain.module_versions()["k8s.io/kubernetes"]
K8S_REGISTRY = "registry.k8s.io"
# The plugin in an image with sh and cp, for pluginMount initContainer: Kueue's e2e builds it
# from hack/testing/secretreader/Dockerfile (alpine, USER 65534:65534, the binary at
# /bin/secretreader-plugin) and loads it into kind under this name (Makefile at v0.19.2:
# IMAGE_REGISTRY, CLUSTERPROFILE_PLUGIN_IMAGE_VERSION, kind-secretreader-plugin-image-build);
# it is never pushed. A user builds and names their own; the kind tier's test names this one.
KUEUE_E2E_REGISTRY = "us-central1-docker.pkg.dev"
KUEUE_E2E_SECRETREADER = f"{KUEUE_E2E_REGISTRY}/k8s-staging-images/kueue/secretreader-plugin:0.0.1"
ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Image:
    name: str  # the published name the fleet asks for (or the project's own)
    dockerfile: str
    binaries: tuple[tuple[str, str], ...] = ()  # (tool in .tools/bin, path in the context)
    # Served to the nodes by the registry mirror (the fleet's images), or preloaded in the
    # node image (Kubernetes' own, as kind's node image holds them).
    mirrored: bool = True
    extra: dict[str, str] = field(default_factory=dict)  # context file -> its text

    @property
    def local(self) -> str:
        """The name the image is built and kept under in this host's Docker."""
        return self.name if self.name.startswith(OWNED) else stand_in(self.name)

    def recipe(self) -> str:
        digest = hashlib.sha256(self.dockerfile.encode())
        for tool, _ in self.binaries:
            stamp = toolchain.BIN_DIR / f".{tool}.built"
            digest.update(stamp.read_bytes() if stamp.exists() else tool.encode())
        for name, text in sorted(self.extra.items()):
            digest.update(name.encode() + _extra_text(text).encode())
        return digest.hexdigest()[:16]


def _extra_text(text: str) -> str:
    """A context file's text: given inline, or "host" for this machine's CA bundle, or the
    path of a file of this project."""
    if text == "host":
        return Path("/etc/ssl/certs/ca-certificates.crt").read_text()
    if text.startswith("kindnode/files/"):
        return (ROOT / text).read_text()
    return text


def _static(binary: str, path: str, entrypoint: list[str], user: str = "") -> str:
    lines = [f"FROM {DEBIAN}", f"COPY {binary} {path}", f"RUN chmod 0755 {path}"]
    if user:
        lines.append(f"USER {user}")
    if entrypoint:
        lines.append("ENTRYPOINT [" + ", ".join(f'"{p}"' for p in entrypoint) + "]")
    return "\n".join(lines)


def _kube(name: str) -> Image:
    # kube-proxy programs iptables or nftables and conntrack (the published image is
    # distroless-iptables); the others need only their binary.
    tools = ""
    if name == "kube-proxy":
        tools = (
            "RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends "
            "iptables nftables conntrack ipset kmod && rm -rf /var/lib/apt/lists/*\n"
        )
    return Image(
        f"{K8S_REGISTRY}/{name}:{KUBERNETES_VERSION}",
        f"FROM {DEBIAN}\n{tools}COPY {name} /usr/local/bin/{name}\n"
        f"RUN chmod 0755 /usr/local/bin/{name}",
        ((name, name),),
        mirrored=False,
    )


def _controller(name: str, tool: str) -> Image:
    return Image(name, _static(tool, "/manager", ["/manager"], "65532:65532"), ((tool, tool),))


def images() -> list[Image]:
    pause = f'FROM {DEBIAN}\nCOPY pause /pause\nRUN chmod 0755 /pause\nENTRYPOINT ["/pause"]'
    lws = toolchain.module_versions()["sigs.k8s.io/lws"]
    jobset = toolchain.module_versions(toolchain.KIND_TOOLS_DIR / "jobset")["sigs.k8s.io/jobset"]
    return [
        *(_kube(n) for n in ("kube-apiserver", "kube-controller-manager", "kube-scheduler")),
        _kube("kube-proxy"),
        Image(
            f"{K8S_REGISTRY}/etcd:3.6.8-0",
            _static("etcd", "/usr/local/bin/etcd", []),
            (("etcd", "etcd"),),
            mirrored=False,
        ),
        Image(
            f"{K8S_REGISTRY}/coredns/coredns:v1.14.2",
            _static("coredns", "/coredns", ["/coredns"]),
            (("coredns", "coredns"),),
            mirrored=False,
        ),
        Image(f"{K8S_REGISTRY}/pause:3.10.2", pause, (("pause", "pause"),), mirrored=False),
        Image(f"{K8S_REGISTRY}/pause:3.10", pause, (("pause", "pause"),), mirrored=False),
        Image(
            NODE_NETWORK_IMAGE,
            f"FROM {DEBIAN}\nRUN apt-get update -qq && apt-get install -y -qq --no-install-"
            "recommends iproute2 && rm -rf /var/lib/apt/lists/*\nCOPY kubectl "
            "/usr/local/bin/kubectl\nCOPY mkf-node-network /usr/local/bin/mkf-node-network\n"
            "RUN chmod 0755 /usr/local/bin/*\n"
            'ENTRYPOINT ["/usr/local/bin/mkf-node-network"]',
            (("kubectl", "kubectl"),),
            mirrored=False,
            extra={"mkf-node-network": "kindnode/files/mkf-node-network"},
        ),
        _controller(f"{K8S_REGISTRY}/kueue/kueue:{KUEUE_VERSION}", "kueue"),
        _controller(f"{K8S_REGISTRY}/jobset/jobset:{jobset}", "jobset"),
        _controller(f"{K8S_REGISTRY}/lws/lws:{lws}", "lws"),
        Image(
            f"{K8S_REGISTRY}/cluster-inventory-api/secretreader:{CLUSTER_INVENTORY_API_VERSION}",
            _static("secretreader-plugin", "/bin/secretreader-plugin", [], "65532:65532"),
            (("secretreader-plugin", "secretreader-plugin"),),
        ),
        Image(
            KUEUE_E2E_SECRETREADER,
            _static("secretreader-plugin", "/bin/secretreader-plugin", [], "65534:65534"),
            (("secretreader-plugin", "secretreader-plugin"),),
        ),
        Image(
            "busybox:1.36",
            f"FROM {DEBIAN}\nRUN apt-get update -qq && apt-get install -y -qq busybox-static "
            "&& rm -rf /var/lib/apt/lists/* && busybox --install -s /usr/local/bin\n"
            'CMD ["sh"]',
        ),
        Image(
            PYTHON,
            f"FROM {DEBIAN}\nRUN apt-get update -qq && apt-get install -y -qq --no-install-"
            "recommends python3.11 python3.11-venv ca-certificates && rm -rf /var/lib/apt/lists/*"
            " && python3.11 -m venv /usr/local/python\nCOPY ca-certificates.crt "
            "/etc/ssl/certs/ca-certificates.crt\nENV PATH=/usr/local/python/bin:$PATH\n"
            'CMD ["python3"]',
            (),
            mirrored=False,
            extra={"ca-certificates.crt": "host"},
        ),
    ]


def build_pause() -> Path:
    """pause from the k8s.io/kubernetes module's build/pause/linux/pause.c, as its Makefile
    builds it (static, -Os, the version string defined)."""
    target = toolchain.BIN_DIR / "pause"
    source = (
        toolchain.module_source(
            toolchain.go_binary(), "k8s.io/kubernetes", KUBERNETES_VERSION, toolchain.TOOLS_MODULE
        )
        / "build"
        / "pause"
        / "linux"
        / "pause.c"
    )
    stamp = toolchain.BIN_DIR / ".pause.built"
    fingerprint = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    if target.exists() and stamp.exists() and stamp.read_text() == fingerprint:
        return target
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise HostError("no C compiler for pause.c: install gcc (apt-get install gcc)")
    result = subprocess.run(
        [cc, "-Os", "-Wall", "-Werror", "-static", '-DVERSION="v3.10.2"', "-o", str(target),
         str(source)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise HostError(f"building pause failed: {result.stderr.strip()[-300:]}")
    stamp.write_text(fingerprint)
    return target


def build_image(image: Image, log=print) -> bool:
    """Builds the image unless one with the same recipe is there; True when it built."""
    recipe = image.recipe()
    if docker.image_label(image.local, docker.STAND_IN_LABEL) == recipe:
        return False
    with docker.build_context() as context:
        for tool, inside in image.binaries:
            shutil.copyfile(toolchain.BIN_DIR / tool, context / inside)
        for name, text in image.extra.items():
            (context / name).write_text(_extra_text(text))
        docker.build(image.local, image.dockerfile, context, recipe)
    stands_for = "" if image.local == image.name else f" (the stand-in for {image.name})"
    log(f"  built {image.local}{stands_for}")
    return True
