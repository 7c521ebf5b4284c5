"""What the controller's typed inputs (its settings file, DispatchPolicy specs) share: the
pydantic base model, constrained name types, and pydantic's errors turned into one line per
mistake, naming the key, what is wrong with it and how to fix it."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, StringConstraints, ValidationError
from pydantic.alias_generators import to_camel

# Kubernetes' own rules (k8s.io/apimachinery/pkg/util/validation/validation.go):
# (pydantic matches patterns with Rust regex, where `$` is the very end: "w1\n" fails)
# a DNS-1123 label (namespaces), a DNS-1123 subdomain (most object names) and a qualified
# name (label keys: an optional DNS subdomain prefix and a 63-character name).
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = rf"{_LABEL}(\.{_LABEL})*"
_QUALIFIED = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"

DnsLabel = Annotated[str, StringConstraints(max_length=63, pattern=rf"^{_LABEL}$")]
DnsSubdomain = Annotated[str, StringConstraints(max_length=253, pattern=rf"^{_SUBDOMAIN}$")]


def label_key(key: str) -> str:
    prefix, slash, name = key.rpartition("/")
    if slash and (len(prefix) > 253 or not re.fullmatch(_SUBDOMAIN, prefix)):
        raise ValueError(f"the prefix '{prefix}' is not a DNS subdomain")
    if len(name) > 63 or not re.fullmatch(_QUALIFIED, name):
        raise ValueError(f"'{name}' is not a label name (letters, digits, '-', '_', '.')")
    return key


LabelKey = Annotated[str, AfterValidator(label_key)]
# apimachinery IsValidLabelValue: empty, or at most 63 characters of the name syntax.
LABEL_VALUE_PATTERN = rf"^({_QUALIFIED})?$"
LabelValue = Annotated[str, StringConstraints(max_length=63, pattern=LABEL_VALUE_PATTERN)]

# The same rules as patterns and CEL for a CRD schema, so the API server refuses exactly
# what the controller would (controller/policy_api.py). A label key in one regular
# expression: the name's 63 characters bounded by the repetition, the prefix's 253 by a
# second expression (CEL's RE2 has no look-ahead).
SUBDOMAIN_PATTERN = rf"^{_SUBDOMAIN}$"
LABEL_PATTERN = rf"^{_LABEL}$"
LABEL_KEY_PATTERN = rf"^({_SUBDOMAIN}/)?([A-Za-z0-9][-A-Za-z0-9_.]{{0,61}})?[A-Za-z0-9]$"
LABEL_KEY_PREFIX_PATTERN = r"^[^/]{1,253}/"

# What a value of each kind should look like, said in the fix when one is wrong.
NAMESPACE = "a namespace name: lowercase letters, digits and '-', at most 63 characters"
OBJECT_NAME = "an object name: lowercase letters, digits, '-' and '.', at most 253 characters"


class Strict(BaseModel):
    """Keys as the user writes them (camelCase), Python attributes in snake_case; no type
    coercion (the string "false" is not a boolean, the string "30" not a number) and no
    unknown keys: a typo is an error, never a setting silently ignored."""

    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
    )


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    # Sorted, so that ties between equally close names always resolve the same way.
    match = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f"did you mean '{match[0]}'?" if match else ""


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class that holds the key at `loc` (for the keys it knows), if any."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        field = current.model_fields.get(_attribute(current, part)) if current else None
        if field is None:
            return None
        current = _inner_model(field.annotation)
    return current


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _attribute(model: type[BaseModel], key: str) -> str:
    for name, field in model.model_fields.items():
        if key in (name, field.alias):
            return name
    return key


def keys_of(model: type[BaseModel]) -> list[str]:
    return [f.alias or n for n, f in model.model_fields.items()]


def _path(loc: tuple[Any, ...], prefix: str) -> str:
    text = prefix
    for i, part in enumerate(loc):
        if isinstance(part, int):
            text += f"[{part}]"
        elif part == "[key]" or (i + 1 < len(loc) and loc[i + 1] == "[key]"):
            continue  # a mapping's key: the message names it
        else:
            text += f".{part}" if text else str(part)
    return text or "(top level)"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# pydantic's wording where a reader needs other words.
_MESSAGES = {
    "string_pattern_mismatch": "not a valid name",
    "model_type": "should be a mapping (key: value lines), not a {kind}",
    "dict_type": "should be a mapping (key: value lines), not a {kind}",
}


def problems(
    exc: ValidationError,
    model: type[BaseModel],
    prefix: str = "",
    fixes: Mapping[str, str] | None = None,
) -> list[str]:
    """One line per mistake: "<key path>: <what is wrong>; fix: <how>". `fixes` maps a key
    to what a right value looks like; a mistake deeper down (a list item, a mapping's key
    or value) gets the fix of the nearest key above it that has one."""
    fixes = fixes or {}
    lines = []
    for error in exc.errors(include_url=False):
        loc = tuple(error["loc"])
        where = _path(loc, prefix)
        named = [p for p in loc if isinstance(p, str) and p in fixes]
        key = named[-1] if named else ""
        if error["type"] == "extra_forbidden":
            known = keys_of(_model_at(model, loc[:-1]) or model)
            hint = did_you_mean(str(loc[-1]), known)
            lines.append(
                f"{where}: unknown key{' (' + hint + ')' if hint else ''}; "
                f"fix: remove it or use one of {', '.join(known)}"
            )
            continue
        if error["type"] == "missing":
            want = fixes.get(str(loc[-1]), "a value")
            lines.append(f"{where}: required and missing; fix: set {loc[-1]} to {want}")
            continue
        if error["type"] in _MESSAGES:
            message = _MESSAGES[error["type"]].format(kind=type(error["input"]).__name__)
        else:
            message = str(error["msg"]).removeprefix("Value error, ")
        message = message[0].lower() + message[1:]
        if not loc and error["type"] == "value_error":  # a rule across several keys
            lines.append(f"{where}: {message}; fix: change one of the values it names")
            continue
        if key:
            fix = f"set {key} to {fixes[key]}"
        elif error["type"] in ("model_type", "dict_type"):
            fix = "write it as a mapping"
        else:
            fix = "correct the value as the message says"
        lines.append(f"{where}: {_shown(error['input'])} is refused: {message}; fix: {fix}")
    return lines
