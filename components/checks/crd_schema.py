"""Custom resources checked the way a kube-apiserver checks them, offline.

Given CustomResourceDefinitions (Kueue's real ones from its release manifest, the
ClusterProfile CRD, the dispatcher's own), an object is:
- pruned as a structural schema prunes it: unknown fields dropped unless the schema keeps
  them (`x-kubernetes-preserve-unknown-fields`, `additionalProperties`), and nulls dropped
  where the field is not nullable (k8s.io/apiextensions-apiserver, tag v0.32.0,
  pkg/apiserver/schema/pruning/algorithm.go and pkg/apiserver/schema/defaulting/prunenulls.go);
- defaulted from `default` after pruning (pkg/apiserver/schema/defaulting/algorithm.go);
- validated against the OpenAPI v3 value rules (type, enum, required, pattern, formats,
  lengths, bounds, list types) and the `x-kubernetes-validations` CEL rules, with `oldSelf`
  bound for transition rules on update (pkg/apiserver/schema/cel/validation.go: a transition
  rule runs only where the old object has a value at the same, correlatable, path).

CEL is evaluated with cel-python. A rule that calls a function cel-python does not have
(the Kubernetes CEL libraries: quantity, format, ...) is reported as "unchecked rule", never
skipped silently.

cached_crds and schema_problems run this on every object a fleet writes, against the
pinned releases' CRDs once a deploy has cached them (offline: nothing is fetched here).
"""

from __future__ import annotations

import copy
import datetime
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

import re2

from components.model.problems import Problem
from components.model.spec import FleetSpec
from components.model.versions import clusterprofile_crd_bundle, kueue_bundle
from components.objects.fleet import build_fleet, object_key
from components.objects.manifests import documents
from components.upstream.releases import cached

Schema = Mapping[str, Any]

# The ObjectMeta fields a custom resource keeps; the server owns their validation, so the
# CRD schema never describes them (apiextensions-apiserver pruning treats metadata apart).
_ROOT_KEPT = ("apiVersion", "kind", "metadata")
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_UNKNOWN_FUNCTION = re.compile(r"undeclared reference to '([^']+)'")


def _crd_versions(crd: Mapping[str, Any]) -> Iterable[tuple[str, str, Schema, bool]]:
    spec = crd.get("spec") or {}
    group = spec.get("group", "")
    kind = (spec.get("names") or {}).get("kind", "")
    for version in spec.get("versions") or []:
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if schema is None or not version.get("served", True):
            continue
        has_status = "status" in ((version.get("subresources") or {}) or {})
        yield f"{group}/{version['name']}", kind, schema, has_status


