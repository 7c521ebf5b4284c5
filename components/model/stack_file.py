"""Where a stack's config comes from: `pulumi.Config` under the engine, or the stack file
itself (working tree or a git revision) for the offline tools. Both end in
checks/load.py's load_checked, which turns the config into a checked FleetSpec."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from components.model import stack_yaml
from components.model.problems import FleetConfigError, Problem, did_you_mean, key_path
from components.model.project import project_root
from components.model.spec import PROJECT, TOP_LEVEL_KEYS


def stacks_dir() -> Path:
    """The stacks/ folder of the project a command acts on (components/model/project.py)."""
    return project_root() / "stacks"


def stack_path(stack: str) -> Path:
    return stacks_dir() / f"Pulumi.{stack}.yaml"


def stack_name_of(path: str) -> str:
    name = Path(path.split(":", 1)[-1]).name
    if name.startswith("Pulumi.") and name.endswith(".yaml"):
        return name[len("Pulumi.") : -len(".yaml")]
    return Path(name).stem


class UnknownRevision(FileNotFoundError):
    """The git revision of a REV:path does not exist here: the fix is the revision, not the
    stack's name."""

    def __init__(self, message: str, rev: str) -> None:
        super().__init__(message)
        self.rev = rev


class NotInRevision(FileNotFoundError):
    """The revision exists but holds no such file: a stack added since."""


def read_text(location: str, repo: Path | None = None) -> str:
    """A stack file's text: a path, or REV:path for the file at a git revision of `repo`
    (this checkout by default). At most MAX_BYTES + 1 bytes are read from a file, so that
    an oversized one is refused without reading it whole."""
    path = Path(location)
    if path.exists():
        if path.is_dir():
            raise FileNotFoundError(f"{location} is a directory, not a stack file")
        with path.open("rb") as stream:
            return stream.read(stack_yaml.MAX_BYTES + 1).decode("utf-8")
    rev, sep, inner = location.partition(":")
    if not sep or not rev or not inner:
        raise FileNotFoundError(f"{location}: no such stack file")
    if rev.startswith("-"):
        # git would read it as an option (`--output=FILE` writes a file); no revision name
        # starts with "-" (git-check-ref-format(1)).
        raise UnknownRevision(
            f"{rev!r} starts with '-', which git would read as an option: no revision name does",
            rev,
        )
    cwd = repo or project_root()

    def git(*args: str) -> subprocess.CompletedProcess[bytes]:
        try:
            return subprocess.run(["git", *args], capture_output=True, cwd=cwd, check=False)
        except OSError as exc:
            raise FileNotFoundError(f"{location}: cannot run git ({exc})") from None

    result = git("show", "--end-of-options", f"{rev}:{inner}")
    if result.returncode != 0:
        found = git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
        if found.returncode == 0:
            raise NotInRevision(f"{location}: {inner} is not in {rev}")
        reason = result.stderr.decode("utf-8", "replace").strip() or "not found in git"
        raise UnknownRevision(f"{location}: {reason.removeprefix('fatal: ')}", rev)
    return result.stdout.decode("utf-8")


# Keys Pulumi allows at the top of a stack file (besides `config`, all its own).
STACK_FILE_KEYS = ("config", "secretsprovider", "encryptedkey", "encryptionsalt", "environment")
# Config namespaces of the providers this project uses: left to them.
PROVIDER_NAMESPACES = ("kubernetes", "gcp", "aws", "eks", "pulumi")
EXAMPLE_STACK = "stacks/Pulumi.dev.yaml"


@dataclass
class StackText:
    """A stack file read: the project's keys (prefix removed), which of them are secret, and
    the line each config path starts on."""

    config: dict[str, Any]
    secret: frozenset[str]
    lines: dict[str, int] = field(default_factory=dict)
    # Scalars YAML 1.1 reads otherwise than Pulumi (components/model/yaml_v3.py).
    warnings: list[Problem] = field(default_factory=list)


def _config_path(path: stack_yaml.DocPath) -> str | None:
    """("config", "multikueue-fleet:workers", 0, "name") -> "workers[0].name"."""
    if len(path) < 2 or path[0] != "config":
        return None
    namespace, sep, bare = str(path[1]).partition(":")
    if not sep or namespace != PROJECT:
        return None
    out = bare
    for part in path[2:]:
        out = key_path(out, part)
    return out


def _text_problem(p: stack_yaml.TextProblem) -> Problem:
    where = _config_path(p.path)
    if where is None and len(p.path) >= 2 and p.path[0] == "config":
        where = str(p.path[1])
    return Problem(where or "", p.message, p.hint, line=p.line)


