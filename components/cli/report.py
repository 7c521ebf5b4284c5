"""Where the commands' words go: results on stdout, every diagnostic (errors, warnings,
notes, progress) on stderr, coloured only on a terminal, and a note said once per run
however many stacks carry it."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field, replace
from typing import Any, TextIO

from components.model.problems import Problem, errors, notes, warnings
from controller.api.terminal import Painter, flag, painter

_SEVERITY_COLOUR = {"error": "red", "warning": "yellow", "note": "cyan"}


def problem_json(problem: Problem, source: str) -> dict[str, Any]:
    """A problem as `-o json` prints it."""
    return {
        "severity": problem.severity,
        "path": problem.path,
        "message": problem.message,
        "fix": problem.hint,
        "file": source,
        "line": problem.line,
    }


@dataclass
class Reporter:
    """One run's output streams, and the notes it has already shown."""

    quiet: bool = False
    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)
    paint_out: Painter = field(default_factory=lambda: Painter(False))
    paint_err: Painter = field(default_factory=lambda: Painter(False))
    # Notes need no action, so only `validate`, the command that asks about the stack, shows
    # them; render, diff and the rest would repeat them on every run.
    show_notes: bool = False
    # note (path, the message's first clause) -> each stack's note, in the order read
    _notes: dict[tuple[str, str], list[tuple[Problem, str]]] = field(default_factory=dict)

    @classmethod
    def for_args(cls, args: argparse.Namespace, show_notes: bool = False) -> Reporter:
        return cls(
            quiet=flag(args, "quiet"),
            show_notes=show_notes,
            paint_out=painter(sys.stdout, args),
            paint_err=painter(sys.stderr, args),
        )

    def result(self, text: str) -> None:
        print(text, file=self.out)

    def error(self, text: str) -> None:
        print(self._severity(text), file=self.err)

    def info(self, text: str) -> None:
        """Progress and summaries a script does not need: left out with -q."""
        if not self.quiet:
            print(text, file=self.err)

    def _severity(self, text: str) -> str:
        for severity, colour in _SEVERITY_COLOUR.items():
            prefix = f"{severity}:"
            if text.startswith(prefix):
                return self.paint_err(prefix, colour) + text[len(prefix) :]
        return text

    def problems(self, problems: list[Problem], source: str) -> None:
        """Errors always, warnings unless -q; notes are kept for `finish`."""
        shown = errors(problems) + ([] if self.quiet else warnings(problems))
        for problem in shown:
            self.error(problem.render(source))
        for note in notes(problems):
            key = (note.path, note.message.split(":", 1)[0])
            self._notes.setdefault(key, []).append((note, source))

    def finish(self) -> None:
        """Each note once, naming the stacks it applies to (none with -q, nor where notes
        are not shown)."""
        if self.quiet or not self.show_notes:
            self._notes.clear()
            return
        for seen in self._notes.values():
            note, source = seen[0]
            if len(seen) == 1:
                self.error(note.render(source))
                continue
            if len({n.message for n, _ in seen}) > 1:
                # The same note with each stack's own details: the first clause says it.
                head = note.message.split(":", 1)[0]
                detail = "the details differ per stack: `mkf validate --stack NAME` shows one"
                note = replace(note, message=f"{head} ({detail})")
            self.error(replace(note, line=None).render())
            self.error(f"    in: {', '.join(s for _, s in seen)}")
        self._notes.clear()
