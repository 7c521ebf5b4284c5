"""Before the fleet's ClusterQueues on a cluster are deleted: evict the work that holds their
quota, so that `pulumi destroy` is not stuck behind Kueue's finalizer.

Kueue keeps the finalizer `kueue.x-k8s.io/resource-in-use` on a ClusterQueue while any
workload holds quota in it (kueue v0.19.2 pkg/controller/core/clusterqueue_controller.go,
`Reconcile`: the finalizer goes once the cache says the queue has no workloads), and the
kubernetes provider waits up to ten minutes for each deletion (pulumi-kubernetes
provider/pkg/await/await.go, Deletion). A real destroy with one Job admitted did exactly that
(tests/real/test_real_pulumi.py).

`QueueDrain` is a resource created after a cluster's queues (and, on the manager, after its
MultiKueue objects), so the engine deletes it before them; its delete sets `stopPolicy:
HoldAndDrain` on the fleet's ClusterQueues there ("Admitted workloads are evicted and
Reserving workloads will cancel the reservation": kueue v0.19.2
config/components/crd/bases/kueue.x-k8s.io_clusterqueues.yaml, spec.stopPolicy) and waits,
bounded, until none holds quota. An evicted workload's Job is suspended again and stays the
user's: nothing the fleet did not create is deleted. On the manager this runs first, while
MultiKueue still reaches the workers, so Kueue removes the remote copies itself
(pkg/controller/admissionchecks/multikueue/workload.go: a workload without quota reservation
has its remote objects removed). `scripts/down.sh` holds the queues gently first (`Hold`,
letting admitted work finish, components/cli/teardown.py); this is what `pulumi destroy`
alone does, and what remains after that wait.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

import pulumi
import yaml
from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider, UpdateResult

KUEUE_GROUP, KUEUE_VERSION = "kueue.x-k8s.io", "v1beta2"
# How long a destroy waits on one cluster for evicted work to let go of its quota; Kueue
# evicts within a scheduling cycle, the rest is its cache catching up.
DRAIN_TIMEOUT = 120.0


class DrainFailed(Exception):
    """Work still holds quota after the bound: the message names it and what to do."""


def holds_quota(workload: Mapping[str, Any]) -> bool:
    """What keeps Kueue's finalizer on the ClusterQueue: quota reserved, not finished, not
    deactivated (kueue v0.19.2 pkg/workload/workload.go `HasActiveQuotaReservation`; a
    deactivated workload leaves the cache: pkg/cache/scheduler/cache.go)."""
    conditions = {
        c.get("type"): c.get("status")
        for c in (workload.get("status") or {}).get("conditions") or []
    }
    active = (workload.get("spec") or {}).get("active") is not False
    return (
        active
        and conditions.get("QuotaReserved") == "True"
        and conditions.get("Finished") != "True"
    )


def holding(workloads: Iterable[Mapping[str, Any]], queues: set[str]) -> list[str]:
    """namespace/name of every workload holding quota in one of `queues`."""
    return sorted(
        f"{w['metadata'].get('namespace')}/{w['metadata']['name']}"
        for w in workloads
        if ((w.get("status") or {}).get("admission") or {}).get("clusterQueue") in queues
        and holds_quota(w)
    )


def drain(
    api: Any,
    fleet: str,
    cluster: str,
    timeout: float = DRAIN_TIMEOUT,
    interval: float = 1.0,
    fleet_label: str = "multikueue-fleet/fleet",
) -> list[str]:
    """Sets HoldAndDrain on the fleet's ClusterQueues (`api`: a CustomObjectsApi) and waits
    until no workload holds quota in them; returns the queues drained. DrainFailed past
    `timeout`."""
    from kubernetes.client.exceptions import ApiException

    try:
        listed = api.list_cluster_custom_object(
            KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", label_selector=f"{fleet_label}={fleet}"
        )
    except ApiException as exc:
        if exc.status == 404:  # Kueue's API is gone already: nothing can hold quota
            return []
        raise
    queues = {q["metadata"]["name"] for q in listed.get("items") or []}
    for name in sorted(queues):
        api.patch_cluster_custom_object(
            KUEUE_GROUP,
            KUEUE_VERSION,
            "clusterqueues",
            name,
            {"spec": {"stopPolicy": "HoldAndDrain"}},
            _content_type="application/merge-patch+json",
        )
    deadline = time.monotonic() + timeout
    while queues:
        items = api.list_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, "workloads")
        left = holding(items.get("items") or [], queues)
        if not left:
            break
        if time.monotonic() > deadline:
            raise DrainFailed(
                f"cluster {cluster}: {len(left)} workload(s) still hold quota in the fleet's "
                f"ClusterQueues {timeout:.0f}s after they were set to HoldAndDrain: "
                f"{', '.join(left[:10])}; delete or deactivate them (spec.active: false) and "
                "run destroy again"
            )
        time.sleep(interval)
    return sorted(queues)


class QueueDrainProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=f"{props['cluster_name']}/queue-drain", outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # New credentials or a new bound are kept for the delete; never a replacement.
        keys = ("kubeconfig", "context", "fleet", "timeout")
        return DiffResult(changes=any(olds.get(k) != news.get(k) for k in keys), replaces=[])

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=news)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        from kubernetes import client, config

        api = client.CustomObjectsApi(
            config.new_client_from_config_dict(
                yaml.safe_load(props["kubeconfig"]), context=props.get("context") or None
            )
        )
        drain(api, props["fleet"], props["cluster_name"], float(props.get("timeout") or 120))


class QueueDrain(pulumi.dynamic.Resource, module="multikueue-fleet", name="QueueDrain"):
    def __init__(
        self,
        name: str,
        props: Mapping[str, pulumi.Input[Any]],
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__(
            QueueDrainProvider(),
            name,
            dict(props),
            pulumi.ResourceOptions.merge(
                opts, pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"])
            ),
        )
