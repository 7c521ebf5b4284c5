"""`mkf`: the one installed command (pyproject's console script). The fleet's commands of
`python -m components`, the controller's under `mkf controller`, `--version`, and shell
completion generated from the same parser (main.build_parser)."""

from __future__ import annotations

import sys

from components.cli.main import build_parser, dispatch
from controller.api.terminal import quietly_on_broken_pipe

__all__ = ["build_parser", "main"]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    return quietly_on_broken_pipe(lambda: dispatch(parser.parse_args(argv), parser))


if __name__ == "__main__":
    sys.exit(main())
