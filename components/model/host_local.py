"""This host's settings for a stack, kept beside it and out of git: stacks/local/STACK.yaml.

Which node image a kind cluster boots, which registry mirror its nodes pull through and what
the dispatcher image is built FROM are facts of the machine, not of the fleet: on a machine
that cannot pull images, `python -m kindnode build --for-stack STACK` (scripts/up.sh runs it
there) builds them and writes them here, so the tracked stack file stays as committed. Every
reader of a stack (the Pulumi program, validate, render, diff, the kind pre-flight) applies
the file to each kind cluster of the stack, and the base image to the dispatcher's build when
the stack builds it, with a note that says so; delete the file to use the stack's own.

    # stacks/local/dev.yaml
    kind:
      nodeImage: 127.0.0.1:5001/kindest/node:v1.36.4@sha256:...
      registryMirrors:
        registry.k8s.io: http://mkf-registry:5000
        quay.io: {url: https://mirror.lab:5443, ca: "-----BEGIN CERTIFICATE-----..."}
    dispatcher:
      baseImage: localhost/multikueue-fleet/stand-in/docker.io/library/python:3.11-slim-bookworm
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from components.model import stack_yaml, yaml_v3
from components.model.fieldtypes import Image, RegistryHost
from components.model.problems import FleetConfigError, Problem
from components.model.project import project_root
from components.model.spec import FleetSpec, Mirror, _Model, loc_path

# Set to "off" to read stacks as committed (the test suite does: a contributor's own host
# settings must not change what the tests see).
SWITCH = "MKF_HOST_SETTINGS"
HEADER = (
    "# This host's kind settings for stack {stack}, written by `python -m kindnode build\n"
    "# --for-stack {stack}` (scripts/up.sh runs it where images cannot be pulled). Every kind\n"
    "# cluster of the stack uses them; ignored by git. Delete this file to use the stack's own.\n"
)


class LocalKind(_Model):
    node_image: Image
    # As a stack's own: a URL, or the URL with containerd's host options (a mirror of this
    # host's with a private CA is the common case for them).
    registry_mirrors: dict[RegistryHost, Mirror] = Field(default_factory=dict)


class LocalDispatcher(_Model):
    base_image: Image


class HostSettings(_Model):
    kind: LocalKind
    dispatcher: LocalDispatcher | None = None


def local_path(stack: str, root: Path | None = None) -> Path:
    return (root or project_root()) / "stacks" / "local" / f"{stack}.yaml"


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def read_host_settings(stack: str, root: Path | None = None) -> HostSettings | None:
    """The host's settings for STACK; None when it has none (or they are switched off).
    A file that is not what `kindnode build --for-stack` writes is a FleetConfigError."""
    if os.environ.get(SWITCH, "").lower() == "off":
        return None
    path = local_path(stack, root)
    if not path.is_file():
        return None
    where = _shown(path)
    fix = f"delete it and run `python -m kindnode build --for-stack {stack}` to write it again"
    # Read as the stack files are (YAML 1.2, as Pulumi reads them: components/model/
    # stack_yaml.py), so a value means the same here as it would in the stack file.
    try:
        data = stack_yaml.load(path.read_text()).data
    except (OSError, UnicodeDecodeError) as exc:
        reason = str(exc).splitlines()[0]
        raise FleetConfigError([Problem("", f"cannot read it: {reason}", fix)], where) from None
    except stack_yaml.StackTextError as exc:
        problems = [
            Problem("", f"cannot read it{f' (line {p.line})' if p.line else ''}: {p.message}", fix)
            for p in exc.problems
        ]
        raise FleetConfigError(problems, where) from None
    try:
        return HostSettings.model_validate(data)
    except ValidationError as exc:
        general = (
            f"it holds kind.nodeImage, kind.registryMirrors and dispatcher.baseImage only; {fix}"
        )
        problems = [
            Problem(
                loc_path(tuple(error["loc"])),
                error["msg"],
                # A value's own rule says how to mend it (a mirror's options), and the file
                # can always be written again; the rest is the file's shape.
                f"{own}; or {fix}" if (own := (error.get("ctx") or {}).get("fix")) else general,
            )
            for error in exc.errors(include_url=False)
        ]
        raise FleetConfigError(problems, where) from None


def refuse_foreign(stack: str, root: Path | None = None) -> Path:
    """The path to write STACK's host settings to; FileExistsError when a file this module
    did not write is there (it is the user's: never overwritten)."""
    path = local_path(stack, root)
    if path.exists() and not _ours(path):
        raise FileExistsError(
            f"{_shown(path)} is there and was not written by `kindnode build --for-stack`: "
            "move it away (or delete it) and run again"
        )
    return path


def write_host_settings(
    stack: str,
    node_image: str,
    mirrors: Mapping[str, str],
    root: Path | None = None,
    *,
    dispatcher_base: str | None = None,
) -> Path:
    data: dict[str, Any] = {"kind": {"nodeImage": node_image, "registryMirrors": dict(mirrors)}}
    if dispatcher_base:
        data["dispatcher"] = {"baseImage": dispatcher_base}
    settings = HostSettings.model_validate(data)
    path = refuse_foreign(stack, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = yaml_v3.dump(settings.model_dump(by_alias=True, mode="json", exclude_none=True))
    path.write_text(HEADER.format(stack=stack) + body)
    return path


def _ours(path: Path) -> bool:
    """A file this module wrote (its header's first line), which it may write again."""
    try:
        first = path.read_text().splitlines()[:1]
    except (OSError, UnicodeDecodeError):
        return False
    return first == HEADER.format(stack=path.stem).splitlines()[:1]


def with_host_settings(
    config: Mapping[str, Any], stack: str, root: Path | None = None
) -> tuple[dict[str, Any], list[Problem]]:
    """The stack's config with this host's kind settings on every kind cluster, and a note
    naming the clusters and the file; the config unchanged when the host has none."""
    settings = read_host_settings(stack, root)
    out = dict(config)
    if settings is None:
        return out, []
    out = copy.deepcopy(out)
    if not isinstance(out.get("manager"), dict):
        out["manager"] = {} if out.get("manager") is None else out["manager"]
    if out.get("workers") is None:
        out["workers"] = [dict(w) for w in FleetSpec.model_fields["workers"].default]
    workers = out["workers"] if isinstance(out["workers"], list) else []
    touched = []
    for cluster in [out["manager"], *workers]:
        # A wrong shape is left as it is, for the model to report at its path.
        if not isinstance(cluster, dict) or (cluster.get("provider") or "kind") != "kind":
            continue
        kind = cluster.get("kind")
        if kind is not None and not isinstance(kind, dict):
            continue
        cluster["kind"] = {
            **(kind or {}),
            "nodeImage": settings.kind.node_image,
            "registryMirrors": settings.kind.model_dump(
                by_alias=True, mode="json", exclude_defaults=True
            ).get("registryMirrors", {}),
        }
        touched.append(str(cluster.get("name", "manager")))
    base = settings.dispatcher.base_image if settings.dispatcher else None
    if base and _builds_dispatcher(out):
        out["dispatcher"] = {**(out.get("dispatcher") or {}), "baseImage": base}
    else:
        base = None
    if not touched and not base:
        return dict(config), []
    parts = []
    if touched:
        parts.append(f"the kind node image and registry mirrors of {', '.join(touched)}")
    if base:
        parts.append("the dispatcher image's base")
    note = Problem(
        "",
        f"{' and '.join(parts)} {'are' if touched else 'is'} this host's, "
        f"from {_shown(local_path(stack, root))}",
        "delete that file to use the stack file's own",
        severity="note",
    )
    return out, [note]


def _builds_dispatcher(config: Mapping[str, Any]) -> bool:
    """The stack builds the dispatcher image from controller/ (DispatcherSpec.builds_image,
    read off the raw config; a wrong shape is left for the model to report)."""
    dispatcher = config.get("dispatcher")
    if dispatcher is None:
        return True
    if not isinstance(dispatcher, dict):
        return False
    return (
        dispatcher.get("enabled", True) is not False
        and dispatcher.get("run", "cluster") == "cluster"
        and not dispatcher.get("image")
    )