class CrdSchemas:
    """The schemas of a set of CRDs, by (apiVersion, kind)."""

    def __init__(self, schemas: Mapping[tuple[str, str], tuple[Schema, bool]]) -> None:
        self._schemas = dict(schemas)

    @classmethod
    def from_documents(cls, docs: Iterable[Mapping[str, Any]]) -> CrdSchemas:
        """Every served version of every CustomResourceDefinition among `docs` (other
        documents, as in a release's whole install manifest, are passed over)."""
        found: dict[tuple[str, str], tuple[Schema, bool]] = {}
        for doc in docs:
            if not isinstance(doc, Mapping) or doc.get("kind") != "CustomResourceDefinition":
                continue
            for api_version, kind, schema, has_status in _crd_versions(doc):
                found[(api_version, kind)] = (schema, has_status)
        return cls(found)

    def merged(self, other: CrdSchemas) -> CrdSchemas:
        return CrdSchemas({**self._schemas, **other._schemas})

    def kinds(self) -> list[tuple[str, str]]:
        return sorted(self._schemas)

    def knows(self, api_version: str, kind: str) -> bool:
        return (api_version, kind) in self._schemas

    def schema(self, api_version: str, kind: str) -> Schema:
        return self._schemas[(api_version, kind)][0]

    def has_status_subresource(self, api_version: str, kind: str) -> bool:
        return self._schemas[(api_version, kind)][1]

    def _schema_of(self, obj: Mapping[str, Any]) -> Schema:
        key = (str(obj.get("apiVersion")), str(obj.get("kind")))
        if key not in self._schemas:
            raise KeyError(f"no CRD for {key[0]} {key[1]}")
        return self._schemas[key][0]

    def prune(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """`obj` as the API server stores it: fields the schema does not declare removed."""
        schema = self._schema_of(obj)
        out = {k: copy.deepcopy(v) for k, v in obj.items() if k in _ROOT_KEPT}
        rest = {k: v for k, v in obj.items() if k not in _ROOT_KEPT}
        pruned = _prune(rest, schema)
        out.update(pruned if isinstance(pruned, dict) else {})
        return out

    def pruned_paths(self, obj: Mapping[str, Any]) -> list[str]:
        """The field paths pruning would drop from `obj` (what a server silently loses)."""
        schema = self._schema_of(obj)
        lost: list[str] = []
        _prune({k: v for k, v in obj.items() if k not in _ROOT_KEPT}, schema, "", lost.append)
        return lost

    def with_defaults(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """`obj` pruned and defaulted, as the API server stores a create or an update."""
        schema = self._schema_of(obj)
        out = self.prune(obj)
        _default(out, schema)
        return out

    def problems(self, obj: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[str]:
        """What the API server would refuse in `obj` (an update of `old` when given), each
        as "<field path>: <what is wrong>". `obj` is checked as given: call with_defaults
        first to check what the server would store."""
        schema = self._schema_of(obj)
        found: list[str] = []
        meta = obj.get("metadata")
        if not isinstance(meta, Mapping) or not (meta.get("name") or meta.get("generateName")):
            found.append("metadata.name: Required value")
        body = _as_cel_root(obj)
        old_body = _as_cel_root(old) if old is not None else None
        _validate(body, schema, "", old_body, old is not None, found)
        return found


def _as_cel_root(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object as CEL rules see it at the root: metadata reduced to name and
    generateName (apiextensions-apiserver pkg/apiserver/schema/cel/model)."""
    body = {k: v for k, v in obj.items() if k != "metadata"}
    meta = obj.get("metadata") or {}
    body["metadata"] = {k: v for k, v in meta.items() if k in ("name", "generateName")}
    return body


# --- pruning and defaulting --------------------------------------------------------------


def _keeps_unknown(schema: Schema) -> bool:
    return bool(schema.get("x-kubernetes-preserve-unknown-fields"))


def _prune(value: Any, schema: Schema, path: str = "", lost: Any = None) -> Any:
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        embedded = schema.get("x-kubernetes-embedded-resource")
        out: dict[str, Any] = {}
        for key, item in value.items():
            child = f"{path}.{key}" if path else key
            sub: Schema | None = None
            if props is not None and key in props:
                sub = props[key]
            elif isinstance(extra, Mapping):
                sub = extra
            elif extra is True or _keeps_unknown(schema) or (embedded and key in _ROOT_KEPT):
                out[key] = copy.deepcopy(item)
                continue
            if sub is None:
                if lost is not None:
                    lost(child)
                continue
            if item is None and not sub.get("nullable"):
                # A null where the schema does not allow one is dropped before defaulting.
                if lost is not None and "default" not in sub:
                    lost(child)
                continue
            out[key] = _prune(item, sub, child, lost)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [_prune(v, schema["items"], f"{path}[{i}]", lost) for i, v in enumerate(value)]
    return copy.deepcopy(value)


def _default(value: Any, schema: Schema) -> None:
    if isinstance(value, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                _default(value[key], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            for key, item in value.items():
                if key not in (schema.get("properties") or {}):
                    _default(item, extra)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for item in value:
            _default(item, schema["items"])


# --- validation --------------------------------------------------------------------------


def _type_ok(value: Any, schema: Schema) -> bool:
    if schema.get("x-kubernetes-int-or-string"):
        return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)
    wanted = schema.get("type")
    if wanted is None:
        return True
    return {
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
    }.get(wanted, lambda v: True)(value)


def _format_problem(value: Any, fmt: str | None) -> str | None:
    if fmt is None:
        return None
    if fmt in ("int32", "int64") and isinstance(value, int):
        low, high = _INT32 if fmt == "int32" else _INT64
        return None if low <= value <= high else f"must fit in {fmt}"
    if fmt == "date-time" and isinstance(value, str):
        try:
            datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return "must be an RFC 3339 date-time"
    return None


def _pattern_matches(pattern: str, value: str) -> bool:
    """A schema `pattern` matched as the API server's Go regexp (RE2) matches it, through
    the RE2 binding cel-python brings: in RE2 `$` is the end of the text, where Python's
    `$` also matches before a final newline ("cq\n" would pass), and inline flags may
    follow `^` (Kueue's AdmissionCheck parameters use `^(?i)...`)."""
    return re2.search(pattern, value) is not None


def _scalar_problems(value: Any, schema: Schema) -> list[str]:
    out: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in schema["enum"])
        out.append(f"Unsupported value: {value!r}: supported values: {allowed}")
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            out.append(f"Too long: may not be more than {schema['maxLength']} characters")
        if "minLength" in schema and len(value) < schema["minLength"]:
            out.append(f"Invalid value: {value!r}: at least {schema['minLength']} characters")
        if "pattern" in schema and not _pattern_matches(schema["pattern"], value):
            out.append(f"Invalid value: {value!r}: should match '{schema['pattern']}'")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema:
            low = schema["minimum"]
            if value < low or (schema.get("exclusiveMinimum") and value == low):
                out.append(f"Invalid value: {value}: should be greater than or equal to {low}")
        if "maximum" in schema:
            high = schema["maximum"]
            if value > high or (schema.get("exclusiveMaximum") and value == high):
                out.append(f"Invalid value: {value}: should be less than or equal to {high}")
        if schema.get("multipleOf") and value % schema["multipleOf"]:
            out.append(f"Invalid value: {value}: should be a multiple of {schema['multipleOf']}")
    fmt = _format_problem(value, schema.get("format"))
    if fmt:
        out.append(f"Invalid value: {value!r}: {fmt}")
    return out


def _list_problems(value: list[Any], schema: Schema, where: str) -> list[str]:
    out: list[str] = []
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        out.append(f"Too many: {len(value)}: must have at most {schema['maxItems']} items")
    if "minItems" in schema and len(value) < schema["minItems"]:
        # The API server's wording (kube-openapi's TooFewItems), path included.
        out.append(
            f"Invalid value: {len(value)}: {where} in body should have at least "
            f"{schema['minItems']} items"
        )
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "set" or schema.get("uniqueItems"):
        seen: list[Any] = []
        for item in value:
            if item in seen:
                out.append(f"Duplicate value: {item!r}")
            seen.append(item)
    elif list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        seen_keys: set[tuple[Any, ...]] = set()
        for item in value:
            if not isinstance(item, Mapping):
                continue
            key = tuple(item.get(k) for k in keys)
            if key in seen_keys:
                out.append(f"Duplicate value: {dict(zip(keys, key, strict=True))!r}")
            seen_keys.add(key)
    return out


def _old_item(old: Any, item: Any, index: int, schema: Schema) -> Any:
    """The old list item that corresponds to `item`, only where Kubernetes correlates list
    items: by key in a `map` list; never in `atomic` or `set` lists."""
    if schema.get("x-kubernetes-list-type") != "map" or not isinstance(old, list):
        return None
    keys = schema.get("x-kubernetes-list-map-keys") or []
    if not isinstance(item, Mapping):
        return None
    wanted = tuple(item.get(k) for k in keys)
    for candidate in old:
        if isinstance(candidate, Mapping) and tuple(candidate.get(k) for k in keys) == wanted:
            return candidate
    return None


def _validate(
    value: Any,
    schema: Schema,
    path: str,
    old: Any,
    updating: bool,
    found: list[str],
) -> None:
    where = path or "<root>"
    if value is None:
        if not schema.get("nullable"):
            found.append(f"{where}: Invalid value: null")
        return
    if not _type_ok(value, schema):
        wanted = "integer or string" if schema.get("x-kubernetes-int-or-string") else None
        found.append(
            f"{where}: Invalid value: {type(value).__name__}: must be of type "
            f"{wanted or schema.get('type')}"
        )
        return
    found.extend(f"{where}: {p}" for p in _scalar_problems(value, schema))
    for combinator in ("allOf", "anyOf", "oneOf", "not"):
        if combinator in schema:
            _combinator(combinator, value, schema[combinator], where, found)
    if isinstance(value, dict):
        for key in schema.get("required") or []:
            if key not in value:
                found.append(f"{path + '.' if path else ''}{key}: Required value")
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            found.append(
                f"{where}: Too many: {len(value)}: must have at most "
                f"{schema['maxProperties']} items"
            )
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            sub = (
                props.get(key) if key in props else (extra if isinstance(extra, Mapping) else None)
            )
            if sub is None:
                continue
            old_item = old.get(key) if isinstance(old, Mapping) else None
            child = f"{path}.{key}" if path else key
            if isinstance(extra, Mapping) and key not in props:
                child = f"{path}[{key}]"
            _validate(item, sub, child, old_item, updating, found)
    elif isinstance(value, list):
        found.extend(f"{where}: {p}" for p in _list_problems(value, schema, where))
        items = schema.get("items")
        if isinstance(items, Mapping):
            for index, item in enumerate(value):
                old_item = _old_item(old, item, index, schema)
                _validate(item, items, f"{path}[{index}]", old_item, updating, found)
    for rule in schema.get("x-kubernetes-validations") or []:
        problem = _rule_problem(rule, value, old, updating)
        if problem:
            at = rule.get("fieldPath")
            found.append(f"{path}{at or ''}: {problem}" if (path or at) else f"<root>: {problem}")


def _combinator(name: str, value: Any, sub: Any, where: str, found: list[str]) -> None:
    def fails(s: Schema) -> list[str]:
        out: list[str] = []
        _validate(value, {**s, "x-kubernetes-validations": []}, "", None, False, out)
        return out

    if name == "allOf":
        for s in sub:
            found.extend(f"{where}: {p.split(': ', 1)[1]}" for p in fails(s))
    elif name == "anyOf" and not any(not fails(s) for s in sub):
        found.append(f"{where}: Invalid value: matches none of the allowed forms")
    elif name == "oneOf" and sum(1 for s in sub if not fails(s)) != 1:
        found.append(f"{where}: Invalid value: must match exactly one of the allowed forms")
    elif name == "not" and not fails(sub):
        found.append(f"{where}: Invalid value: matches a forbidden form")


@lru_cache(maxsize=1)
def _celpy() -> Any:
    """cel-python, imported at the first CEL rule checked: a quarter of a second at every
    command's start that most commands never need."""
    import celpy

    return celpy


@lru_cache(maxsize=512)
def _program(rule: str) -> Any:
    env = _celpy().Environment()
    return env.program(env.compile(rule))


def _rule_problem(rule: Mapping[str, Any], value: Any, old: Any, updating: bool) -> str | None:
    text = rule["rule"]
    transition = re.search(r"\boldSelf\b", text) is not None
    if transition and (not updating or old is None) and not rule.get("optionalOldSelf"):
        return None  # transition rules run only on update, where an old value correlates
    celpy = _celpy()
    activation: dict[str, Any] = {"self": celpy.json_to_cel(value)}
    if transition and old is not None:
        activation["oldSelf"] = celpy.json_to_cel(old)
    try:
        result = _program(text).evaluate(activation)
    except Exception as exc:  # noqa: BLE001 (cel-python raises its own assorted types)
        return _eval_failure(text, exc)
    if isinstance(result, celpy.CELEvalError):
        return _eval_failure(text, result)
    if result is True or (isinstance(result, celpy.celtypes.BoolType) and bool(result)):
        return None
    return f"Invalid value: {rule.get('message') or 'failed rule: ' + text}"


def _eval_failure(text: str, error: Any) -> str:
    detail = str(error.args[0]) if getattr(error, "args", None) else str(error)
    unknown = _UNKNOWN_FUNCTION.search(detail)
    if unknown:
        return f"unchecked rule {text!r}: the CEL engine here has no {unknown.group(1)!r}"
    return f"Invalid value: evaluation error in rule {text!r}: {detail}"


def cached_crds(spec: FleetSpec) -> CrdSchemas | None:
    """The pinned Kueue release's CRDs (and the ClusterProfile CRD) from the download cache,
    or None when no deploy has cached the Kueue release yet: offline, nothing is fetched."""
    text = cached(kueue_bundle(spec.kueue.version).url)
    if text is None:
        return None
    docs = documents(text)
    profiles = cached(clusterprofile_crd_bundle().url)
    if profiles is not None:
        docs += documents(profiles)
    return CrdSchemas.from_documents(docs)


def schema_problems(spec: FleetSpec, schemas: CrdSchemas | None) -> list[Problem]:
    """Every object the fleet writes for a kind `schemas` (or the fleet's own CRDs) knows,
    checked as the API server would: OpenAPI v3 value rules, CEL rules, and fields the
    server would silently drop. A CEL rule the checker cannot evaluate is a warning."""
    if schemas is None:
        return []
    problems = []
    for cluster in build_fleet(spec):
        own = CrdSchemas.from_documents(
            o for o in cluster.objects if o["kind"] == "CustomResourceDefinition"
        )
        known = schemas.merged(own)
        for obj in cluster.objects:
            if not known.knows(obj["apiVersion"], obj["kind"]):
                continue
            where = f"{cluster.directory}: {object_key(obj)}"
            for text in known.problems(obj):
                unchecked = text.startswith("unchecked rule")
                problems.append(
                    Problem(
                        where,
                        text,
                        ""
                        if unchecked
                        else "the API server would refuse this object: "
                        "report it as a multikueue-fleet bug",
                        "warning" if unchecked else "error",
                    )
                )
            for path in known.pruned_paths(obj):
                problems.append(
                    Problem(
                        where,
                        f"{path}: not in the {obj['kind']} schema, the server would drop it",
                        "report it as a multikueue-fleet bug",
                    )
                )
    return problems
