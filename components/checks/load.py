"""The one entry point from a stack's config to a FleetSpec the fleet can be built from:
the typed model, then every check that says no before anything changes."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from components.checks.limits import object_problems
from components.checks.validate import validate
from components.model.host_local import with_host_settings
from components.model.problems import FleetConfigError, Problem, errors
from components.model.spec import FleetSpec, load_spec
from components.model.stack_file import (
    UnknownRevision,
    read_stack_text,
    read_text,
    stack_name_of,
    stack_names,
    with_lines,
)


def load_checked(
    config: Mapping[str, Any],
    stack: str,
    source: str,
    secret_keys: frozenset[str] = frozenset(),
    lines: Mapping[str, int] | None = None,
    text_warnings: list[Problem] | None = None,
) -> tuple[FleetSpec, list[Problem]]:
    """Spec and warnings; FleetConfigError listing every error when there is any.
    `text_warnings`: what reading the file's text found (with their lines already).
    This host's settings for the stack (components/model/host_local.py) apply first."""
    config, host_notes = with_host_settings(config, stack)
    spec, problems = load_spec(config, stack, secret_keys)
    problems = [*(text_warnings or ()), *host_notes, *problems]
    if spec is not None:
        problems += validate(spec)
        if not errors(problems):
            # Only a valid fleet can be built; its objects must fit the API server.
            problems += object_problems(spec)
    problems = with_lines(problems, lines or {})
    if spec is None or errors(problems):
        raise FleetConfigError(problems, source)
    return spec, problems


def load_stack(
    location: str, repo: Path | None = None, stack: str | None = None
) -> tuple[FleetSpec, list[Problem]]:
    """A stack file (a path or REV:path) read, checked and loaded; every way it can fail is
    a FleetConfigError that says where and how to fix it. `stack`: the stack's name when it
    is not the file's (Pulumi.<name>.yaml), as when two versions of one stack are compared."""
    try:
        text = read_text(location, repo)
    except UnknownRevision as exc:
        raise FleetConfigError(
            [
                Problem(
                    "",
                    str(exc).removeprefix(f"{location}: "),
                    f"'{exc.rev}' is not a git revision of this checkout: name a branch, tag "
                    "or commit that is (`git branch -a`, `git log --oneline`), and `git "
                    "fetch` one that is only on a remote",
                )
            ],
            location,
        ) from None
    except FileNotFoundError as exc:
        names = ", ".join(stack_names())
        raise FleetConfigError(
            [
                Problem(
                    "",
                    str(exc).removeprefix(f"{location}: "),
                    f"give a stack name ({names}) or the path of a stack file",
                )
            ],
            location,
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FleetConfigError(
            [Problem("", f"cannot read the file: {exc}", "save it as UTF-8 text")], location
        ) from None
    return load_stack_text(text, location, stack)


def load_stack_text(
    text: str, location: str, stack: str | None = None
) -> tuple[FleetSpec, list[Problem]]:
    """A stack file's text (read from `location`, or about to be written there) checked and
    loaded, its problems at their lines."""
    read = read_stack_text(text, location)
    name = stack or stack_name_of(location)
    return load_checked(read.config, name, location, read.secret, read.lines, read.warnings)
