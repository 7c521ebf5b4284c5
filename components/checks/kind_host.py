"""The machine a kind fleet runs on, read without changing anything: the pre-flight of a kind
stack (scripts/up.sh, `mkf up` and `mkf run` run it before any cluster is created), and
what `python -m kindnode host --prepare` changes where a host lacks it:
- a Docker engine where none answers: Debian's docker.io, started as a process of ours;
- a Docker runtime without CAP_SYS_RESOURCE where the host's capability bounding set lacks
  it (a Firecracker VM here): `docker run --privileged`, which kind uses for every node,
  asks runc for every capability and fails with "unable to apply caps";
- the cgroup v1 controllers systemd inside a kind node expects mounted (hugetlb, perf_event,
  net_cls,net_prio), where the host left them unmounted: kubelet then fails on
  `/sys/fs/cgroup/hugetlb/kubelet.slice`;
- inotify limits kind's known-issues page asks for with several clusters.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the host checks run before any dependency is installed (.ci/run)
    from components.model.spec import FleetSpec

# Kernel capability number (include/uapi/linux/capability.h).
CAP_SYS_RESOURCE = 24
# kind's known issues ("Pod errors due to too many open files", site/content/docs/user/
# known-issues.md at v0.33.0): fs.inotify.max_user_watches = 524288 and
# max_user_instances = 512.
INOTIFY_MIN = {"fs.inotify.max_user_watches": 524288, "fs.inotify.max_user_instances": 512}
# The v1 controllers a kind node's systemd mounts for kubelet's cgroups, with the names
# kernels also link them under.
CGROUP_V1_CONTROLLERS = {
    "hugetlb": (),
    "perf_event": (),
    "net_cls,net_prio": ("net_cls", "net_prio"),
}
RUNTIME_NAME = "runc-without-sys-resource"
# Per node, what an idle kind node measured here (shared/research/kind-offline.md: 535-700
# MiB), with room for the fleet's controllers. Disk: a node's /var volume measured 1.8 GB
# at creation and 3.2-4.6 GB running the fleet's images and pods (2026-12-01, the kind
# tier's fleets); an external CI run that began with 10 GiB free for 8 nodes failed.
NODE_MEMORY_BYTES = 1 << 30
NODE_DISK_BYTES = 4 << 30


class HostError(Exception):
    """One line: what the host lacks and how to fix it."""


@dataclass(frozen=True)
class Finding:
    name: str
    ok: bool
    detail: str  # what was found, and, when not ok, the fix
    # Worth saying, but no reason to stop: the host may well run the fleet as it is.
    warning: bool = False


def _docker(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, check=False, timeout=timeout
    )


def docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return _docker("info", "--format", "{{.ServerVersion}}").returncode == 0
    except subprocess.TimeoutExpired:
        return False


def docker_info() -> dict:
    result = _docker("info", "--format", "{{json .}}")
    if result.returncode != 0:
        raise HostError(
            "Docker is not running (docker info failed: "
            f"{(result.stderr.strip().splitlines() or ['no output'])[-1]}); start Docker, or "
            "run `python -m kindnode host --prepare` to start Debian's docker.io"
        )
    try:
        info = json.loads(result.stdout)
    except json.JSONDecodeError:
        info = None
    if not isinstance(info, dict):
        raise HostError(
            "docker info printed no JSON: is `docker` a Docker CLI? Put Docker's on PATH"
        )
    return info


def capability_bounding_set(status: Path = Path("/proc/self/status")) -> int:
    for line in status.read_text().splitlines():
        if line.startswith("CapBnd:"):
            return int(line.split()[1], 16)
    return ~0


def lacks_sys_resource(status: Path = Path("/proc/self/status")) -> bool:
    return not capability_bounding_set(status) >> CAP_SYS_RESOURCE & 1


def cgroup_v1(root: Path = Path("/sys/fs/cgroup")) -> bool:
    """True when the host's unified hierarchy is not at /sys/fs/cgroup (cgroup v1 or hybrid)."""
    return not (root / "cgroup.controllers").exists()


def missing_cgroup_controllers(
    root: Path = Path("/sys/fs/cgroup"), proc_cgroups: Path = Path("/proc/cgroups")
) -> list[str]:
    """The v1 controllers the kernel has enabled but the host left unmounted."""
    if not cgroup_v1(root):
        return []
    try:
        enabled = {
            line.split()[0]
            for line in proc_cgroups.read_text().splitlines()[1:]
            if line.split() and line.split()[-1] == "1"
        }
    except OSError:
        return []
    missing = []
    for mount, _links in CGROUP_V1_CONTROLLERS.items():
        if set(mount.split(",")) <= enabled and not (root / mount / "cgroup.procs").exists():
            missing.append(mount)
    return missing


