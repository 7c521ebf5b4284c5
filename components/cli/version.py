"""The project's version: the installed distribution's, or pyproject.toml's in a checkout
that was not installed (`python -m components`)."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

DISTRIBUTION = "multikueue-fleet"
PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def version() -> str:
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return str(tomllib.loads(PYPROJECT.read_text())["project"]["version"])
