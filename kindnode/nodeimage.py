"""kind's node image, made the way kind v0.33.0 makes it, from parts built here.

- The Debian base: `debootstrap --variant=minbase bookworm` imported as the stand-in for
  debian:bookworm-slim (images.DEBIAN, under the project's name; kind v0.33.0's base is
  trixie-slim, bookworm is what this machine's Debian mirror and debootstrap were measured
  with).
- kind's base image: images/base/Dockerfile of the sigs.k8s.io/kind v0.33.0 module, with its
  files/ from that module, its package list, and containerd, runc, crictl and the CNI
  plugins at the versions its ARGs pin, built by toolchain.py (KIND_TIER_TOOLS).
- The node image: pkg/build/nodeimage/buildcontext.go (buildImage,
  prePullImagesAndWriteManifests) at v0.33.0: kubeadm, kubelet and kubectl in /usr/bin,
  /kind/version, the default CNI manifest, Kubernetes' images imported into the node's
  containerd with kind's own `ctr images import` flags, then `docker commit` with kind's
  entrypoint. Kept under the project's name for kindest/node:<version> (the tag kind's
  release lists for 1.36); the mirror serves it under kindest/node, and a stack names it by
  the digest the mirror gives it. The images inside its containerd carry their published
  names, as kind's do: kubeadm and the kubelet ask for those.

Where kind's node image runs kindnetd (its module is not on the Go module proxy), this one's
/kind/manifests/default-cni.yaml, which kind applies at create, runs the mkf-node-network
DaemonSet (files/default-cni.yaml, files/mkf-node-network; its image is preloaded as
kindnetd's is): on each node it writes the CNI config for the node's podCIDR (ptp +
host-local + portmap, masquerading what leaves the pod network, as kindnetd's config does)
and routes every other node's podCIDR to that node's InternalIP, the pod network kindnetd
gives a multi-node kind cluster.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

from components.upstream import toolchain
from kindnode import docker, host, images
from kindnode.host import HostError

KIND_MODULE = "sigs.k8s.io/kind"
NODE_IMAGE = f"kindest/node:{images.KUBERNETES_VERSION}"  # the published name
NODE_IMAGE_LOCAL = images.stand_in(NODE_IMAGE)
# Built from kind's recipe with this host's changes (below), so the project's own image.
BASE_IMAGE = f"{images.OWNED}kind-base:v0.33.0"
DEBIAN_ROOTFS = host.STATE / "rootfs-bookworm"
EARLIER_DEBIAN = "debian:bookworm-slim"  # where builds before images.DEBIAN imported it
# kind v0.33.0 images/base/Dockerfile, the packages of its one clean-install, less
# fuse-overlayfs (rootless nodes only; its snapshotter is not built here).
BASE_PACKAGES = (
    "systemd conntrack iptables nftables iproute2 ethtool util-linux mount kmod "
    "libseccomp2 pigz nfs-common open-iscsi e2fsprogs bash ca-certificates curl jq procps"
)
FILES = Path(__file__).resolve().parent / "files"


def default_cni_manifest() -> str:
    return (FILES / "default-cni.yaml").read_text().replace("IMAGE", images.NODE_NETWORK_IMAGE)


def kind_files() -> Path:
    source = toolchain.module_source(
        toolchain.go_binary(),
        KIND_MODULE,
        toolchain.module_versions(toolchain.KIND_TOOLS_DIR / "kind")[KIND_MODULE],
        toolchain.KIND_TOOLS_DIR / "kind",
    )
    return source / "images" / "base" / "files"


def debian_base(log=print) -> None:
    """The stand-in for debian:bookworm-slim from debootstrap, unless Docker has it."""
    if docker.image_exists(images.DEBIAN):
        return
    # An earlier build imported it under the published name: the same image, adopted (its
    # name there is given back at the end of the build, clean.release_published_names).
    if docker.image_label(EARLIER_DEBIAN, docker.STAND_IN_LABEL) == "debootstrap":
        docker.docker("tag", EARLIER_DEBIAN, images.DEBIAN)
        return
    if not (DEBIAN_ROOTFS / "bin" / "sh").exists():
        log("  debootstrap --variant=minbase bookworm (Debian's packages)")
        result = subprocess.run(
            ["debootstrap", "--variant=minbase", "bookworm", str(DEBIAN_ROOTFS)],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise HostError(
                "debootstrap failed: "
                + (result.stderr.strip().splitlines() or ["no output"])[-1]
                + "; install it (apt-get install debootstrap) and check the Debian mirror"
            )
    tar = subprocess.Popen(["tar", "-C", str(DEBIAN_ROOTFS), "-c", "."], stdout=subprocess.PIPE)
    assert tar.stdout is not None
    result = subprocess.run(
        # Labelled as every image built here, for `kindnode clean` to know it.
        [
            "docker",
            "import",
            "--change",
            'CMD ["bash"]',
            "--change",
            f"LABEL {docker.STAND_IN_LABEL}=debootstrap",
            "-",
            images.DEBIAN,
        ],
        stdin=tar.stdout,
        capture_output=True,
        check=False,
    )
    tar.wait()
    if result.returncode != 0:
        raise HostError(f"docker import of the Debian base failed: {result.stderr.decode()[-200:]}")
    # The root filesystem has device files (dev/zero, dev/urandom): left in the checkout, a
    # copy of it (a test's project copy) would read them without end.
    shutil.rmtree(DEBIAN_ROOTFS, ignore_errors=True)
    log(f"  imported {images.DEBIAN} (debootstrap bookworm minbase)")


def _base_dockerfile(restrict_oom: bool) -> str:
    # The legacy builder has no COPY --chmod: modes are set in a RUN instead.
    oom = (
        # This host's bounding set lacks CAP_SYS_RESOURCE, so nothing may lower
        # oom_score_adj and every pod sandbox fails ("failed to update
        # /proc/self/oom_score_adj"); kind sets the same for rootless nodes.
        "RUN sed -i 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' "
        "/etc/containerd/config.toml\n"
        if restrict_oom
        else ""
    )
    return f"""FROM {images.DEBIAN}
