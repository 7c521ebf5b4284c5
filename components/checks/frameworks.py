"""The job frameworks and Kueue integrations a stack enables: names Kueue and the project
know, each listed once (it is installed once), what each framework needs beside it, the
manager's frameworks on every worker (or MultiKueue marks the worker inactive), and external
frameworks written Kind.version.group."""

from __future__ import annotations

import re
from collections.abc import Iterator

from components.checks.rule import error
from components.model.frameworks import (
    FRAMEWORKS,
    REMOVED_FRAMEWORKS,
    framework_of_integration,
    known_integrations,
)
from components.model.problems import Problem, did_you_mean, key_path
from components.model.spec import FleetSpec

KIND_VERSION_GROUP = re.compile(r"^[A-Z][A-Za-z0-9]*\.v[0-9][a-z0-9]*\.[a-z0-9.-]+$")


def _framework_name_problem(name: str, path: str, list_path: str) -> Problem | None:
    if name in REMOVED_FRAMEWORKS:
        return error(path, REMOVED_FRAMEWORKS[name], f"remove '{name}' from {list_path}")
    if name not in FRAMEWORKS:
        return error(
            path,
            f"unknown framework '{name}'",
            f"{did_you_mean(name, FRAMEWORKS)}known frameworks: {', '.join(FRAMEWORKS)}",
        )
    return None


def _framework_list(
    written: tuple[str, ...], names: tuple[str, ...], path: str, where: str
) -> Iterator[Problem]:
    """`written`: the list as the file has it; `names`: what the cluster gets (batch added)."""
    for i, name in enumerate(written):
        problem = _framework_name_problem(name, key_path(path, i), path)
        if problem is not None:
            yield problem
            continue
        for needed in FRAMEWORKS[name].requires:
            if needed not in names:
                yield error(path, f"'{name}' needs '{needed}' {where}", f"add '{needed}' to {path}")


def known_frameworks(spec: FleetSpec) -> Iterator[Problem]:
    """A wrong name once, where it is written: the fleet's `frameworks` (which every
    cluster without a list of its own takes), or a cluster's own list."""
    if any(c.written_frameworks is None for c in spec.clusters):
        yield from _framework_list(
            spec.frameworks,
            spec.frameworks,
            "frameworks",
            "(the frameworks of every cluster without its own)",
        )
    for c in spec.clusters:
        if c.written_frameworks is not None:
            path = key_path(c.path, "frameworks")
            yield from _framework_list(
                c.written_frameworks, c.frameworks, path, f"on cluster '{c.name}'"
            )


def workers_run_the_managers_frameworks(spec: FleetSpec) -> Iterator[Problem]:
    for w in spec.workers:
        missing = [f for f in spec.manager.frameworks if f in FRAMEWORKS and f not in w.frameworks]
        for name in missing:
            yield error(
                key_path(w.path, "frameworks"),
                f"'{name}' is enabled on the manager but not installed on worker '{w.name}'",
                f"add '{name}' to {key_path(w.path, 'frameworks')}: MultiKueue watches "
                "every enabled kind on every worker and marks the whole worker inactive "
                "when one is missing",
            )


def integrations_are_known_and_installed(spec: FleetSpec) -> Iterator[Problem]:
    known = known_integrations()
    for i, name in enumerate(spec.kueue.integrations):
        path = key_path("kueue.integrations", i)
        if name not in known:
            yield error(
                path,
                f"'{name}' is not a Kueue integration",
                f"{did_you_mean(name, known)}known: {', '.join(known)}",
            )
            continue
        fw = framework_of_integration(name)
        if fw is None:
            continue
        for c in spec.clusters:
            if fw.key not in c.frameworks:
                yield error(
                    path,
                    f"'{name}' needs framework '{fw.key}' on cluster '{c.name}'",
                    f"add '{fw.key}' to {key_path(c.path, 'frameworks')}, or drop the integration",
                )


def external_frameworks(spec: FleetSpec) -> Iterator[Problem]:
    builtin_kinds = {fw_name.split("/")[-1] for fw_name in known_integrations()}
    seen: set[str] = set()
    for ext in spec.kueue.external_frameworks:
        path = key_path(ext.path, "name")
        if not KIND_VERSION_GROUP.match(ext.name):
            yield error(
                path,
                f"'{ext.name}' is not Kind.version.group",
                "write it like PipelineRun.v1.tekton.dev (Kind is case-sensitive)",
            )
            continue
        if ext.name in seen:
            yield error(path, f"'{ext.name}' is listed twice", "list each kind once")
        seen.add(ext.name)
        if ext.parts[0].lower() in builtin_kinds:
            yield error(
                path,
                f"'{ext.name}' has a built-in Kueue integration",
                "enable it under kueue.integrations or a cluster's frameworks instead",
            )


def frameworks_listed_once(spec: FleetSpec) -> Iterator[Problem]:
    """A framework listed twice would be installed twice: two Pulumi resources with one
    URN, refused by the engine half-way through `up`."""
    lists = [("frameworks", spec.frameworks)] + [
        (key_path(c.path, "frameworks"), c.written_frameworks)
        for c in spec.clusters
        if c.written_frameworks is not None
    ]
    for path, names in lists:
        first: dict[str, int] = {}
        for i, name in enumerate(names):
            if name in first:
                yield Problem(
                    key_path(path, i),
                    f"'{name}' is listed twice (also at {key_path(path, first[name])})",
                    "remove this entry: each framework is installed once",
                )
            else:
                first.setdefault(name, i)
