"""How the commands that look at a running fleet (`status`, and `render --diff --fleet` for
the quota its work holds now) find its clusters: the directory `mkf up`, `run` and
scripts/up.sh write (summary.json and each cluster's kubeconfig), or, for a fleet brought up
with a plain `pulumi up`, the stack's outputs."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from components.cli.capacity import Slot, usage_from_cluster_queues
from components.cli.status import CLUSTER_QUEUES, Installs, kubeconfig_tls_problem
from controller.api.cluster_access import ApiError, Kube


class FleetDirError(Exception):
    """The directory cannot be read as a fleet's: the message says why and what to do."""


@dataclass(frozen=True)
class FleetDir:
    summary: dict[str, Any]
    kubeconfigs: dict[str, dict[str, Any]]
    roles: dict[str, str]
    installs: Installs = field(default_factory=Installs)


def read_fleet_dir(folder: Path) -> FleetDir:
    summary_file = folder / "summary.json"
    if not summary_file.is_file():
        raise FleetDirError(
            f"{summary_file} not found: `mkf up` (or `run`, or scripts/up.sh) writes it "
            "there; give --dir the directory it wrote, or --stack NAME for a fleet brought up "
            "with `pulumi up`"
        )
    try:
        summary = json.loads(summary_file.read_text())
        clusters = summary["clusters"]
        kubeconfigs = {
            c["name"]: yaml.safe_load((folder / c["kubeconfig"]).read_text()) for c in clusters
        }
        roles = {c["name"]: c["role"] for c in clusters}
        for name, kubeconfig in kubeconfigs.items():
            if not isinstance(kubeconfig, dict):
                raise ValueError(f"the kubeconfig of {name} is not a kubeconfig")
        if "manager" not in roles.values():
            raise ValueError("no cluster has the role manager")
        installs = Installs.from_json(summary.get("installs"))
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError) as exc:
        raise FleetDirError(
            f"{summary_file} or a kubeconfig it names cannot be read ({type(exc).__name__}: "
            f"{exc}): run `mkf up` (or scripts/up.sh) again to rewrite them"
        ) from None
    for c in clusters:
        problem = kubeconfig_tls_problem(kubeconfigs[c["name"]])
        if problem:
            raise FleetDirError(
                f"{folder / c['kubeconfig']} (cluster {c['name']}): {problem}; run `mkf up` "
                "(or scripts/up.sh) again to rewrite it, or fix the file"
            )
    return FleetDir(summary, kubeconfigs, roles, installs)


Runner = Callable[..., "subprocess.CompletedProcess[str]"]


def read_stack_outputs(
    stack: str, cwd: Path, run: Runner = subprocess.run, which: Callable[[str], Any] = shutil.which
) -> FleetDir:
    """The fleet a plain `pulumi up --stack STACK` made, from `pulumi stack output --json
    --show-secrets` (the same outputs `mkf up` writes summary.json from), in memory: no
    credential is written anywhere."""
    if which("pulumi") is None:
        raise FleetDirError(
            f"--stack {stack} reads the stack's outputs with the Pulumi CLI, which is not on "
            "PATH: put it there (scripts/up.sh installs it into .tools/bin), or give --dir"
        )
    command = ["pulumi", "stack", "output", "--json", "--show-secrets", "--stack", stack]
    done = run(command, cwd=cwd, capture_output=True, text=True, check=False, timeout=120)
    if done.returncode != 0:
        said = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        why = next((line for line in said if line.startswith("error:")), said[0] if said else "")
        raise FleetDirError(
            f"`{' '.join(command)}` failed ({why or f'exit {done.returncode}'}): check the "
            "stack's name (`pulumi stack ls`) and that PULUMI_CONFIG_PASSPHRASE (or _FILE) and "
            "the backend are the ones `pulumi up` used"
        )
    try:
        outputs = json.loads(done.stdout or "{}")
        fleet = fleet_from_outputs(outputs)
    except (ValueError, KeyError, TypeError, yaml.YAMLError) as exc:
        raise FleetDirError(
            f"stack {stack} has no fleet in its outputs ({type(exc).__name__}: {exc}): run "
            f"`pulumi up --stack {stack}` first"
        ) from None
    for name, kubeconfig in fleet.kubeconfigs.items():
        problem = kubeconfig_tls_problem(kubeconfig)
        if problem:
            raise FleetDirError(
                f"stack {stack}'s output kubeconfigs.{name} (cluster {name}): {problem}; run "
                f"`pulumi up --stack {stack}` again to rewrite it"
            )
    return fleet


def fleet_from_outputs(outputs: Mapping[str, Any]) -> FleetDir:
    """The Pulumi program's outputs (clusters, kubeconfigs, installs) as a FleetDir."""
    clusters = outputs.get("clusters")
    if not clusters:
        raise ValueError("no clusters")
    kubeconfigs = {c["name"]: yaml.safe_load(outputs["kubeconfigs"][c["name"]]) for c in clusters}
    for name, kubeconfig in kubeconfigs.items():
        if not isinstance(kubeconfig, dict):
            raise ValueError(f"the kubeconfig of {name} is not a kubeconfig")
    roles = {c["name"]: c["role"] for c in clusters}
    if "manager" not in roles.values():
        raise ValueError("no cluster has the role manager")
    summary = {"fleet": outputs.get("fleet"), "clusters": clusters}
    return FleetDir(summary, kubeconfigs, roles, Installs.from_json(outputs.get("installs")))


async def read_usage(
    kubeconfigs: Mapping[str, Mapping[str, Any]], timeout: float = 10.0
) -> tuple[dict[tuple[str, Slot], str], list[str]]:
    """(cluster, slot) -> quota reserved now on every cluster that answers, and one line per
    cluster that did not (its usage stays unknown, its rows unflagged)."""

    async def one(name: str, config: Mapping[str, Any]) -> tuple[dict[Any, str], str | None]:
        kube = await Kube.from_kubeconfig(dict(config), name)
        kube.attempts = 1
        try:
            items, _ = await asyncio.wait_for(kube.list(CLUSTER_QUEUES), timeout)
            return usage_from_cluster_queues(name, items), None
        except (ApiError, TimeoutError, OSError) as exc:
            why = "no answer" if isinstance(exc, TimeoutError) else str(exc)
            return {}, f"usage of {name} not read ({why}): its rows are not flagged"
        finally:
            await kube.close()

    results = await asyncio.gather(*(one(n, c) for n, c in kubeconfigs.items()))
    usage: dict[tuple[str, Slot], str] = {}
    missed: list[str] = []
    for found, problem in results:
        usage.update(found)
        if problem:
            missed.append(problem)
    return usage, missed