def sysctl(name: str) -> int | None:
    try:
        return int(Path("/proc/sys", *name.split(".")).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def low_inotify() -> dict[str, int]:
    """Each inotify limit below what kind asks for, with its current value."""
    return {
        name: value
        for name, want in INOTIFY_MIN.items()
        if (value := sysctl(name)) is not None and value < want
    }


def docker_runtimes() -> tuple[str, list[str]]:
    info = docker_info()
    return info.get("DefaultRuntime", ""), sorted(info.get("Runtimes") or {})


def privileged_containers_run(image: str) -> str | None:
    """None when Docker starts a privileged container of `image`; else the engine's reason."""
    result = _docker("run", "--rm", "--privileged", "--entrypoint", "/bin/true", image, timeout=120)
    if result.returncode == 0:
        return None
    return (result.stderr.strip().splitlines() or ["no output"])[-1]


def checks(nodes: int, node_minor: tuple[int, int] | None = None) -> list[Finding]:
    """What a kind fleet of `nodes` node containers needs of this host, read without changing
    anything. Kubernetes 1.35+ kubelets refuse cgroup v1 unless told otherwise (KEP-5573,
    kubernetes/kubernetes#134298), so a v1 host is a finding for those node images."""
    findings = []
    if not docker_answers():
        findings.append(
            Finding(
                "docker",
                False,
                "no Docker engine answers (docker info); install and start Docker, or run "
                "`python -m kindnode host --prepare` (Debian's docker.io, as root)",
            )
        )
        return findings
    info = docker_info()
    findings.append(Finding("docker", True, f"Docker {info.get('ServerVersion', '?')}"))
    if lacks_sys_resource():
        default = info.get("DefaultRuntime", "")
        findings.append(
            Finding(
                "privileged containers",
                default == RUNTIME_NAME,
                f"this host's capability bounding set lacks CAP_SYS_RESOURCE, so runc cannot "
                f"start kind's privileged nodes; Docker's default runtime is {default!r}"
                + (
                    ""
                    if default == RUNTIME_NAME
                    else f", not {RUNTIME_NAME}: run `python -m kindnode host --prepare`"
                ),
            )
        )
    if str(info.get("CgroupVersion", "2")) == "1" and node_minor and node_minor >= (1, 35):
        findings.append(
            Finding(
                "cgroup v1",
                True,
                "Docker's host runs cgroup v1, which kubelet 1.35+ refuses by default: the "
                "fleet's kind clusters set kubelet's failCgroupV1: false (deprecated; move the "
                "host to cgroup v2 to drop it)",
            )
        )
    missing = missing_cgroup_controllers()
    findings.append(
        Finding(
            "cgroup controllers",
            not missing,
            "all mounted"
            if not missing
            else f"cgroup v1 controllers {', '.join(missing)} are enabled but not mounted, and "
            "kubelet in a kind node fails without them: run `python -m kindnode host --prepare`",
        )
    )
    low = low_inotify()
    # kind's known issues give these limits as the remedy for pods failing with "too many
    # open files", not as a requirement: two clusters ran at a stock host's defaults here
    # (shared research, kind-offline.md), so low limits are a warning with the fix.
    findings.append(
        Finding(
            "inotify",
            True,
            "at kind's recommended limits"
            if not low
            else "below kind's recommended limits ("
            + ", ".join(f"{k}={v}, wants {INOTIFY_MIN[k]}" for k, v in low.items())
            + f") for {nodes} nodes; if pods fail with 'too many open files': `sysctl -w "
            + " ".join(f"{k}={INOTIFY_MIN[k]}" for k in low)
            + "`",
            warning=bool(low),
        )
    )
    memory = int(info.get("MemTotal") or 0)
    findings.append(
        Finding(
            "docker memory",
            memory == 0 or memory >= nodes * NODE_MEMORY_BYTES,
            f"{memory / 2**30:.1f} GiB for {nodes} nodes (about 1 GiB each)"
            + (
                ""
                if memory == 0 or memory >= nodes * NODE_MEMORY_BYTES
                else ": give Docker more memory or use fewer or smaller clusters"
            ),
        )
    )
    root = Path(info.get("DockerRootDir") or "/var/lib/docker")
    probe = root if root.exists() else Path("/")
    free = shutil.disk_usage(probe).free
    findings.append(
        Finding(
            "disk",
            free >= nodes * NODE_DISK_BYTES,
            f"{free / 2**30:.0f} GiB free under {probe} for {nodes} nodes (about 4 GiB each)"
            + ("" if free >= nodes * NODE_DISK_BYTES else ": free disk space or use fewer nodes"),
        )
    )
    return findings


class NodeImageUnavailable(str):
    """A node image Docker neither has nor can pull: the one lack `python -m kindnode build
    --for-stack` fixes on a machine that has Go and Docker (scripts/up.sh runs it then).
    The text is the error line with its fixes; `cause` is what happened, without them."""

    cause: str

    def __new__(cls, cause: str, fixes: str) -> NodeImageUnavailable:
        line = super().__new__(cls, f"{cause}: {fixes}")
        line.cause = cause
        return line


def _node_image(image: str) -> str | None:
    """None when Docker has the node image or can pull it (what kind would do next); else
    one line with the reason and the fix."""
    if _docker("image", "inspect", image).returncode == 0:
        return None
    pulled = _docker("pull", image, timeout=1800)
    if pulled.returncode == 0:
        return None
    reason = (pulled.stderr.strip().splitlines() or ["no output"])[-1]
    return NodeImageUnavailable(
        f"Docker cannot pull the kind node image {image} ({reason})",
        "where nothing can be pulled, `python -m kindnode build --for-stack STACK` builds it "
        "and the fleet's images here from their Go modules and points the stack at them "
        "(scripts/up.sh runs it when Go is installed); behind a mirror, set kind.nodeImage to "
        "an image it serves, and kind.registryMirrors for the fleet's images "
        "(docs/stack-reference.md)",
    )


def _kind_nodes(spec: FleetSpec) -> int:
    return sum(1 + c.kind.worker_nodes for c in spec.clusters if c.provider == "kind" and c.kind)


def preflight_warnings(spec: FleetSpec) -> list[str]:
    """What is worth saying about this host for the stack's kind clusters, without stopping."""
    nodes = _kind_nodes(spec)
    if not nodes or not docker_answers():
        return []
    return [f"{f.name}: {f.detail}" for f in checks(nodes) if f.warning]


def preflight(spec: FleetSpec) -> list[str]:
    """One line per thing this host lacks for the stack's kind clusters, each with its fix;
    empty when there are none or the stack has no kind cluster."""
    from components.model.fieldtypes import minor_tuple

    kind = [c for c in spec.clusters if c.provider == "kind" and c.kind is not None]
    if not kind:
        return []
    nodes = _kind_nodes(spec)
    minors = [minor_tuple(c.kubernetes_version) for c in kind if c.kubernetes_version]
    findings = checks(nodes, max(minors) if minors else None)
    problems = [f"{f.name}: {f.detail}" for f in findings if not f.ok]
    if problems:
        return problems
    for image in sorted({c.kind.node_image for c in kind if c.kind and c.kind.node_image}):
        problem = _node_image(image)
        if problem is None:
            refused = privileged_containers_run(image)
            if refused:
                problem = (
                    f"Docker cannot start a privileged container ({refused}), which kind needs "
                    "for every node: allow privileged containers (rootless Docker and some "
                    "sandboxes refuse them) and run again"
                )
        if problem:
            problems.append(problem)
    return problems


# The pre-flight's exit code when the node image is all the host lacks and the caller said it
# can build one (--can-build): scripts/up.sh then runs `python -m kindnode build --for-stack`.
BUILD_NODE_IMAGE = 3


def main(argv: list[str] | None = None) -> int:
    """`python -m components.checks.kind_host STACK [--can-build]`: scripts/up.sh's
    pre-flight."""
    import sys

    from components.checks.load import load_stack
    from components.model.problems import FleetConfigError

    args = sys.argv[1:] if argv is None else argv
    can_build = "--can-build" in args
    args = [a for a in args if a != "--can-build"]
    try:
        spec, _ = load_stack(args[0])
        for warning in preflight_warnings(spec):
            print(f"warning: {warning}", file=sys.stderr)
        problems = preflight(spec)
    except (FleetConfigError, HostError) as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    if can_build and problems and all(isinstance(p, NodeImageUnavailable) for p in problems):
        for problem in problems:
            print(f"note: {problem.cause}", file=sys.stderr)
        return BUILD_NODE_IMAGE
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
