"""Plain YAML scalars read the way Pulumi reads a stack file.

Pulumi decodes stack files with gopkg.in/yaml.v3 into untyped values (pulumi sdk v3.274.1
go/common/encoding/marshal.go; go/common/resource/config/object.go `UnmarshalYAML`), and
yaml.v3 v3.0.1 resolves a plain scalar as resolve.go `resolve` says: YAML 1.2's booleans
(true/false in three spellings; yes, no, on, off stay strings), 1.2's nulls, integers as Go's
strconv.ParseInt with base 0 once underscores are removed (0x, 0o, 0b and 1.1's leading-zero
octal), floats, and timestamps, which Pulumi passes on as Go's time.String(). PyYAML reads
YAML 1.1, where yes/no/on/off are booleans and 1:30 is 90: the project reads stack files with
PulumiLoader so that `validate` sees what the program will, and notes each scalar the two
versions of YAML read differently (`divergence`) so that it can say so with the fix.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, NamedTuple

import yaml

BOOL = "tag:yaml.org,2002:bool"
NULL = "tag:yaml.org,2002:null"
INT = "tag:yaml.org,2002:int"
FLOAT = "tag:yaml.org,2002:float"
STR = "tag:yaml.org,2002:str"
MERGE = "tag:yaml.org,2002:merge"
TIMESTAMP = "tag:yaml.org,2002:timestamp"

# resolve.go resolveMapList
_MAP: dict[str, tuple[str, Any]] = {
    **{s: (BOOL, True) for s in ("true", "True", "TRUE")},
    **{s: (BOOL, False) for s in ("false", "False", "FALSE")},
    **{s: (NULL, None) for s in ("", "~", "null", "Null", "NULL")},
    **{s: (FLOAT, math.nan) for s in (".nan", ".NaN", ".NAN")},
    **{s: (FLOAT, math.inf) for s in (".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF")},
    **{s: (FLOAT, -math.inf) for s in ("-.inf", "-.Inf", "-.INF")},
    "<<": (MERGE, "<<"),
}
_YAML_STYLE_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
# resolve.go allowedTimestampFormats, as regular expressions (Go's 1-digit fields allowed).
_DATE = r"(\d{4})-(\d{1,2})-(\d{1,2})"
_TIME = r"(\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,9}))?"
_TIMESTAMPS = (
    re.compile(rf"^{_DATE}[Tt]{_TIME}(Z|[-+]\d{{2}}:\d{{2}})$"),
    re.compile(rf"^{_DATE} {_TIME}()$"),
    re.compile(rf"^{_DATE}()()()()()$"),
)
_INT64 = 2**63
_UINT64 = 2**64


def _go_parse_int(text: str) -> int | None:
    """strconv.ParseInt(text, 0, 64), else ParseUint(text, 0, 64): a sign, then 0x, 0o, 0b,
    a leading 0 (octal) or decimal digits."""
    sign, body = 1, text
    if body[:1] in ("+", "-"):
        sign, body = (-1 if body[0] == "-" else 1), body[1:]
    prefix = body[:2].lower()
    if prefix in ("0x", "0o", "0b"):
        base, digits = {"0x": 16, "0o": 8, "0b": 2}[prefix], body[2:]
    elif body.startswith("0") and len(body) > 1:
        base, digits = 8, body[1:]
    else:
        base, digits = 10, body
    if not digits or any(c not in "0123456789abcdef"[:base] for c in digits.lower()):
        return None
    value = sign * int(digits, base)
    if -_INT64 <= value < _INT64 or (sign == 1 and text[:1] != "-" and value < _UINT64):
        return value
    return None


def _timestamp(text: str) -> str | None:
    """The timestamp as Pulumi passes it on (Go's time.Time String()), or None."""
    for pattern in _TIMESTAMPS:
        found = pattern.match(text)
        if not found:
            continue
        year, month, day, hour, minute, second, fraction, zone = found.groups()
        try:
            moment = datetime(
                int(year), int(month), int(day), int(hour or 0), int(minute or 0), int(second or 0)
            )
        except ValueError:
            return None  # time.Parse refuses a day or hour out of range
        if zone and zone != "Z":
            hours, minutes = int(zone[1:3]), int(zone[4:6])
            offset = timedelta(hours=hours, minutes=minutes) * (-1 if zone[0] == "-" else 1)
            tz: timezone = timezone(offset)
            numeric = f"{zone[0]}{zone[1:3]}{zone[4:6]}"
            name = numeric
        else:
            tz, numeric, name = UTC, "+0000", "UTC"
        moment = moment.replace(tzinfo=tz)
        frac = ("." + fraction.rstrip("0")) if fraction and fraction.rstrip("0") else ""
        return f"{moment:%Y-%m-%d %H:%M:%S}{frac} {numeric} {name}"
    return None


def resolve_plain(text: str) -> tuple[str, Any]:
    """The tag and value yaml.v3 gives a plain (unquoted) scalar."""
    if text in _MAP:
        return _MAP[text]
    hint = text[:1]
    if hint == ".":
        if re.fullmatch(r"\.[0-9]+([eE][-+]?[0-9]+)?", text):
            return FLOAT, float(text)
        return STR, text
    if hint and (hint.isdigit() or hint in "+-"):
        stamp = _timestamp(text)
        if stamp is not None:
            return TIMESTAMP, stamp
        plain = text.replace("_", "")
        number = _go_parse_int(plain)
        if number is not None:
            return INT, number
        if _YAML_STYLE_FLOAT.match(plain):
            return FLOAT, float(plain)
    return STR, text


def _number(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _shown(tag: str, value: Any) -> str:
    if tag == STR:
        return f'the text "{value}"'
    if tag == BOOL:
        return f"the boolean {str(value).lower()}"
    if tag == NULL:
        return "null (no value)"
    if tag == TIMESTAMP:
        return f'a date, passed on as "{value}"'
    if tag in (INT, FLOAT):
        return f"the number {_number(value)}"
    return f"{value!r}"


class PulumiLoader(yaml.SafeLoader):
    """PyYAML's safe loader with plain scalars resolved as yaml.v3 resolves them; each plain
    scalar that YAML 1.1 reads otherwise is kept in `divergent` (node id -> Divergence)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.divergent: dict[int, Divergence] = {}

    def compose_scalar_node(self, anchor: Any) -> yaml.ScalarNode:
        node = super().compose_scalar_node(anchor)
        if node.style is None and node.tag in (BOOL, NULL, INT, FLOAT, STR, TIMESTAMP):
            tag, value = resolve_plain(node.value)
            old_tag = yaml.SafeLoader.resolve(self, yaml.ScalarNode, node.value, (True, False))
            old = self._yaml_1_1_value(old_tag, node)
            same_number = {tag, old_tag} <= {INT, FLOAT} and old == value
            if (old_tag, old) != (tag, value) and not same_number:
                self.divergent[id(node)] = Divergence(node.value, tag, value, old_tag, old)
        return node

    def _yaml_1_1_value(self, tag: str, node: yaml.ScalarNode) -> Any:
        construct = yaml.SafeLoader.yaml_constructors.get(tag)
        if tag == STR or construct is None:
            return node.value
        try:
            value = construct(self, node)
        except (ValueError, yaml.YAMLError):
            return node.value
        return str(value) if tag == TIMESTAMP else value

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if kind is yaml.ScalarNode and implicit[0]:
            return resolve_plain(value)[0]
        return super().resolve(kind, value, implicit)


def _construct(loader: PulumiLoader, node: yaml.ScalarNode) -> Any:
    if node.style is None:
        return resolve_plain(node.value)[1]
    # An explicitly tagged quoted scalar (`!!int "12"`): read as yaml.v3 reads its text.
    return resolve_plain(loader.construct_scalar(node))[1]


for _tag in (INT, FLOAT, TIMESTAMP):
    PulumiLoader.add_constructor(_tag, _construct)


class PulumiDumper(yaml.SafeDumper):
    """PyYAML's safe dumper with every string that yaml.v3 would read as something else
    quoted: PyYAML quotes only what YAML 1.1 reads as another type, so `'08'`, `'1e3'` and
    `'0o17'` would go out plain and come back to Pulumi as 8, 1000.0 and 15."""


def _represent_str(dumper: PulumiDumper, data: str) -> yaml.ScalarNode:
    # Without a style the emitter still quotes what YAML 1.1 would not read back as text.
    style = "'" if resolve_plain(data)[0] != STR else None
    return dumper.represent_scalar(STR, data, style=style)


PulumiDumper.add_representer(str, _represent_str)


def dump(data: Any) -> str:
    """YAML that Pulumi (yaml.v3) and PulumiLoader read back as `data`, keys in order."""
    return yaml.dump(data, Dumper=PulumiDumper, sort_keys=False)


class Divergence(NamedTuple):
    """A plain scalar YAML 1.2 (Pulumi) and YAML 1.1 (PyYAML, older tools) read differently."""

    text: str
    tag: str
    value: Any
    old_tag: str
    old_value: Any

    def message(self) -> str:
        return (
            f"{self.text} is {_shown(self.tag, self.value)} to Pulumi (YAML 1.2), but "
            f"{_shown(self.old_tag, self.old_value)} to YAML 1.1 readers"
        )

    def fix(self) -> str:
        quoted = f'quote it ("{self.text}")'
        if self.tag == STR and self.old_tag == BOOL:
            boolean = str(self.old_value).lower()
            return f"{quoted} to mean the text, or write {boolean} for the boolean"
        if self.tag in (INT, FLOAT) and self.old_tag == STR:
            return f"write {_number(self.value)} to mean the number, or {quoted} for the text"
        if self.tag == TIMESTAMP:
            return f"{quoted} to keep the date as written"
        return f"{quoted} to mean the text, so that every YAML reader agrees"