COPY files/ /
RUN chmod 0755 /kind /kind/bin /kind/bin/* /usr/local/bin/* \\
    && DEBIAN_FRONTEND=noninteractive clean-install {BASE_PACKAGES} \\
    && find /lib/systemd/system/sysinit.target.wants/ -name "systemd-tmpfiles-setup.service" -delete \\
    && rm -f /lib/systemd/system/multi-user.target.wants/* \\
    && rm -f /etc/systemd/system/*.wants/* \\
    && rm -f /lib/systemd/system/local-fs.target.wants/* \\
    && rm -f /lib/systemd/system/sockets.target.wants/*udev* \\
    && rm -f /lib/systemd/system/sockets.target.wants/*initctl* \\
    && rm -f /lib/systemd/system/basic.target.wants/* \\
    && echo "ReadKMsg=no" >> /etc/systemd/journald.conf \\
    && ln -s /usr/lib/systemd/systemd /sbin/init
RUN systemctl enable kubelet.service && systemctl enable containerd.service \\
    && systemctl enable undo-mount-hacks.service && systemctl mask systemd-binfmt.service \\
    && mkdir -p /etc/kubernetes/manifests /opt/cni/bin
COPY bin/ /usr/local/bin/
COPY cni/ /opt/cni/bin/
RUN mv /usr/local/bin/runc /usr/local/sbin/runc \\
    && chmod 0755 /usr/local/bin/* /usr/local/sbin/runc /opt/cni/bin/* \\
    && ctr oci spec \\
       | jq '.hooks.createContainer[.hooks.createContainer| length] |= . + {{"path": "/kind/bin/mount-product-files.sh"}}' \\
       | jq 'del(.process.rlimits)' > /etc/containerd/cri-base.json \\
    && containerd --version && runc --version
{oom}ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]"""  # noqa: E501


BASE_BINARIES = ("containerd", "ctr", "containerd-shim-runc-v2", "runc", "crictl")
CNI = ("host-local", "loopback", "ptp", "portmap")


def kind_base(log=print) -> None:
    restrict_oom = host.lacks_sys_resource()
    dockerfile = _base_dockerfile(restrict_oom)
    digest = hashlib.sha256(dockerfile.encode())
    for tool in (*BASE_BINARIES, *(f"cni-{c}" for c in CNI)):
        digest.update((toolchain.BIN_DIR / f".{tool}.built").read_bytes())
    recipe = digest.hexdigest()[:16]
    if docker.image_label(BASE_IMAGE, docker.STAND_IN_LABEL) == recipe:
        return
    with docker.build_context() as context:
        subprocess.run(["cp", "-r", str(kind_files()), str(context / "files")], check=True)
        subprocess.run(["chmod", "-R", "u+w", str(context / "files")], check=True)
        (context / "bin").mkdir()
        (context / "cni").mkdir()
        for tool in BASE_BINARIES:
            subprocess.run(["cp", str(toolchain.BIN_DIR / tool), str(context / "bin")], check=True)
        for plugin in CNI:
            subprocess.run(
                ["cp", str(toolchain.BIN_DIR / f"cni-{plugin}"), str(context / "cni" / plugin)],
                check=True,
            )
        docker.build(BASE_IMAGE, dockerfile, context, recipe)
    log(f"  built {BASE_IMAGE} (kind v0.33.0 images/base)")


def node_image(preloaded: list[images.Image], log=print) -> None:
    """kind's buildImage: a container of the base image, the binaries copied in, the images
    imported into its containerd, committed."""
    digest = hashlib.sha256(
        docker.docker("image", "inspect", "--format", "{{.Id}}", BASE_IMAGE).encode()
    )
    for tool in ("kubeadm", "kubelet", "kubectl"):
        digest.update((toolchain.BIN_DIR / f".{tool}.built").read_bytes())
    for image in preloaded:
        digest.update(image.name.encode() + image.recipe().encode())
    digest.update(default_cni_manifest().encode())
    recipe = digest.hexdigest()[:16]
    if docker.image_label(NODE_IMAGE_LOCAL, docker.STAND_IN_LABEL) == recipe:
        return
    container = f"mkf-node-build-{recipe}"
    subprocess.run(["docker", "rm", "-f", container], capture_output=True, check=False)
    docker.docker(
        "run", "-d", "--entrypoint=sleep", f"--name={container}",
        "--security-opt", "seccomp=unconfined", BASE_IMAGE, "infinity",
    )  # fmt: skip
    try:
        for tool in ("kubeadm", "kubelet", "kubectl"):
            docker.docker("cp", str(toolchain.BIN_DIR / tool), f"{container}:/usr/bin/{tool}")
        docker.docker(
            "exec", "-i", container, "bash", "-c",
            "mkdir -p /kind/manifests && cat > /kind/manifests/default-cni.yaml && "
            f"echo -n {images.KUBERNETES_VERSION} > /kind/version && chmod +x /usr/bin/kube*",
            stdin=default_cni_manifest().encode(),
        )  # fmt: skip
        docker.docker("exec", container, "bash", "-c", "nohup containerd > /dev/null 2>&1 &")
        docker.docker(
            "exec", container, "bash", "-c",
            "for i in 0 1 2 3 4 5; do [ -S /run/containerd/containerd.sock ] && break; "
            "sleep 1; done; ctr info > /dev/null",
        )  # fmt: skip
        for image in preloaded:
            archive = subprocess.run(
                ["docker", "save", image.local], capture_output=True, check=False
            )
            if archive.returncode != 0:
                raise HostError(
                    f"docker save {image.local} failed: {archive.stderr.decode()[-200:]}"
                )
            ctr = ("exec", container, "ctr", "--namespace=k8s.io", "images")
            docker.docker(
                "exec", "-i", *ctr[1:], "import", "--label=io.cri-containerd.pinned=pinned",
                "--all-platforms", "--no-unpack", "--digests", "-",
                stdin=archive.stdout,
            )  # fmt: skip
            if image.local != image.name:
                # Inside the node under the published name kubeadm and the kubelet ask for,
                # pinned as kind's import pins (the label set again: without --local the tag
                # goes through the transfer API, containerd v2.3.4 cmd/ctr/commands/images/tag.go).
                docker.docker(*ctr, "tag", "--force", image.local, image.name)
                docker.docker(*ctr, "label", image.name, "io.cri-containerd.pinned=pinned")
                docker.docker(*ctr, "rm", image.local)
        docker.docker("exec", container, "pkill", "containerd")
        docker.docker(
            "commit",
            "--change", 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]',
            "--change", f"LABEL {docker.STAND_IN_LABEL}={recipe}",
            container, NODE_IMAGE_LOCAL,
        )  # fmt: skip
    finally:
        subprocess.run(["docker", "rm", "-f", "-v", container], capture_output=True, check=False)
    log(f"  built {NODE_IMAGE_LOCAL} (stand-in for {NODE_IMAGE}, kind's pkg/build/nodeimage)")
