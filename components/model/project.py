"""Which project a command acts on: the multikueue-fleet project the current directory is in,
found upward by its Pulumi.yaml as pulumi and git find theirs, else the checkout this code
was installed from (`pip install -e .` in one clone, run in another, acts on the other)."""

from __future__ import annotations

from pathlib import Path

import yaml

from components.model.spec import PROJECT

INSTALLED = Path(__file__).resolve().parents[2]


def _is_this_project(pulumi_yaml: Path) -> bool:
    """A Pulumi.yaml naming this project (another Pulumi project above is not ours)."""
    try:
        settings = yaml.safe_load(pulumi_yaml.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    return isinstance(settings, dict) and settings.get("name") == PROJECT


def find_project(start: Path | None = None) -> Path | None:
    """The nearest folder at or above `start` (the current directory) holding this
    project's Pulumi.yaml; None when there is none."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "Pulumi.yaml"
        if candidate.is_file() and _is_this_project(candidate):
            return folder
    return None


def project_root() -> Path:
    return find_project() or INSTALLED


def where_note() -> str | None:
    """One line saying which project a command acts on, when that is not the current
    directory; None when it is."""
    here = Path.cwd().resolve()
    found = find_project(here)
    if found == here:
        return None
    if found is not None:
        return f"note: acting on the project at {found} (found above {here})"
    return (
        f"note: no {PROJECT} project here or above ({here}): acting on the checkout mkf was "
        f"installed from, {INSTALLED}"
    )
