"""The commands the docs show: every line of a `sh` or `bash` block, and every inline
`mkf ...`, with where it is; and the simple commands a shell line is made of. Read by the
unit tier (each command parses) and the emulated tier (the cheap ones run)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from components.cli.reference import REGION

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = sorted([ROOT / "README.md", ROOT / "BENCHMARKS.md", *(ROOT / "docs").glob("*.md")])
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")


def hand_written(text: str) -> str:
    """A page without its generated regions (those are checked against the generator)."""
    return REGION.sub("", text)


def relative(path: Path) -> str:
    return str(path.relative_to(ROOT))


def documented_commands() -> list[tuple[str, str, bool]]:
    """(where, command line, whole) for every command in a shell block (a whole command)
    or an inline `mkf ...` (maybe only a command's name and a flag, as prose names them)."""
    found: list[tuple[str, str, bool]] = []
    for path in DOCUMENTS:
        text = hand_written(path.read_text())
        for match in FENCE.finditer(text):
            if match.group(1) not in ("sh", "bash"):
                continue
            line_no = text[: match.start()].count("\n") + 2
            joined = match.group(2).replace("\\\n", " ")
            for offset, line in enumerate(joined.splitlines()):
                if line.strip() and not line.lstrip().startswith("#"):
                    found.append((f"{relative(path)}:{line_no + offset}", line, True))
        for match in INLINE.finditer(text):
            span = match.group(1)
            if re.match(r"(\.venv/bin/)?(mkf|python -m (components|controller)) ", span):
                line_no = text[: match.start()].count("\n") + 1
                found.append((f"{relative(path)}:{line_no}", span, False))
    return found


def segments(line: str) -> list[list[str]]:
    """The simple commands of a shell line: pipes, `&&` and `;` split it, `#` ends it,
    leading VAR=value assignments and `$(...)` substitutions are left out."""
    line = re.sub(r"\$\([^)]*\)", "X", line)
    lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words = list(lexer)
    out, current = [], []
    for word in words:
        if word in ("|", "||", "&&", ";", "&"):
            out.append(current)
            current = []
        else:
            current.append(word)
    out.append(current)
    return [[w for w in s if not re.match(r"^[A-Z_]+=", w)] or [] for s in out if s]