def read_stack_text(text: str, source: str = "the stack file") -> StackText:
    """The stack file's project config; FleetConfigError naming every problem of the text
    (YAML, duplicates, size, layout, namespaces) with its line."""
    try:
        doc = stack_yaml.load(text)
    except stack_yaml.StackTextError as exc:
        raise FleetConfigError([_text_problem(p) for p in exc.problems], source) from None
    problems: list[Problem] = []

    def line_of(*path: str | int) -> int | None:
        return doc.lines.get(tuple(path))

    data = doc.data
    if data is None:
        problems.append(
            Problem(
                "",
                "the stack file is empty",
                f"add a `config:` section with {PROJECT}: keys ({EXAMPLE_STACK} is an example)",
                line=1,
            )
        )
        raise FleetConfigError(problems, source)
    if not isinstance(data, Mapping):
        problems.append(
            Problem(
                "",
                f"the stack file must be a mapping with a `config:` section, not a {_kind(data)}",
                f"start the file with `config:` and put the {PROJECT}: keys under it "
                f"({EXAMPLE_STACK} is an example)",
                line=line_of() or 1,
            )
        )
        raise FleetConfigError(problems, source)
    for key in data:
        if str(key) not in STACK_FILE_KEYS:
            problems.append(
                Problem(
                    str(key),
                    "unknown top-level key of a stack file",
                    f"{did_you_mean(str(key), STACK_FILE_KEYS)}a stack file holds "
                    f"{', '.join(STACK_FILE_KEYS)}; this project's keys go under `config:`",
                    line=line_of(str(key)),
                )
            )
    config = data.get("config")
    if "config" not in data and problems:
        raise FleetConfigError(problems, source)  # a misspelt `config:` says it all
    if not isinstance(config, Mapping) or not config:
        if "config" not in data:
            message = "the stack file has no `config:` section"
        elif config is None or config == {}:
            message = "`config:` is empty"
        else:
            message = "`config:` must be a mapping of `namespace:key: value` entries, not a " + (
                _kind(config)
            )
        problems.append(
            Problem(
                "config",
                message,
                f"put the fleet's settings under it as `{PROJECT}:KEY: value` entries "
                f"({EXAMPLE_STACK} is an example)",
                line=line_of("config") or 1,
            )
        )
        raise FleetConfigError(problems, source)
    out: dict[str, Any] = {}
    secret: set[str] = set()
    for raw_key, value in config.items():
        key = str(raw_key)
        namespace, sep, bare = key.partition(":")
        line = line_of("config", key)
        if not sep:
            problems.append(
                Problem(
                    key,
                    "a config key needs a namespace (Pulumi refuses keys without one)",
                    f"write it as `{PROJECT}:{key}`",
                    line=line,
                )
            )
            continue
        if namespace != PROJECT:
            close = did_you_mean(namespace, [PROJECT])
            if namespace not in PROVIDER_NAMESPACES and (close or bare in TOP_LEVEL_KEYS):
                problems.append(
                    Problem(
                        key,
                        f"'{namespace}' is not this project's namespace, so this key would "
                        "be ignored and the fleet built without it",
                        f"did you mean '{PROJECT}:{bare}'? rename the key to it",
                        line=line,
                    )
                )
            continue  # a provider's key (kubernetes:, gcp:, ...): left to it
        if value is None:
            # The Pulumi CLI hands a key with no value to the program as "" (v3.274.1: 'No
            # value for configuration key ... is currently treated as an empty string').
            value = ""
        out[bare] = value
        if (isinstance(value, Mapping) and set(value) == {"secure"}) or _has_secure(value):
            secret.add(bare)
    if not out and not problems:
        problems.append(
            Problem(
                "config",
                f"`config:` has no {PROJECT}: keys, so the stack would be the default fleet "
                "without saying so",
                f"add the fleet's settings as `{PROJECT}:KEY: value` entries "
                f"({EXAMPLE_STACK} is an example)",
                line=line_of("config"),
            )
        )
    if problems:
        raise FleetConfigError(problems, source)
    lines = {}
    for path, line in doc.lines.items():
        where = _config_path(path)
        if where is not None:
            lines[where] = line
    warnings = [replace(_text_problem(p), severity="warning") for p in doc.divergent]
    return StackText(out, frozenset(secret), lines, warnings)


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    return type(value).__name__


def parse_stack_text(
    text: str, source: str = "the stack file"
) -> tuple[dict[str, Any], frozenset[str]]:
    """The project's keys (prefix removed) and which of them are secret. Other namespaces
    (kubernetes:, gcp:, ...) belong to providers and are left to them."""
    read = read_stack_text(text, source)
    return read.config, read.secret


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


def with_lines(problems: list[Problem], lines: Mapping[str, int]) -> list[Problem]:
    """Each problem with the line of its config path (or of the nearest enclosing one)."""
    if not lines:
        return problems
    out = []
    for p in problems:
        path = p.path
        while path and path not in lines:
            cut = max(path.rfind("."), path.rfind("["))
            path = path[:cut] if cut > 0 else ""
        line = lines.get(path) if path else None
        out.append(replace(p, line=line) if line and p.line is None else p)
    return out


def stack_names() -> list[str]:
    return sorted(stack_name_of(str(p)) for p in stacks_dir().glob("Pulumi.*.yaml"))
