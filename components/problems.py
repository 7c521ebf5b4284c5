"""Problems found in a stack's configuration, and how they are shown to a person."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the config: where (a `pulumi config set --path` path), what, fix."""

    path: str
    message: str
    hint: str = ""
    severity: Severity = "error"

    def __str__(self) -> str:
        text = f"{self.severity}: {self.path}: {self.message}"
        return f"{text}\n    fix: {self.hint}" if self.hint else text


def errors(problems: Iterable[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == "error"]


def warnings(problems: Iterable[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == "warning"]


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    # Sorted so that ties between equally close names always resolve the same way.
    match = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f"did you mean '{match[0]}'? " if match else ""


def format_report(problems: list[Problem], source: str) -> str:
    errs, warns = errors(problems), warnings(problems)
    head = f"{source}: {len(errs)} error(s), {len(warns)} warning(s)"
    return "\n".join([head, *(str(p) for p in errs + warns)])


class FleetConfigError(Exception):
    """Raised before any resource is registered when the config has errors; lists them all."""

    def __init__(self, problems: list[Problem], source: str) -> None:
        self.problems = problems
        super().__init__(
            format_report(problems, source)
            + "\nNothing was changed on any cluster. Fix the errors above and run again."
        )
