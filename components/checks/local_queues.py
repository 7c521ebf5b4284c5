"""LocalQueue rules: a namespace the fleet may mirror to the workers and that no framework
release creates too, a ClusterQueue that exists, and a name jobs can give in their
queue-name label (Kueue v0.19.2; the upstream reference is in kueue_rules.RULE_INVENTORY)."""

from __future__ import annotations

from collections.abc import Iterator

from components.checks.rule import error
from components.model.fieldtypes import is_label_value
from components.model.frameworks import FRAMEWORKS
from components.model.problems import Problem, did_you_mean, key_path
from components.model.spec import FleetSpec

RESERVED_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease", "kueue-system")


def local_queues(spec: FleetSpec) -> Iterator[Problem]:
    cqs = {c.name for c in spec.queues.cluster_queues}
    for lq in spec.queues.local_queues:
        npath = key_path(lq.path, "namespace")
        if lq.namespace in RESERVED_NAMESPACES or lq.namespace == "multikueue-fleet-system":
            yield error(
                npath,
                f"namespace '{lq.namespace}' is reserved and is not mirrored to workers "
                "(Kueue does not manage jobs there)",
                "put the LocalQueue in a namespace of your own",
            )
        if lq.cluster_queue not in cqs:
            yield error(
                key_path(lq.path, "clusterQueue"),
                f"no ClusterQueue named '{lq.cluster_queue}'",
                f"{did_you_mean(lq.cluster_queue, cqs)}use a name from queues.clusterQueues",
            )


# A LocalQueue's name is a label value on every job that uses it.
MAX_LABEL_VALUE = 63


def local_queue_name_as_label(spec: FleetSpec) -> Iterator[Problem]:
    """jobframework/validation.go:149 and reconciler.go:1782: a job names its LocalQueue in
    the label kueue.x-k8s.io/queue-name, and Kueue copies it to each pod's
    kueue.x-k8s.io/local-queue-name label; a label value is at most 63 characters, so a
    longer LocalQueue name (valid for the LocalQueue itself) can never be used."""
    for lq in spec.queues.local_queues:
        if not is_label_value(lq.name):
            yield error(
                key_path(lq.path, "name"),
                f"LocalQueue name '{lq.name[:40]}...' is {len(lq.name)} characters; jobs "
                "name their queue in the label kueue.x-k8s.io/queue-name, whose value is at "
                f"most {MAX_LABEL_VALUE}, so no job could use it",
                f"use a name of at most {MAX_LABEL_VALUE} characters",
            )


def local_queue_namespaces(spec: FleetSpec) -> Iterator[Problem]:
    """A LocalQueue's namespace is created by the fleet (on the manager and every worker);
    a framework release that creates the same Namespace (JobSet's jobset-system, the
    training operator's kubeflow, the MPI Operator's mpi-operator, Trainer's
    kubeflow-system, ...) would make two owners of it: the second create fails, and the
    first `destroy` of either deletes the other's objects with it. Refused rather than
    shared: the framework's namespace holds its controller, not users' jobs."""
    enabled = {f for c in spec.clusters for f in c.frameworks}
    owners: dict[str, str] = {}
    for name in sorted(enabled):
        for bundle in FRAMEWORKS[name].bundles if name in FRAMEWORKS else ():
            if bundle.namespace and bundle.namespace != "default":
                owners.setdefault(bundle.namespace, f"the '{name}' framework ({bundle.name})")
    for lq in spec.queues.local_queues:
        owner = owners.get(lq.namespace)
        if owner is not None:
            yield Problem(
                key_path(lq.path, "namespace"),
                f"namespace '{lq.namespace}' is created by {owner}, and the fleet creates a "
                "LocalQueue's namespace too: two owners of one Namespace",
                "put the LocalQueue in a namespace of your own (jobs run anywhere the "
                "framework's controller watches, which is every namespace)",
            )
