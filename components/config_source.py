"""Where a stack's config comes from: `pulumi.Config` under the engine, or the stack file
itself (working tree or a git revision) for the offline tools. Both end in load_checked."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from components.problems import FleetConfigError, Problem, errors
from components.spec import PROJECT, TOP_LEVEL_KEYS, FleetSpec, load_spec
from components.validate import validate

STACKS_DIR = Path(__file__).resolve().parent.parent / "stacks"


def stack_path(stack: str) -> Path:
    return STACKS_DIR / f"Pulumi.{stack}.yaml"


def stack_name_of(path: str) -> str:
    name = Path(path.split(":", 1)[-1]).name
    if name.startswith("Pulumi.") and name.endswith(".yaml"):
        return name[len("Pulumi.") : -len(".yaml")]
    return Path(name).stem


def read_text(location: str, repo: Path | None = None) -> str:
    """A stack file's text: a path, or REV:path for the file at a git revision of `repo`
    (this checkout by default)."""
    if Path(location).exists():
        return Path(location).read_text()
    rev, sep, path = location.partition(":")
    if not sep:
        raise FileNotFoundError(f"{location}: no such stack file")
    result = subprocess.run(
        ["git", "show", f"{rev}:{path}"],
        capture_output=True,
        text=True,
        cwd=repo or STACKS_DIR.parent,
        check=False,
    )
    if result.returncode != 0:
        raise FileNotFoundError(f"{location}: {result.stderr.strip() or 'not found in git'}")
    return result.stdout


def parse_stack_text(text: str) -> tuple[dict[str, Any], frozenset[str]]:
    """The project's keys (prefix removed) and which of them are secret. Other namespaces
    (kubernetes:, gcp:, ...) belong to providers and are left to them."""
    doc = yaml.safe_load(text) or {}
    config = doc.get("config") or {}
    out: dict[str, Any] = {}
    secret: set[str] = set()
    for key, value in config.items():
        namespace, _, bare = str(key).partition(":")
        if not bare:
            namespace, bare = PROJECT, namespace
        if namespace != PROJECT:
            continue
        out[bare] = value
        if (isinstance(value, Mapping) and set(value) == {"secure"}) or _has_secure(value):
            secret.add(bare)
    return out, frozenset(secret)


def _has_secure(value: Any) -> bool:
    if isinstance(value, Mapping):
        return "secure" in value or any(_has_secure(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_secure(v) for v in value)
    return False


def from_pulumi_config() -> tuple[dict[str, Any], frozenset[str]]:
    """The same mapping, read through the Pulumi SDK (values arrive decrypted)."""
    import json

    import pulumi
    from pulumi.runtime.config import get_config, is_config_secret

    config = pulumi.Config()
    out: dict[str, Any] = {}
    secret = set()
    for key in TOP_LEVEL_KEYS:
        full = config.full_key(key)
        raw = get_config(full)
        if raw is None:
            continue
        try:
            out[key] = json.loads(raw)
        except (json.JSONDecodeError, TypeError):
            out[key] = raw
        if is_config_secret(full):
            secret.add(key)
    return out, frozenset(secret)


def load_checked(
    config: Mapping[str, Any], stack: str, source: str, secret_keys: frozenset[str] = frozenset()
) -> tuple[FleetSpec, list[Problem]]:
    """Spec and warnings; FleetConfigError listing every error when there is any."""
    spec, problems = load_spec(config, stack, secret_keys)
    problems += validate(spec)
    if errors(problems):
        raise FleetConfigError(problems, source)
    return spec, problems


def load_stack(location: str, repo: Path | None = None) -> tuple[FleetSpec, list[Problem]]:
    config, secret = parse_stack_text(read_text(location, repo))
    return load_checked(config, stack_name_of(location), location, secret)
