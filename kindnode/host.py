"""Preparing this machine for kind, only on request (`python -m kindnode host --prepare`: CI
here, or a user who asks for it): each change only where components/checks/kind_host.py
finds the lack, saying why."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from components.checks.kind_host import (
    CGROUP_V1_CONTROLLERS,
    INOTIFY_MIN,
    RUNTIME_NAME,
    HostError,
    checks,
    docker_answers,
    docker_runtimes,
    lacks_sys_resource,
    low_inotify,
    missing_cgroup_controllers,
)

__all__ = ["HostError", "checks", "docker_answers", "lacks_sys_resource", "prepare"]

ROOT = Path(__file__).resolve().parents[1]
STATE = ROOT / ".cache" / "kind-tier"
# Present where systemd is the init system (sd_booted(3)).
SYSTEMD_RUNNING = Path("/run/systemd/system")

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


def managed_docker() -> str | None:
    """How to start the Docker engine a service manager owns here, or None when none does:
    starting a dockerd of our own beside it would leave two engines fighting over
    /var/run/docker.sock and /var/lib/docker."""
    if not SYSTEMD_RUNNING.is_dir():  # systemd is not this host's init
        return None
    listed = subprocess.run(
        ["systemctl", "list-unit-files", "--no-legend", "docker.service", "docker.socket"],
        capture_output=True,
        text=True,
        check=False,
    )
    if listed.returncode != 0 or not listed.stdout.strip():
        return None
    return "systemctl start docker"


def prepare() -> None:
    """Each host change a kind fleet needs here, only where it is needed, saying why."""
    if os.geteuid() != 0:
        raise HostError(
            "preparing the host installs packages, starts Docker, mounts cgroups and raises "
            "inotify limits, which needs root: run it as root (sudo python3 -m kindnode host "
            "--prepare), or without --prepare to see what this host lacks"
        )
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
        if start := managed_docker():
            raise HostError(
                "Docker is installed as a service of this host's service manager and is not "
                f"running: start it (`{start}`) and run again; a second engine beside it "
                "would fight it for /var/lib/docker"
            )
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
