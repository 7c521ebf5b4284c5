"""The clusters of a fleet: how many workers there are, their names (unique, short enough for
kind's node hostname), which entries are the same real cluster (in one stack, and across
stacks: validate_together), where a kind worker can be reached from, and a worker's cordon
(a setting of the stack, not a label written by hand)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import yaml

from components.checks.rule import error, unique, warn
from components.model.problems import Problem, key_path
from components.model.spec import ClusterSpec, FleetSpec
from components.objects.kubeconfig import context_cluster, existing_kubeconfig_path
from controller.api import CORDONED_LABEL

MAX_WORKERS = 20  # MultiKueueConfig.spec.clusters holds at most 20 names
# kind names the node container <cluster>-control-plane, a hostname (<= 63 characters).
KIND_NAME_MAX = 63 - len("-control-plane")


def worker_count(spec: FleetSpec) -> Iterator[Problem]:
    """One to MAX_WORKERS workers: one MultiKueueConfig lists them all."""
    if not spec.workers:
        yield error("workers", "a fleet needs at least one worker", "add an entry to workers")
    if len(spec.workers) > MAX_WORKERS:
        yield error(
            "workers",
            f"{len(spec.workers)} workers, but one MultiKueueConfig holds at most "
            f"{MAX_WORKERS} clusters",
            "split the fleet into several stacks (one manager each), or drop workers",
        )


def cluster_names_unique(spec: FleetSpec) -> Iterator[Problem]:
    yield from unique(
        ((c.name, key_path(c.path, "name")) for c in spec.clusters),
        "cluster name",
        "give each cluster its own name",
    )


def _existing_identity(c: ClusterSpec) -> tuple[str, str]:
    """An existing cluster is what its kubeconfig context points at: the API server and its
    CA, whatever the context or file is called (kubeadm names every context
    kubernetes-admin@kubernetes) and whatever `server` the manager's pods use. When the file
    cannot be read here (a CI runner), only the same context of the same file is known to
    be the same cluster."""
    assert c.existing is not None
    path = existing_kubeconfig_path(c.existing)
    context = c.existing.context
    try:
        server, ca = context_cluster(path.read_text(), context)
    except (OSError, ValueError, yaml.YAMLError):
        return f"existing:{path}#{context}", f"context '{context}' of {path}"
    digest = hashlib.sha256(ca.encode()).hexdigest()[:16]
    return f"existing:{server}#{digest}", f"at {server} (its API server and CA)"


def _identity(spec: FleetSpec, c: ClusterSpec) -> tuple[str, str]:
    """What makes two stacks' clusters the same real cluster, and how to name it."""
    if c.existing is not None:
        return _existing_identity(c)
    if c.gke is not None:
        where = f"{c.gke.project}/{c.gke.location}/{c.physical_name(spec.fleet_name)}"
        return f"gke:{where}", f"gke:{where}"
    if c.eks is not None:
        where = f"{c.eks.region}/{c.physical_name(spec.fleet_name)}"
        return f"eks:{where}", f"eks:{where}"
    where = f"kind:{c.physical_name(spec.fleet_name)}"
    return where, where


def _shared_cluster_problem(
    ident: tuple[str, str], users: list[tuple[str, ClusterSpec]]
) -> Problem:
    names = ", ".join(f"{src} ({c.path})" if src else c.path for src, c in users)
    key, where = ident
    if key.startswith("existing:"):
        # The objects a fleet installs on a cluster (Kueue's install, the multikueue
        # ServiceAccount and ClusterRole, the queues) have the same names for every fleet,
        # and the Kubernetes provider refuses to create what already exists.
        return Problem(
            users[1][1].path,
            f"the existing cluster {where} is used by {names}; one cluster serves one fleet, "
            "whose objects there have the same names as another fleet's",
            "give each fleet its own cluster (another API server)",
            "error",
        )
    return Problem(
        users[1][1].path,
        f"{where} would be created by {names}",
        "give the stacks different fleetName values",
        "error",
    )


def clusters_distinct(spec: FleetSpec) -> list[Problem]:
    """Two entries of one stack that are the same real cluster. Only `existing` ones: a
    cluster the stack creates is named <fleetName>-<name>, so two of one stack collide
    only when their names do (cluster_names_unique says so, with the right fix)."""
    owners: dict[tuple[str, str], list[tuple[str, ClusterSpec]]] = {}
    for c in spec.clusters:
        if c.existing is not None:
            owners.setdefault(_identity(spec, c), []).append(("", c))
    return [_shared_cluster_problem(i, users) for i, users in owners.items() if len(users) > 1]


def validate_together(specs: list[tuple[str, FleetSpec]]) -> list[Problem]:
    """Problems only visible across stacks: two stacks that would create, or share, the
    same cluster."""
    owners: dict[tuple[str, str], list[tuple[str, ClusterSpec]]] = {}
    for source, spec in specs:
        for c in spec.clusters:
            owners.setdefault(_identity(spec, c), []).append((source, c))
    return [_shared_cluster_problem(i, users) for i, users in owners.items() if len(users) > 1]


def kind_name_length(spec: FleetSpec) -> Iterator[Problem]:
    """kind names the node container <cluster>-control-plane, a hostname."""
    for c in spec.clusters:
        physical = c.physical_name(spec.fleet_name)
        if c.provider == "kind" and len(physical) > KIND_NAME_MAX:
            yield error(
                key_path(c.path, "name"),
                f"kind cluster name '{physical}' is longer than {KIND_NAME_MAX} characters",
                "shorten fleetName or the cluster name",
            )


def kind_workers_need_a_kind_manager(spec: FleetSpec) -> Iterator[Problem]:
    for c in spec.workers:
        if c.provider == "kind" and spec.manager.provider != "kind":
            yield error(
                key_path(c.path, "provider"),
                f"kind worker '{c.name}' cannot be reached by a {spec.manager.provider} manager",
                "a kind worker is reachable only from a kind manager on the same Docker "
                "host; use kind for the manager too, or another provider here",
            )


def cordon_is_a_setting(spec: FleetSpec) -> Iterator[Problem]:
    """The cordon label on a worker's MultiKueueCluster is the stack's to write, from
    `cordoned`: written as a label it would be a cordon no command shows or undoes, and a
    selector on it would dispatch only to what is out of service."""
    for w in spec.workers:
        if CORDONED_LABEL in w.labels:
            yield error(
                key_path(key_path(w.path, "labels"), CORDONED_LABEL),
                "is the label the stack sets on a cordoned worker's MultiKueueCluster",
                f"remove it and set {key_path(w.path, 'cordoned')}: true (or run "
                f"`mkf cordon {w.name}`)",
            )
    if CORDONED_LABEL in spec.dispatcher.policy.cluster_selector:
        yield error(
            key_path("dispatcher.policy.clusterSelector", CORDONED_LABEL),
            "selects by the cordon label, and a cordoned worker is never nominated",
            "remove it from the selector",
        )
    if spec.workers and all(w.cordoned for w in spec.workers):
        yield warn(
            "workers",
            "every worker is cordoned, so no new workload is dispatched anywhere",
            "uncordon one (`mkf uncordon NAME`, then `pulumi up`)",
        )
