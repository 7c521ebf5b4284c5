"""The processes a loopback fleet starts: detached, so they outlive the command that
started them, logged to its state folder, and recorded, so that `down` stops exactly those
(a pid is only signalled while /proc still shows it running the recorded command) and nothing
else on the machine."""

from __future__ import annotations

import contextlib
import os
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

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "pid": self.pid, "argv0": self.argv0, "log": self.log}

    def exited(self) -> bool:
        if self.process is not None:
            return self.process.poll() is not None
        return not running(self.as_dict())


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now (the kernel's choice)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(name: str, argv: list[str], log: Path, env: dict[str, str] | None = None) -> Started:
    with log.open("ab") as out:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    return Started(name, process.pid, argv[0], str(log), process)


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


def stop_all(records: list[dict[str, Any]], grace: float = 20.0) -> list[str]:
    """SIGTERM to each recorded process that is still ours, in reverse start order, then
    SIGKILL to what is left after `grace` seconds; returns the names that were stopped."""
    stopped: list[str] = []
    for record in reversed(records):
        if is_ours(record):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(record["pid"]), signal.SIGTERM)
                stopped.append(str(record["name"]))
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(running(r) for r in records):
        time.sleep(0.2)
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
