"""The fleet directory `mkf up`, `run` and scripts/up.sh write (summary.json and each
cluster's kubeconfig), read for the commands that look at a running fleet: `status`, and
`render --diff --fleet` for the quota its work holds now."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.cli.capacity import Slot, usage_from_cluster_queues
from components.cli.status import CLUSTER_QUEUES
from controller.kube import ApiError, Kube


class FleetDirError(Exception):
    """The directory cannot be read as a fleet's: the message says why and what to do."""


@dataclass(frozen=True)
class FleetDir:
    summary: dict[str, Any]
    kubeconfigs: dict[str, dict[str, Any]]
    roles: dict[str, str]


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
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError) as exc:
        raise FleetDirError(
            f"{summary_file} or a kubeconfig it names cannot be read ({type(exc).__name__}: "
            f"{exc}): run `mkf up` (or scripts/up.sh) again to rewrite them"
        ) from None
    return FleetDir(summary, kubeconfigs, roles)


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
