"""DispatchPolicy objects for the tests of its CRD: VALUES, spec values right and wrong for every
key the controller checks, and the status the controller writes on a policy."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from controller.dispatcher import Dispatcher
from controller.inventory import InventoryKeeper, Plan
from controller.kube import Kube
from controller.metrics import Metrics
from controller.model import Policy
from controller.policy_api import (
    GROUP,
    MAX_SELECTOR_LABELS,
    VERSION,
    InvalidPolicy,
    parse,
    policy_object,
)
from controller.settings import Settings

LONG_PREFIX = "a." * 126 + "a"  # a 253-character DNS subdomain


LABELS = {f"example.com/l{i}": "x" for i in range(MAX_SELECTOR_LABELS)}


def inventory(**fields: Any) -> dict[str, Any]:
    return {"inventory": {"multiKueueConfig": "inventory", **fields}}


def labels_at(where: str, labels: Any) -> dict[str, Any]:
    if where == "inventory":
        return inventory(selector={"matchLabels": labels})
    return {"clusterSelector": {"matchLabels": labels}}


# (id, spec) pairs; whether each is right is what the test compares, not written here.
VALUES: list[tuple[str, dict[str, Any]]] = [
    ("empty spec", {}),
    ("clusterQueues ok", {"clusterQueues": ["cq", "team-a.gpu"]}),
    ("clusterQueues upper case", {"clusterQueues": ["CQ"]}),
    ("clusterQueues empty name", {"clusterQueues": [""]}),
    ("clusterQueues too long", {"clusterQueues": ["a" * 254]}),
    ("clusterQueues trailing newline", {"clusterQueues": ["cq\n"]}),
    ("clusterQueues a number", {"clusterQueues": [1]}),
    ("strategy ok", {"strategy": "BestFit"}),
    ("strategy wrong case", {"strategy": "bestfit"}),
    ("strategy empty", {"strategy": ""}),
    ("clustersToNominate 20", {"clustersToNominate": 20}),
    ("clustersToNominate 0", {"clustersToNominate": 0}),
    ("clustersToNominate 21", {"clustersToNominate": 21}),
    ("clustersToNominate text", {"clustersToNominate": "2"}),
    ("clustersToNominate fraction", {"clustersToNominate": 2.5}),
    ("clustersToNominate boolean", {"clustersToNominate": True}),
    ("hedgeClusters 1", {"hedgeClusters": 1}),
    ("hedgeClusters 20", {"hedgeClusters": 20}),
    ("hedgeClusters 0", {"hedgeClusters": 0}),
    ("hedgeClusters 21", {"hedgeClusters": 21}),
    ("hedgeClusters text", {"hedgeClusters": "3"}),
    ("hedgeSharePercent 1", {"hedgeSharePercent": 1}),
    ("hedgeSharePercent 100", {"hedgeSharePercent": 100}),
    ("hedgeSharePercent 0", {"hedgeSharePercent": 0}),
    ("hedgeSharePercent 101", {"hedgeSharePercent": 101}),
    ("hedgeSharePercent fraction", {"hedgeSharePercent": 0.9}),
    ("whenNothingFits ok", {"whenNothingFits": "LeastLoaded"}),
    ("whenNothingFits wrong", {"whenNothingFits": "Wait"}),
]


def policy_with_spec(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "DispatchPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


def controller_refuses(obj: dict[str, Any]) -> list[str]:
    try:
        parse(obj)
    except InvalidPolicy as exc:
        return exc.lines
    return []


NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


class Recorder:
    """Stands in for the manager: keeps every status patch the controller sends."""

    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []

    async def merge_patch(self, kind: Any, name: str, patch: dict[str, Any], **kw: Any) -> None:
        assert kw.get("status") is True, "policy status goes through the status subresource"
        self.patches.append(patch)


def policy(name: str = "inventory") -> dict[str, Any]:
    obj = policy_object(name, Policy(name=name), ["cluster-queue"])
    obj["metadata"]["generation"] = 3
    obj["spec"]["inventory"] = {"multiKueueConfig": "inventory", "drainTimeout": "30m"}
    return obj


async def written_status() -> dict[str, Any]:
    """The status the controller writes on a policy, from both of its writers."""
    recorder = Recorder()
    obj = policy()
    plan = Plan(
        clusters=["a", "b", "c"],
        joined=["a", "b"],
        draining={"c": NOW},
        over_limit=["z"],
    )
    await InventoryKeeper(recorder, None, "kueue-system")._status(obj, plan, NOW)
    (inventory_patch,) = recorder.patches
    obj["status"] = inventory_patch["status"]
    dispatcher = Dispatcher(
        recorder,  # type: ignore[arg-type]
        Settings(identity="test"),
        Metrics(),
        Kube.from_kubeconfig,
        lambda: True,
    )
    dispatcher.state.policies.store[obj["metadata"]["name"]] = obj
    await dispatcher.sync_policy_status()
    _, ready_patch = recorder.patches
    status = {**inventory_patch["status"], **ready_patch["status"]}
    # A merge patch replaces a list: both conditions are kept here, as the inventory keeps
    # the other writer's condition when it writes its own.
    status["conditions"] = inventory_patch["status"]["conditions"] + [
        c for c in ready_patch["status"]["conditions"] if c["type"] == "Ready"
    ]
    return status
