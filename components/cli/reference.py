"""The generated parts of the docs, made from the code so they cannot drift from it: the
regions between `<!-- generated: NAME (mkf reference) -->` and `<!-- end generated -->` in
docs/stack-reference.md (every key of a stack file, its type and default, from the typed
model and components/model/field_docs.py), docs/dispatcher.md (the DispatchPolicy and
settings tables from the controller's models) and docs/commands.md (the command table from
mkf's parser). `mkf reference` writes them; `--check` (and tests/unit/test_docs.py) fails when a
committed page differs from what this makes."""

from __future__ import annotations

import argparse
import json
import re
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, PydanticSchemaGenerationError, TypeAdapter
from pydantic.errors import PydanticInvalidForJsonSchema
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from components.model import fieldtypes
from components.model.field_docs import FIELD_DEFAULTS, FIELD_DOCS
from components.model.spec import PROJECT, ExternalFramework, FleetSpec, ResourceQuota, SecretText
from controller.api import CONTROLLER_DOCS, PolicySpec, SettingsFile, policy_api, typed

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
STACK_REFERENCE = DOCS / "stack-reference.md"
DISPATCHER = DOCS / "dispatcher.md"
COMMANDS = DOCS / "commands.md"
PAGES = (STACK_REFERENCE, DISPATCHER, COMMANDS)
REGION = re.compile(
    r"(<!-- generated: (?P<name>[a-z-]+) \(mkf reference\) -->\n)(?P<body>.*?)"
    r"(<!-- end generated -->)",
    re.S,
)

# Values of these types are shown by name, not by their JSON Schema.
NAMED: tuple[tuple[Any, str], ...] = (
    (fieldtypes.Quantity, "quantity (`8`, `500m`, `32Gi`)"),
    (fieldtypes.Duration, "Go duration (`30s`, `5m`, `1h30m`)"),
    (fieldtypes.KubernetesVersion, 'Kubernetes version, quoted (`"1.35"`)'),
    (fieldtypes.LabelKey, "label key"),
    (fieldtypes.LabelValue, "label value"),
    (fieldtypes.ResourceName, "resource name"),
    (fieldtypes.Image, "image reference"),
    (fieldtypes.Repository, "image repository"),
    (fieldtypes.HttpsUrl, "https URL"),
    (fieldtypes.AbsolutePath, "absolute path"),
    (fieldtypes.StrictBool, "boolean"),
    (fieldtypes.Text, "string"),
    (SecretText, "kubeconfig text (a Pulumi secret)"),
    (policy_api.Duration, "duration (`30s`, `5m`, `1h`)"),
    (typed.LabelKey, "label key"),
)
# Models that may also be written as a plain value: what that value is.
SHORTHANDS: dict[type[BaseModel], str] = {
    ResourceQuota: "quantity (`8`, `500m`, `32Gi`)",
    ExternalFramework: "string (`Kind.version.group`)",
}
INT64 = 2**63 - 1
_PATTERNS = {
    fieldtypes.DNS_LABEL.pattern: "DNS label",
    fieldtypes.DNS_SUBDOMAIN.pattern: "DNS subdomain",
}


def _named(annotation: Any) -> str | None:
    for known, name in NAMED:
        if annotation is known or annotation == known:
            return name
    return None


