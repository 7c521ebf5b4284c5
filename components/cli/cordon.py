"""`mkf cordon` and `mkf uncordon`: a worker's `cordoned` setting written into its stack file,
as a person would write it, and nothing else of the file touched (comments, order, quoting,
secrets all stay byte for byte). `pulumi up` then labels the worker's MultiKueueCluster, and
the dispatcher reads the label (controller/model.py, CORDONED_LABEL)."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from components.checks.load import load_stack_text
from components.model.problems import FleetConfigError, did_you_mean
from components.model.spec import PROJECT
from components.model.stack_file import stack_names

WORKERS_KEY = f"{PROJECT}:workers"


class CordonError(Exception):
    """The setting cannot be written: the message says where and how to fix it."""


@dataclass(frozen=True)
class Changed:
    text: str  # the file's new text ("" when nothing changes)
    path: str  # workers[i].cordoned
    said: str  # what was done, for the person


def _child(node: yaml.MappingNode, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    for k, v in node.value:
        if isinstance(k, yaml.ScalarNode) and k.value == key:
            return k, v
    return None


def _worker_node(text: str, source: str, worker: str) -> tuple[int, yaml.MappingNode]:
    """(index, mapping node) of the worker named `worker` in the file's workers list."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        raise CordonError(f"{source}: not valid YAML; fix: `mkf validate` says where") from None
    config = _child(root, "config") if isinstance(root, yaml.MappingNode) else None
    workers = (
        _child(config[1], WORKERS_KEY)
        if config and isinstance(config[1], yaml.MappingNode)
        else None
    )
    if workers is None or not isinstance(workers[1], yaml.SequenceNode):
        raise CordonError(f"{source}: no `{WORKERS_KEY}` list; fix: name a stack that has workers")
    names = []
    for index, item in enumerate(workers[1].value):
        name = _child(item, "name") if isinstance(item, yaml.MappingNode) else None
        if name is None:
            continue
        names.append(name[1].value)
        if name[1].value == worker:
            return index, item
    raise CordonError(
        f"{source}: no worker named '{worker}'; fix: {did_you_mean(worker, names)}"
        f"the workers are {', '.join(names) or 'none'}"
    )


def _line_start(text: str, index: int) -> int:
    return text.rfind("\n", 0, index) + 1


def _line_end(text: str, index: int) -> int:
    end = text.find("\n", index)
    return len(text) if end < 0 else end + 1


def edit(text: str, source: str, worker: str, cordoned: bool) -> Changed:
    """The stack file's text with `worker`'s `cordoned` set as asked. Uncordoning removes
    the line cordoning wrote, so cordon then uncordon gives the file back as it was."""
    index, node = _worker_node(text, source, worker)
    path = f"workers[{index}].cordoned"
    entry = _child(node, "cordoned")
    # YAML 1.2's core schema, as Pulumi reads it: true, True or TRUE.
    current = entry is not None and str(entry[1].value).lower() == "true"
    if current == cordoned:
        state = "cordoned" if cordoned else "not cordoned"
        return Changed("", path, f"{worker} is already {state} in {source} ({path}); nothing to do")
    if node.flow_style:
        raise CordonError(
            f"{source}: {path}: workers[{index}] is written on one line ({{...}}), which this "
            f"command does not rewrite; fix: write `cordoned: {str(cordoned).lower()}` in it "
            "by hand"
        )
    if entry is not None:
        key, value = entry
        if cordoned:
            new = text[: value.start_mark.index] + "true" + text[value.end_mark.index :]
        else:
            # The line goes when it is what `cordon` writes; anything else on it (a comment,
            # a list dash) is the user's, and only the value changes.
            start, end = (
                _line_start(text, key.start_mark.index),
                _line_end(text, value.end_mark.index),
            )
            if text[start:end].strip() == "cordoned: true":
                new = text[:start] + text[end:]
            else:
                new = text[: value.start_mark.index] + "false" + text[value.end_mark.index :]
    else:
        name_key, name_value = _child(node, "name") or (None, None)
        assert name_key is not None and name_value is not None  # found by its name
        column = name_key.start_mark.column
        at = _line_end(text, name_value.end_mark.index)
        newline = "" if text[:at].endswith("\n") else "\n"
        new = text[:at] + newline + " " * column + "cordoned: true\n" + text[at:]
    verb = "cordoned" if cordoned else "uncordoned"
    return Changed(new, path, f"{verb} {worker} in {source} ({path}: {str(cordoned).lower()})")


def _check(text: str, source: str, worker: str, cordoned: bool) -> None:
    """The new text as the project reads it: valid, and the worker cordoned as asked."""
    try:
        spec, _ = load_stack_text(text, source)
    except FleetConfigError as exc:
        raise CordonError(
            f"{source}: the file would not be valid with {worker} "
            f"{'cordoned' if cordoned else 'uncordoned'}, so it was left as it was: "
            + " | ".join(str(exc).splitlines()[1:3])
            + "; fix: `mkf validate` shows every problem"
        ) from None
    found = next((w for w in spec.workers if w.name == worker), None)
    if found is None or found.cordoned != cordoned:
        raise CordonError(f"{source}: the edit did not read back as asked; the file is unchanged")


def set_cordon(path: Path, worker: str, cordoned: bool) -> Changed:
    """Writes the setting into the stack file at `path` (atomically, its mode kept); what
    was written (no text when the file already said so)."""
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise CordonError(
            f"{source}: cannot read the stack file ({reason}); fix: give a stack name "
            f"({', '.join(stack_names())}) or the path of a stack file"
        ) from None
    changed = edit(text, source, worker, cordoned)
    if not changed.text:
        return changed
    _check(changed.text, source, worker, cordoned)
    mode = path.stat().st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(changed.text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return changed
