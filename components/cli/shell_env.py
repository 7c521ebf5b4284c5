"""`mkf env`: what a fresh shell needs to use a fleet `up` brought up, as shell exports to
`eval`: the project's pinned tools and `mkf` on PATH, its local Pulumi backend, every
cluster's kubeconfig in KUBECONFIG (the manager's context current), and the stack's
passphrase variable (set for the dev stack, whose passphrase is public; named otherwise).

The kubeconfigs are listed, not merged into a file: kubectl and client-go merge a
KUBECONFIG list themselves (client-go v0.36.4 tools/clientcmd/loader.go,
ClientConfigLoadingRules.Load): the first file to set a map key (a cluster, user or
context name) wins, and struct values such as current-context are merged in reverse so
that the first file's wins too; so the manager's file comes first. An entry name two files
use for different things would silently resolve to the first: that is refused, naming both
files."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import yaml

from components.cli.pinned_tools import tools_folder

# The dev stack's passphrase: public, committed with its salt (scripts/env.sh, README).
DEV_STACK = "dev"
DEV_PASSPHRASE = "multikueue-fleet-dev"


class ShellEnvError(Exception):
    """The fleet directory cannot give a shell its settings: the message says why and how."""


def _fleet(folder: Path) -> dict[str, Any]:
    summary = folder / "summary.json"
    try:
        loaded = json.loads(summary.read_text())
    except FileNotFoundError:
        raise ShellEnvError(
            f"no fleet at {folder} ({summary.name} not found): bring one up with scripts/up.sh "
            "(or `mkf up`, then pass its --out folder as --dir)"
        ) from None
    except (OSError, ValueError) as exc:
        raise ShellEnvError(
            f"{summary}: cannot read it ({exc}); bring the fleet up again"
        ) from None
    if not isinstance(loaded, dict) or not isinstance(loaded.get("clusters"), list):
        raise ShellEnvError(f"{summary}: not a summary `up` wrote; bring the fleet up again")
    return loaded


def kubeconfig_paths(folder: Path, summary: dict[str, Any]) -> list[Path]:
    """Every cluster's kubeconfig, the manager's first (its current context is the one a
    KUBECONFIG list ends up with)."""
    clusters = sorted(summary["clusters"], key=lambda c: c.get("role") != "manager")
    paths = [folder / str(c.get("kubeconfig", "")) for c in clusters]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing or not paths:
        raise ShellEnvError(
            f"{folder}: the kubeconfig(s) {', '.join(missing) or 'of its clusters'} are gone; "
            "bring the fleet up again (scripts/up.sh writes them)"
        )
    _no_clashing_names(paths)
    return paths


def _no_clashing_names(paths: list[Path]) -> None:
    seen: dict[tuple[str, str], tuple[Path, Any]] = {}
    for path in paths:
        try:
            config = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ShellEnvError(f"{path}: not a readable kubeconfig ({exc})") from None
        for section in ("clusters", "users", "contexts"):
            for entry in config.get(section) or []:
                key = (section, str(entry.get("name")))
                body = {k: v for k, v in entry.items() if k != "name"}
                first = seen.setdefault(key, (path, body))
                if first[1] != body:
                    raise ShellEnvError(
                        f"{path} and {first[0]} both name a {section[:-1]} "
                        f"'{key[1]}' differently, and a KUBECONFIG list would use the "
                        f"first for both; rename it in one of them (`kubectl config "
                        f"rename-context` for contexts)"
                    )


def exports(project: Path, folder: Path, stack: str | None) -> list[str]:
    """The shell lines for the fleet in `folder` (`stack`, when given, must be its stack)."""
    summary = _fleet(folder)
    found = str(summary.get("stack") or "")
    if stack and found != stack:
        raise ShellEnvError(
            f"{folder} holds the fleet of stack '{found}', not '{stack}'; bring '{stack}' up "
            f"(scripts/up.sh {stack}) or give its fleet's folder with --dir"
        )
    paths = kubeconfig_paths(folder, summary)
    # The tools folder as up.sh and `mkf up` take it (MKF_TOOLS_DIR, else .tools/bin).
    bins = [d for d in (tools_folder(project), project / ".venv" / "bin") if d.is_dir()]
    lines = [f"# the fleet of stack '{found}' ({folder}): eval \"$(mkf env {found})\""]
    if bins:
        on_path = ":".join(shlex.quote(str(d)) for d in bins)
        lines.append(f'export PATH={on_path}:"$PATH"')
    backend = f"file://{project / '.pulumi-state'}"
    lines += [
        f"export PULUMI_BACKEND_URL={shlex.quote(backend)}",
        "export PULUMI_SKIP_UPDATE_CHECK=1",
        f"export KUBECONFIG={shlex.quote(':'.join(str(p) for p in paths))}",
    ]
    if found == DEV_STACK:
        lines.append(f"export PULUMI_CONFIG_PASSPHRASE={DEV_PASSPHRASE}")
    else:
        lines.append(
            f"# stack '{found}': set PULUMI_CONFIG_PASSPHRASE (or PULUMI_CONFIG_PASSPHRASE_FILE) "
            "to its passphrase before a pulumi command"
        )
    return lines


def fleet_manager_kubeconfig(folder: Path) -> Path | None:
    """The manager's kubeconfig of the fleet in `folder`, where `up` wrote one."""
    try:
        summary = _fleet(folder)
    except ShellEnvError:
        return None
    for cluster in summary["clusters"]:
        if isinstance(cluster, dict) and cluster.get("role") == "manager":
            path = folder / str(cluster.get("kubeconfig", ""))
            return path if path.is_file() else None
    return None