def _schema_text(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return "one of " + ", ".join(f"`{v}`" for v in schema["enum"])
    pattern = schema.get("pattern", "")
    for regex, name in _PATTERNS.items():
        if pattern.strip("^$") == regex or pattern == f"^{regex}$":
            return name
    kind = schema.get("type")
    if kind in ("integer", "number"):
        return _range(schema, "integer" if kind == "integer" else "number")
    if kind == "boolean":
        return "boolean"
    if "anyOf" in schema:
        return " or ".join(dict.fromkeys(_schema_text(s) for s in schema["anyOf"]))
    return "string" if kind == "string" else str(kind or "value")


def _range(schema: dict[str, Any], word: str) -> str:
    """`integer, 1 to 20`, `number, above 0, at most 3,600`; no 64-bit limits."""
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    if high is not None and abs(high) >= INT64:
        high = None  # the 64-bit limit says nothing a person needs
        low = low if low is not None and abs(low) < INT64 else None
    parts = []
    if low is not None:
        above = "minimum" not in schema
        parts.append(f"above {_number(low)}" if above else f"from {_number(low)}")
    if high is not None:
        parts.append(f"at most {_number(high)}")
    if len(parts) == 2 and parts[0].startswith("from"):
        return f"{word}, {_number(low)} to {_number(high)}"
    return ", ".join([word, *parts])


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


Link = Callable[[type[BaseModel]], str]


def type_text(annotation: Any, link: Link) -> str:
    """The type of a field as a person reads it: `list of DNS label`, `map of label key to
    label value`, `one of a, b`, or a link to the section of a nested model."""
    named = _named(annotation)
    if named is not None:
        return named
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        parts = [a for a in args if a is not type(None)]
        return " or ".join(type_text(a, link) for a in parts)
    if origin is typing.Annotated:
        named = _named(annotation)
        if named is None:
            return _schema_text(TypeAdapter(annotation).json_schema())
    if origin is Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin in (tuple, list):
        return f"list of {type_text(args[0], link)}"
    if origin is dict:
        return f"map of {type_text(args[0], link)} to {type_text(args[1], link)}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        shorthand = SHORTHANDS.get(annotation)
        return f"{shorthand}, or {link(annotation)}" if shorthand else link(annotation)
    if annotation in (int, float, str, bool):
        return {int: "integer", float: "number", str: "string", bool: "boolean"}[annotation]
    try:
        return _schema_text(TypeAdapter(annotation).json_schema())
    except (PydanticSchemaGenerationError, PydanticInvalidForJsonSchema):
        return "value"


def field_type(field: FieldInfo, link: Link) -> str:
    # Pydantic keeps a field's Annotated metadata apart from its type: put them together
    # again, or every constrained string would read as "string".
    return type_text(field.rebuild_annotation(), link)


def default_text(field: FieldInfo, computed: str | None = None) -> str:
    """The default as written in a stack file; `computed`: the words for a default the
    model fills in from other values (the fleet's name from the stack's)."""
    if computed is not None:
        return computed
    value = field.default
    if field.is_required() or value is PydanticUndefined:
        return "**required**"
    if value is None:
        return "unset"
    if isinstance(value, BaseModel):
        value = value.model_dump(by_alias=True)
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, (dict, list)) and value:
        shown = json.dumps(value)
        return f"`{shown}`" if len(shown) <= 40 else "see below"
    return f"`{json.dumps(value)}`"


def _models(
    root: type[BaseModel], path: str, stop: frozenset[type[BaseModel]] = frozenset()
) -> Iterator[tuple[type[BaseModel], str]]:
    """Every model under `root` with the key path where it is written, depth first; the
    models in `stop` are not entered (another section documents them)."""
    yield root, path
    if root in stop:
        return
    for name, field in root.model_fields.items():
        key = field.alias or name
        for inner, suffix in _nested(field.annotation):
            sub = f"{path}.{key}{suffix}" if path else f"{key}{suffix}"
            yield from _models(inner, sub, stop)


def _nested(annotation: Any, suffix: str = "") -> Iterator[tuple[type[BaseModel], str]]:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        yield from _nested(args[0], suffix)
    elif origin in (typing.Union, types.UnionType):
        for a in args:
            yield from _nested(a, suffix)
    elif origin in (tuple, list):
        yield from _nested(args[0], suffix + "[]")
    elif origin is dict:
        yield from _nested(args[1], suffix + ".<key>")
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation, suffix


def field_doc(docs: dict[str, str], model: type[BaseModel], key: str) -> str | None:
    """The description of `key`, from the model or the first base class that has one."""
    for cls in model.__mro__:
        text = docs.get(f"{cls.__name__}.{key}")
        if text is not None:
            return text
    return None


def documented_fields(root: type[BaseModel]) -> list[tuple[type[BaseModel], str]]:
    """(model, key) of every field under `root`: what field_docs must describe."""
    seen: dict[type[BaseModel], None] = {}
    for model, _ in _models(root, ""):
        seen.setdefault(model)
    return [(m, f.alias or n) for m in seen for n, f in m.model_fields.items()]


def _anchor(title: str) -> str:
    return re.sub(r"[^a-z0-9 -]", "", title.lower()).replace(" ", "-")


