"""`mkf`: the one installed command (pyproject's console script). The fleet's commands of
`python -m components`, the controller's under `mkf controller`, `--version`, and shell
completion generated from the same parser."""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
import tomllib
from pathlib import Path

from components.cli import main as fleet
from components.cli.completion import completion_script
from components.model.versions import KUEUE_VERSION
from controller import cli as controller
from controller.terminal import quietly_on_broken_pipe

DISTRIBUTION = "multikueue-fleet"
PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def version() -> str:
    """The installed version; from pyproject.toml when run from a checkout not installed."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return str(tomllib.loads(PYPROJECT.read_text())["project"]["version"])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mkf")
    parser.add_argument(
        "--version",
        action="version",
        version=f"mkf {version()} (Kueue {KUEUE_VERSION}, Python {sys.version.split()[0]})",
    )
    sub = fleet.configure(parser)
    text = "the dispatch controller: run it, or explain a decision (python -m controller)"
    c = sub.add_parser("controller", help=text, description=text)
    controller.configure(c, top=False)
    text = "print a shell completion script: source <(mkf completion bash)"
    completion = sub.add_parser("completion", help=text, description=text)
    completion.add_argument("shell", choices=("bash", "zsh"))
    completion.set_defaults(func=lambda args: print(completion_script(parser, args.shell)) or 0)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    return quietly_on_broken_pipe(lambda: fleet.dispatch(parser.parse_args(argv), parser))


if __name__ == "__main__":
    sys.exit(main())
