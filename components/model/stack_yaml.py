"""Reading a stack file's text safely, in bounded time and memory.

A stack file is small (a few kilobytes). Before anything walks its values, the text is
checked for what would make a walk hang or quietly mislead:
- its size (at most MAX_BYTES);
- the number of values once YAML anchors and aliases are expanded (at most MAX_VALUES):
  a few hundred bytes of nested aliases ("billion laughs") expand to billions of values;
- nesting depth (at most MAX_DEPTH);
- duplicate keys in one mapping (YAML loaders silently keep the last one);
- characters YAML does not allow (a coloured terminal paste's escapes), by line and column.

Scalars are read as Pulumi reads them (components/model/yaml_v3.py: YAML 1.2's booleans and
nulls, as gopkg.in/yaml.v3 resolves them); each one YAML 1.1 reads otherwise is a warning.

The check walks the composed node graph (aliases still shared) with an explicit stack and
a visit budget, so it stops after at most MAX_VALUES steps whatever the text holds. Only
then is the document constructed. The pure-Python loader is used on purpose: libyaml's
composer recurses in C and crashes the process on deeply nested input.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from components.model.yaml_v3 import Divergence, PulumiLoader

MAX_BYTES = 1024 * 1024
MAX_VALUES = 250_000
MAX_DEPTH = 64
MERGE_TAG = "tag:yaml.org,2002:merge"

DocPath = tuple[str | int, ...]


@dataclass(frozen=True)
class TextProblem:
    """Something wrong with the text itself: where (document path, 1-based line), what, fix."""

    path: DocPath
    line: int | None
    message: str
    hint: str


class StackTextError(Exception):
    def __init__(self, problems: list[TextProblem]) -> None:
        self.problems = problems
        super().__init__("; ".join(p.message for p in problems))


@dataclass
class Document:
    """The loaded value and, for each document path, the line it starts on (1-based); the
    scalars YAML 1.1 would read otherwise than Pulumi does (warnings)."""

    data: Any
    lines: dict[DocPath, int]
    divergent: list[TextProblem] = field(default_factory=list)


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def _describe(path: DocPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the top level"


def _walk(
    root: yaml.Node, divergent: dict[int, Divergence] | None = None
) -> tuple[dict[DocPath, int], list[TextProblem]]:
    """Budgeted walk of the node graph: duplicates, depth, expanded size; the lines of
    every path (kept only for the first MAX_VALUES visits, which is all there can be), and
    where the scalars of `divergent` stand."""
    lines: dict[DocPath, int] = {(): _line(root)}
    problems: list[TextProblem] = []
    notes: dict[tuple[DocPath, int], TextProblem] = {}
    divergent = divergent or {}

    def note(node: yaml.Node, path: DocPath) -> None:
        found = divergent.get(id(node))
        if found is not None:
            notes.setdefault(
                (path, _line(node)), TextProblem(path, _line(node), found.message(), found.fix())
            )

    stack: list[tuple[yaml.Node, DocPath]] = [(root, ())]
    visits = 0
    while stack:
        node, path = stack.pop()
        visits += 1
        if visits > MAX_VALUES:
            raise StackTextError(
                [
                    TextProblem(
                        path[:3],
                        _line(node),
                        f"the file holds more than {MAX_VALUES:,} values once its YAML "
                        "aliases are expanded (an alias bomb, or far more than a fleet needs)",
                        "write the values out instead of nesting anchors (&name) and "
                        "aliases (*name)",
                    )
                ]
            )
        if len(path) > MAX_DEPTH:
            raise StackTextError(
                [
                    TextProblem(
                        path[:MAX_DEPTH],
                        _line(node),
                        f"values are nested more than {MAX_DEPTH} levels deep",
                        "a stack file needs fewer than ten levels: check the indentation "
                        "and brackets",
                    )
                ]
            )
        lines.setdefault(path, _line(node))
        if isinstance(node, yaml.ScalarNode):
            note(node, path)
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key, value in node.value:
                if key.tag == MERGE_TAG:
                    # `<<: *base` merges another mapping in; its keys are not duplicates.
                    stack.append((value, path))
                    continue
                if not isinstance(key, yaml.ScalarNode):
                    problems.append(
                        TextProblem(
                            path,
                            _line(key),
                            f"a key in {_describe(path)} is a list or mapping",
                            "use plain names as keys",
                        )
                    )
                    continue
                name = key.value
                note(key, (*path, name))
                if name in seen:
                    problems.append(
                        TextProblem(
                            (*path, name),
                            _line(key),
                            f"duplicate key '{name}' (first on line {seen[name]}): YAML "
                            "would silently keep only the last one",
                            "keep one of them (merge their contents if both are needed)",
                        )
                    )
                else:
                    seen[name] = _line(key)
                    lines.setdefault((*path, name), _line(key))
                stack.append((value, (*path, name)))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, (*path, i)) for i, item in enumerate(node.value))
    if problems:
        raise StackTextError(sorted(problems, key=lambda p: p.line or 0))
    return lines, sorted(notes.values(), key=lambda p: p.line or 0)


# Control characters and other code points YAML does not allow in a document (YAML 1.2 5.1,
# as PyYAML's reader checks them), named by line and column rather than by byte offset.
_NAMES = {"\x1b": "ESC, from a coloured terminal paste", "\x00": "NUL", "\x7f": "DEL"}


def _unprintable(text: str) -> list[TextProblem]:
    found = []
    for number, line in enumerate(text.split("\n"), start=1):
        bad = yaml.reader.Reader.NON_PRINTABLE.search(line)
        if bad is None:
            continue
        char = bad.group()
        name = _NAMES.get(char, "a control character")
        found.append(
            TextProblem(
                (),
                number,
                f"line {number}, column {bad.start() + 1}: U+{ord(char):04X} ({name}) is not "
                "allowed in YAML",
                "delete it (retype the line if it came from a terminal with colours)",
            )
        )
    return found[:10]


def load(text: str) -> Document:
    """The single YAML document in `text`, or StackTextError saying where and why not.

    An empty document (nothing, or only comments) loads as None."""
    if len(text) > MAX_BYTES or len(text.encode("utf-8", "replace")) > MAX_BYTES:
        raise StackTextError(
            [
                TextProblem(
                    (),
                    None,
                    f"the file is larger than {MAX_BYTES:,} bytes (1 MiB), the most a stack "
                    "file may be",
                    "a fleet's stack file is a few kilobytes: check that this is the right file",
                )
            ]
        )
    unprintable = _unprintable(text)
    if unprintable:
        raise StackTextError(unprintable)
    loader = PulumiLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return Document(None, {})
        lines, divergent = _walk(node, loader.divergent)
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        context = exc.context or ""
        if context and exc.context_mark and exc.context_mark is not mark:
            context += f" (from line {exc.context_mark.line + 1})"
        what = ", ".join(str(p) for p in (context, exc.problem) if p)
        raise StackTextError(
            [
                TextProblem(
                    (),
                    mark.line + 1 if mark else None,
                    f"not valid YAML: {what}",
                    "fix the YAML syntax at that line (indentation, a missing ':' or "
                    "an unclosed quote or bracket are the usual causes)",
                )
            ]
        ) from None
    except yaml.YAMLError as exc:
        raise StackTextError(
            [TextProblem((), None, f"not valid YAML: {exc}", "fix the YAML syntax")]
        ) from None
    except RecursionError:
        raise StackTextError(
            [
                TextProblem(
                    (),
                    None,
                    "values are nested too deeply to read",
                    "a stack file needs fewer than ten levels: check the brackets",
                )
            ]
        ) from None
    finally:
        loader.dispose()
    return Document(data, lines, divergent)
