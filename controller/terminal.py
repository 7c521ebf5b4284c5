"""How the command-line tools meet a terminal and a pipe, the way kubectl, git and helm do:
flags accepted before or after the subcommand, colour only on a terminal, quiet on request,
and a reader that stops early (`... | head`) ending the command without a word.

Shared by `python -m controller`, `python -m components` and the installed `mkf`; it lives
in controller/ because the controller's image holds only that package."""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from typing import TextIO

# What a shell reports for a process that a closed pipe stopped (128 + SIGPIPE): `set -o
# pipefail` scripts see the same code as for `yes | head`.
BROKEN_PIPE_EXIT = 141

_COLOURS = {"red": "31", "green": "32", "yellow": "33", "cyan": "36", "bold": "1"}


def common_flags(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """--debug, -q and --no-color on `parser`. Each subcommand's parser gets them too
    (top=False: no default, so a flag given before the subcommand is not reset by the
    subparser), which is what lets them stand before or after the subcommand."""
    default: dict[str, object] = {} if top else {"default": argparse.SUPPRESS}
    parser.add_argument(
        "--debug",
        action="store_true",
        help="show the traceback of an unexpected error",
        **default,  # type: ignore[arg-type]
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print only results and errors (no notes, warnings or progress)",
        **default,  # type: ignore[arg-type]
    )
    parser.add_argument(
        "--no-color",
        action="store_true",
        help="no colour (also: NO_COLOR set, or output not a terminal)",
        **default,  # type: ignore[arg-type]
    )


def seconds(text: str) -> float:
    """An argparse type for a number of seconds: finite and not negative. float() alone
    takes nan, inf and -5, and a wait of nan or inf seconds never ends."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a number of seconds (write it like 30 or 2.5)"
        ) from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a finite number of seconds of at least 0 (write it like 30)"
        )
    return value


def flag(args: argparse.Namespace, name: str) -> bool:
    """A common flag's value, whichever parser saw it (False when none did)."""
    return bool(getattr(args, name, False))


def colour_wanted(stream: TextIO, args: argparse.Namespace | None = None) -> bool:
    """Colour only for a person at a terminal: never with --no-color, NO_COLOR set to
    anything non-empty (no-color.org), TERM=dumb, or a stream that is a file or a pipe."""
    if args is not None and flag(args, "no_color"):
        return False
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Painter:
    """Colours text for one stream, or leaves it plain."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str, colour: str) -> str:
        if not self.enabled or not text:
            return text
        return f"\033[{_COLOURS[colour]}m{text}\033[0m"


def painter(stream: TextIO, args: argparse.Namespace | None = None) -> Painter:
    return Painter(colour_wanted(stream, args))


def quietly_on_broken_pipe(command: Callable[[], int]) -> int:
    """Runs `command`; when whoever reads stdout has gone away (`| head`), ends at once
    with no message and no "Exception ignored" at exit, as `yes | head` does."""
    try:
        try:
            code = command()
        except SystemExit:  # argparse after --help or a usage error: its output goes first
            sys.stdout.flush()
            raise
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at /dev/null so that flush is quiet.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):  # stdout is no file (a test's capture): nothing to quiet
            pass
        return BROKEN_PIPE_EXIT
