"""The command-line conventions mkf shares with the controller's own commands (colour, -q,
flags before or after the subcommand, closed pipes, a number of seconds), and the
controller's commands themselves, which mkf offers under `mkf controller`."""

from __future__ import annotations

import argparse

from controller.terminal import (
    Painter,
    common_flags,
    flag,
    painter,
    quietly_on_broken_pipe,
    seconds,
)

__all__ = [
    "Painter",
    "add_controller_commands",
    "common_flags",
    "flag",
    "painter",
    "quietly_on_broken_pipe",
    "seconds",
]


def add_controller_commands(parser: argparse.ArgumentParser) -> None:
    """The controller's subcommands (run, explain) under `parser`. Imported only here, when
    mkf builds its parser: the controller's modules are not loaded before."""
    from controller import cli

    cli.configure(parser, top=False)