def _tables(
    root: type[BaseModel],
    docs: dict[str, str],
    top_title: str,
    defaults: dict[str, str] | None = None,
    elsewhere: dict[type[BaseModel], tuple[str, str]] | None = None,
    level: str = "###",
) -> list[str]:
    """A section per model: its keys, their types, defaults and meaning. A model in
    `elsewhere` gets no section here, only a link to the anchor given."""
    defaults = defaults or {}
    elsewhere = elsewhere or {}
    places: dict[type[BaseModel], list[str]] = {}
    for model, path in _models(root, "", frozenset(elsewhere)):
        places.setdefault(model, []).append(path)
    titles = {m: f"`{paths[0]}`" if paths[0] else top_title for m, paths in places.items()}

    def link(model: type[BaseModel]) -> str:
        if model in elsewhere:
            text, anchor = elsewhere[model]
            return f"mapping: [{text}]({anchor})"
        return f"mapping: [{titles[model].strip('`')}](#{_anchor(titles[model])})"

    lines: list[str] = []
    for model, paths in places.items():
        if model in elsewhere:
            continue
        lines += ["", f"{level} {titles[model]}", ""]
        if len(paths) > 1:
            lines += ["Also at " + ", ".join(f"`{p}`" for p in paths[1:]) + ".", ""]
        lines += ["| key | type | default | what it is |", "|---|---|---|---|"]
        long_defaults = []
        for name, field in model.model_fields.items():
            key = field.alias or name
            text = field_doc(docs, model, key) or ""
            default = default_text(field, field_doc(defaults, model, key))
            if default == "see below":
                long_defaults.append((key, field.default))
            kind = field_type(field, link)
            cells = [f"`{key}`", kind, default, text]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        for key, value in long_defaults:
            plain = json.loads(json.dumps(value))  # tuples as lists, for YAML
            dumped = yaml.safe_dump(plain, sort_keys=False).rstrip("\n")
            lines += ["", f"Default of `{key}`:", "", "```yaml", dumped, "```"]
    return lines


def stack_keys() -> str:
    lines = _tables(FleetSpec, FIELD_DOCS, f"Top level: `{PROJECT}:KEY`", FIELD_DEFAULTS)
    return "\n".join(lines).lstrip("\n") + "\n"


def policy_tables() -> str:
    lines = _tables(PolicySpec, CONTROLLER_DOCS, "`spec`")
    return "\n".join(lines).lstrip("\n") + "\n"


def settings_tables() -> str:
    # defaultPolicy is a DispatchPolicy's spec: documented once, above it on the page.
    lines = _tables(
        SettingsFile,
        CONTROLLER_DOCS,
        "Settings keys",
        elsewhere={PolicySpec: ("a DispatchPolicy's spec", "#spec")},
        level="####",
    )
    return "\n".join(lines).lstrip("\n") + "\n"


def commands_table(parser: argparse.ArgumentParser) -> str:
    rows = ["| command | what it does | options |", "|---|---|---|"]

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if not isinstance(action, argparse._SubParsersAction):
                continue
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                if any(isinstance(a, argparse._SubParsersAction) for a in sub._actions):
                    walk(sub, f"{path} {name}")
                    continue
                options = [
                    a.option_strings[-1]
                    for a in sub._actions
                    if a.option_strings
                    and a.help != argparse.SUPPRESS
                    and a.option_strings[-1] not in ("--help", "--debug", "--quiet", "--no-color")
                ]
                positionals = [
                    a.metavar or a.dest
                    for a in sub._actions
                    if not a.option_strings and a.help != argparse.SUPPRESS
                ]
                shown = " ".join(f"`{o}`" for o in [*positionals, *options]) or "-"
                rows.append(f"| `{path} {name}` | {helps.get(name, '')} | {shown} |")

    walk(parser, "mkf")
    return "\n".join(rows) + "\n"


REGIONS: dict[str, Callable[[argparse.ArgumentParser], str]] = {
    "stack-keys": lambda _: stack_keys(),
    "dispatch-policy": lambda _: policy_tables(),
    "settings": lambda _: settings_tables(),
    "commands": commands_table,
}


def fill_regions(text: str, source: Path, parser: argparse.ArgumentParser) -> str:
    """`text` with every generated region made again; a region of unknown name is an error.
    `parser`: mkf's, for the command table."""

    def fill(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in REGIONS:
            raise ValueError(f"{source}: unknown generated region '{name}'")
        return f"{match.group(1)}{REGIONS[name](parser)}{match.group(4)}"

    return REGION.sub(fill, text)


def generated_pages(parser: argparse.ArgumentParser) -> dict[Path, str]:
    """Each generated page and what it should hold (`parser`: mkf's), and the fleet's
    diagram drawn from the dev stack's rendered objects (components/cli/diagram.py)."""
    from components.cli.diagram import SVG, diagram_text

    pages = {page: fill_regions(page.read_text(), page, parser) for page in PAGES}
    return {**pages, SVG: diagram_text()}
