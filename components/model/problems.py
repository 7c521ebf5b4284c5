"""Problems found in a stack's configuration, and how they are shown to a person."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

# A note needs no action (it says what the fleet does for you and why): the tools show each
# once per run, and the setting it names silences it.
Severity = Literal["error", "warning", "note"]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the config: where (a `pulumi config set --path` path), what, fix."""

    path: str
    message: str
    hint: str = ""
    severity: Severity = "error"
    # 1-based line in the stack file, when the problem was found in a file's text.
    line: int | None = None

    def render(self, source: str | None = None) -> str:
        """`severity: path: message`, then where in the file and the fix, one line each."""
        text = f"{self.severity}: {self.path + ': ' if self.path else ''}{self.message}"
        if self.line:
            text += f"\n    at: {source}:{self.line}" if source else f"\n    at: line {self.line}"
        return f"{text}\n    fix: {self.hint}" if self.hint else text

    def __str__(self) -> str:
        return self.render()


def key_path(base: str, key: str | int) -> str:
    """The `pulumi config set --path` form: `workers[0].name`."""
    if isinstance(key, int):
        return f"{base}[{key}]"
    return f"{base}.{key}" if base else key


def errors(problems: Iterable[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == "error"]


def warnings(problems: Iterable[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == "warning"]


def notes(problems: Iterable[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == "note"]


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    # Sorted so that ties between equally close names always resolve the same way.
    match = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f"did you mean '{match[0]}'? " if match else ""


def format_report(problems: list[Problem], source: str) -> str:
    errs, warns = errors(problems), warnings(problems)
    head = f"{source}: {len(errs)} error(s), {len(warns)} warning(s)"
    return "\n".join([head, *(p.render(source) for p in errs + warns + notes(problems))])


class FleetConfigError(Exception):
    """Raised before any resource is registered when the config has errors; lists them all."""

    def __init__(self, problems: list[Problem], source: str) -> None:
        self.problems = problems
        super().__init__(
            format_report(problems, source)
            + "\nNothing was changed on any cluster. Fix the errors above and run again."
        )
