"""The processes a loopback fleet starts: detached, so they outlive the command that
started them, logged to its state folder, and recorded, so that `down` stops exactly those
(a pid is only signalled while /proc still shows it running the recorded command) and nothing
else on the machine."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Started:
    name: str  # e.g. "manager/kube-apiserver"
    pid: int
    argv0: str
    log: str
    # Only in the command that started it (a later `down` reads the record instead).
    process: subprocess.Popen[bytes] | None = field(default=None, compare=False, repr=False)
    # Seconds it gets after SIGTERM before SIGKILL; None: what stop_all is given.
    grace: float | None = None

    def as_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "pid": self.pid, "argv0": self.argv0, "log": self.log}
        return out if self.grace is None else {**out, "grace": self.grace}

    def exited(self) -> bool:
        if self.process is not None:
            return self.process.poll() is not None
        return not running(self.as_dict())


# Ports handed out by this process, so that two components of one fleet never get the same.
_HANDED_OUT: set[int] = set()
# Listening ports are chosen from here up to the start of the kernel's ephemeral range.
LOWEST_PORT = 10000


def ephemeral_range(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> range:
    """The ports the kernel gives outgoing connections (Linux's default 32768-60999)."""
    try:
        low, high = (int(part) for part in path.read_text().split()[:2])
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(low, high + 1)


def free_port() -> int:
    """A port on 127.0.0.1 that nothing is bound to now and that the kernel will not hand an
    outgoing connection meanwhile. A port the kernel picks for bind(0) comes from its
    ephemeral range, the very range it also picks source ports of outgoing connections from:
    in the seconds between choosing it and the component binding it, a client connection of
    another component (say, Kueue's to its API server) can take it, and the component exits
    with "bind: address already in use" (a CI run saw this for Kueue's health port). So the
    port is drawn at random below that range, and checked free by binding it."""
    ephemeral = ephemeral_range()
    candidates = range(LOWEST_PORT, ephemeral.start)
    for _ in range(200) if len(candidates) > 1000 else ():
        port = random.choice(candidates)
        if port in _HANDED_OUT:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    # An ephemeral range that leaves no room below it: the kernel's choice, as before.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    _HANDED_OUT.add(port)
    return port


def start(
    name: str,
    argv: list[str],
    log: Path,
    env: dict[str, str] | None = None,
    grace: float | None = None,
) -> Started:
    with log.open("ab") as out:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    return Started(name, process.pid, argv[0], str(log), process, grace)


def is_ours(record: dict[str, Any]) -> bool:
    """True while the pid still runs the recorded program (a pid can be reused)."""
    try:
        argv = Path(f"/proc/{int(record['pid'])}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError, KeyError):
        return False
    return bool(argv) and argv[0].decode(errors="replace") == record.get("argv0")


def running(record: dict[str, Any]) -> bool:
    if not is_ours(record):
        return False
    with contextlib.suppress(OSError):
        # A zombie (exited, not yet reaped by its parent) is not running.
        state = Path(f"/proc/{int(record['pid'])}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    return False


# How long stop_all waits for one process before it signals the next (below).
STOP_STEP = 2.0


def stop_all(records: list[dict[str, Any]], grace: float = 20.0) -> list[str]:
    """Stops each recorded process that is still ours, last started first: SIGTERM, then up
    to STOP_STEP seconds for it to exit before the next one is signalled, because what
    started earlier serves what started later (a kube-apiserver whose etcd got SIGTERM at
    the same moment sat out the whole grace; with etcd still up it exits in a second). A
    record with a grace of its own is killed once that is over; the others get until
    `grace` seconds after the first signal, then SIGKILL. Returns the names stopped."""
    stopped: list[str] = []
    deadline = time.monotonic() + grace
    for record in reversed(records):
        if not is_ours(record):
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(record["pid"]), signal.SIGTERM)
            stopped.append(str(record["name"]))
        own = record.get("grace")
        until = time.monotonic() + (float(own) if own is not None else STOP_STEP)
        while time.monotonic() < min(until, deadline) and running(record):
            time.sleep(0.05)
        if own is not None and running(record):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(record["pid"]), signal.SIGKILL)
    while time.monotonic() < deadline and any(running(r) for r in records):
        time.sleep(0.1)
    for record in records:
        if running(record):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(record["pid"]), signal.SIGKILL)
    return stopped


def log_tail(path: str | Path, lines: int = 8) -> str:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return ""
    return " | ".join(text.strip().splitlines()[-lines:])


def others_running(program: str) -> bool:
    """True while some process on the machine runs a binary named `program` (another fleet's
    Kueue, say), so that what all of them share is not removed from under it."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv0 = (entry / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if Path(argv0).name == program:
            return True
    return False
