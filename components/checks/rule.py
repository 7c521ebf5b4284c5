"""What a fleet-wide rule is, and what every rule module builds its problems with.

A rule is a plain function of the spec that yields Problems, each naming the config path
at fault and how to fix it; validate.py runs them all, in one list."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from components.model.problems import Problem
from components.model.spec import FleetSpec

Rule = Callable[[FleetSpec], Iterable[Problem]]


def error(path: str, message: str, hint: str = "") -> Problem:
    return Problem(path, message, hint)


def warn(path: str, message: str, hint: str = "") -> Problem:
    return Problem(path, message, hint, "warning")


def unique(names: Iterable[tuple[str, str]], what: str, hint: str = "") -> Iterator[Problem]:
    seen: dict[str, str] = {}
    for name, path in names:
        if name in seen:
            yield error(
                path,
                f"duplicate {what} '{name}' (also at {seen[name]})",
                hint or f"give each {what} its own name",
            )
        else:
            seen[name] = path
