"""The machine a kind fleet runs on: what it lacks, and (only when asked to prepare it) the
smallest change that gets past each lack.

`checks()` only reads; it is the pre-flight of a kind stack. `prepare()` changes the host and
runs only from `python -m kindnode host --prepare` (CI here, or a user who asks for it):
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
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STATE = ROOT / ".cache" / "kind-tier"
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
# MiB, about 1.6 GB of disk per running cluster), with room for the fleet's controllers.
NODE_MEMORY_BYTES = 1 << 30
NODE_DISK_BYTES = 2 << 30


class HostError(Exception):
    """One line: what the host lacks and how to fix it."""


@dataclass(frozen=True)
class Finding:
    name: str
    ok: bool
    detail: str  # what was found, and, when not ok, the fix


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
    return json.loads(result.stdout)


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
    findings.append(
        Finding(
            "inotify",
            not low or nodes <= 2,
            "at kind's recommended limits"
            if not low
            else "below kind's recommended limits ("
            + ", ".join(f"{k}={v}, wants {INOTIFY_MIN[k]}" for k, v in low.items())
            + f") for {nodes} nodes: `sysctl -w "
            + " ".join(f"{k}={INOTIFY_MIN[k]}" for k in low)
            + "`",
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
            f"{free / 2**30:.0f} GiB free under {probe} for {nodes} nodes (about 2 GiB each)"
            + ("" if free >= nodes * NODE_DISK_BYTES else ": free disk space or use fewer nodes"),
        )
    )
    return findings


# --- prepare (only on request) ------------------------------------------------------------

RUNC_WRAPPER = '''#!/usr/bin/env python3
"""runc without CAP_SYS_RESOURCE: this host's capability bounding set lacks it, and runc
fails a container that asks for it ("unable to apply caps"). Written by kindnode/host.py."""
import json, os, sys
CAP = "CAP_SYS_RESOURCE"
def strip(path, key):
    with open(path) as f:
        spec = json.load(f)
    caps = (spec.get(key) or {}).get("capabilities") if key else spec.get("capabilities")
    if caps:
        for name in list(caps):
            caps[name] = [c for c in caps[name] if c != CAP]
        with open(path, "w") as f:
            json.dump(spec, f)
args = sys.argv[1:]
for i, arg in enumerate(args):
    if arg in ("--bundle", "-b") and i + 1 < len(args):
        strip(os.path.join(args[i + 1], "config.json"), "process")
    elif arg.startswith("--bundle="):
        strip(os.path.join(arg.split("=", 1)[1], "config.json"), "process")
    elif arg in ("--process", "-p") and i + 1 < len(args):
        strip(args[i + 1], None)
os.execv(RUNC, [RUNC, *args])
'''


def _log(message: str) -> None:
    print(f"  {message}", flush=True)


def _write_wrapper() -> Path:
    runc = shutil.which("runc") or "/usr/sbin/runc"
    path = STATE / RUNTIME_NAME
    STATE.mkdir(parents=True, exist_ok=True)
    path.write_text(RUNC_WRAPPER.replace("os.execv(RUNC, [RUNC", f"os.execv({runc!r}, [{runc!r}"))
    path.chmod(0o755)
    return path


def _start_dockerd() -> None:
    """dockerd as a process of ours (no systemd here), its log and pid under STATE."""
    argv = ["dockerd", "--pidfile", str(STATE / "dockerd.pid")]
    if lacks_sys_resource():
        wrapper = _write_wrapper()
        _log(f"CAP_SYS_RESOURCE is not in this host's bounding set: default runtime {wrapper}")
        argv += ["--add-runtime", f"{RUNTIME_NAME}={wrapper}", "--default-runtime", RUNTIME_NAME]
    STATE.mkdir(parents=True, exist_ok=True)
    log = (STATE / "dockerd.log").open("ab")
    subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if docker_answers():
            return
        time.sleep(1)
    raise HostError(f"dockerd did not answer within 60 s; see {STATE / 'dockerd.log'}")


def _mount_cgroups(missing: list[str]) -> None:
    for mount in missing:
        target = Path("/sys/fs/cgroup") / mount
        _log(f"mounting the cgroup v1 controller {mount} at {target} (a kind node needs it)")
        target.mkdir(exist_ok=True)
        result = subprocess.run(
            ["mount", "-t", "cgroup", "-o", f"nosuid,nodev,noexec,{mount}", "cgroup", str(target)],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise HostError(f"mounting cgroup {mount} failed: {result.stderr.strip()}")
        for link in CGROUP_V1_CONTROLLERS[mount]:
            path = Path("/sys/fs/cgroup") / link
            if not path.exists():
                path.symlink_to(mount)


# What `python -m kindnode build` runs besides Go: debootstrap (the Debian base), gcc and
# libseccomp's headers (runc with seccomp, as kind's base image builds it).
BUILD_PACKAGES = {
    "debootstrap": "debootstrap",
    "gcc": "gcc",
    "libseccomp-dev": "/usr/include/seccomp.h",
}


def _apt_install(packages: list[str], why: str) -> None:
    _log(f"installing Debian's {' '.join(packages)} ({why})")
    for args in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *packages]):
        result = subprocess.run(
            args,
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
        if result.returncode != 0:
            raise HostError(
                f"{' '.join(args)} failed: {(result.stderr.strip().splitlines() or ['?'])[-1]}; "
                f"install {' '.join(packages)} yourself and run again"
            )


def prepare() -> None:
    """Each host change a kind fleet needs here, only where it is needed, saying why."""
    missing = [
        package
        for package, probe in BUILD_PACKAGES.items()
        if not (Path(probe).exists() if probe.startswith("/") else shutil.which(probe))
    ]
    if shutil.which("dockerd") is None and not docker_answers():
        missing.append("docker.io")
    if missing:
        _apt_install(missing, "the kind tier builds and runs with them")
    if not docker_answers():
        _log("no Docker engine answers: starting dockerd")
        _start_dockerd()
    elif lacks_sys_resource() and docker_runtimes()[0] != RUNTIME_NAME:
        raise HostError(
            "a Docker engine is running whose default runtime cannot start privileged "
            "containers on this host (CAP_SYS_RESOURCE is not in its bounding set); stop it "
            "and run `python -m kindnode host --prepare` again, which starts one that can"
        )
    if missing := missing_cgroup_controllers():
        _mount_cgroups(missing)
    for name, value in low_inotify().items():
        _log(f"raising {name} from {value} to {INOTIFY_MIN[name]} (kind's known issues)")
        Path("/proc/sys", *name.split(".")).write_text(str(INOTIFY_MIN[name]))
