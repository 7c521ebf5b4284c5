"""Pulumi's output as a user reads it: an exception raised in one of the project's dynamic
providers (kind, the webhook probe, a token's read) reaches Pulumi as its whole Python
traceback (pulumi v3.272.0 sdk/python/lib/pulumi/dynamic/__main__.py
`_abort_with_traceback`: `traceback.format_exc()`), 25 lines with the cause at the bottom,
once per cluster. Each such traceback is shown as one line: the line's own prefix and the
exception's message. `mkf` filters what it streams through this; scripts/up.sh and down.sh
pipe `pulumi` through `python -m components.cli.pulumi_output`."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable

MARK = "Traceback (most recent call last):"
# The project's own errors say what to do in their message: their type adds nothing.
OWN = {"CommandFailed", "RunError", "DriverError", "RuntimeError", "ModuleSourceError",
       "ToolchainError", "TimeoutError"}  # fmt: skip
EXCEPTION = re.compile(r"^(?:[A-Za-z_]\w*\.)*([A-Z]\w*): (.*)$")
CALLING = "Exception calling application: "


class Tracebacks:
    """Feed it Pulumi's lines one at a time; it hands on every line but a traceback's, and
    in place of each traceback the line that names its exception."""

    def __init__(self, out: Callable[[str], None]) -> None:
        self.out = out
        self.prefix: str | None = None  # while inside a traceback: what came before it
        self.frame_indent: int | None = None

    def __call__(self, line: str) -> None:
        if self.prefix is None:
            at = line.find(MARK)
            if at < 0:
                self.out(line)
                return
            self.prefix, self.frame_indent = line[:at].replace(CALLING, ""), None
            return
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if stripped.startswith('File "'):
            if self.frame_indent is None:
                self.frame_indent = indent
            return
        if self.frame_indent is not None and indent > self.frame_indent:
            return  # a frame's source line, or its ^^^^ marks
        if not stripped:
            return
        if self.frame_indent is None:
            # No frame followed the head (a progress line's copy of it): the head alone,
            # marked, and this line as it is.
            self.out(f"{self.prefix}(the cause follows under Diagnostics)")
            self.prefix = None
            self(line)
            return
        found = EXCEPTION.match(stripped)
        message = found.group(2) if found and found.group(1) in OWN else stripped
        self.out(f"{self.prefix}{message}")
        self.prefix = None


def main() -> int:
    """stdin to stdout, line by line (a filter after `pulumi up 2>&1`)."""
    write = Tracebacks(lambda line: print(line, flush=True))
    for line in iter(sys.stdin.readline, ""):
        write(line.rstrip("\n"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
