"""The DispatchPolicy CRD keeps what the controller writes. A real API server prunes every
field a structural schema does not declare, so the status the controller writes (the Ready
and InventoryReady conditions, observedGeneration, status.inventory with its joined list
and drain start times) must be declared, or drains restart from zero after a restart.

The payloads are produced by the controller's own code (the dispatcher's policy status and
the inventory keeper's step), recorded from a stand-in manager, then checked offline
against the CRD with components/checks/crd_schema.py, and on a real kube-apiserver when
KUBEBUILDER_ASSETS is set."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from components.checks.crd_schema import CrdSchemas
from controller.dispatcher import Dispatcher
from controller.inventory import InventoryKeeper, Plan
from controller.kube import Kind, Kube
from controller.metrics import Metrics
from controller.model import Policy
from controller.policy_api import GROUP, KIND, PLURAL, VERSION, crd, policy_object
from controller.settings import Settings
from tests.apiserver import install, missing, wait_ready

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


def test_the_controller_writes_what_the_test_checks() -> None:
    status = asyncio.run(written_status())
    assert status["inventory"] == {
        "joined": ["a", "b"],
        "draining": [{"cluster": "c", "since": "2026-01-02T03:04:05Z"}],
        "overLimit": ["z"],
    }
    assert status["observedGeneration"] == 3
    assert sorted(c["type"] for c in status["conditions"]) == ["InventoryReady", "Ready"]


def test_the_crd_keeps_every_status_field_the_controller_writes() -> None:
    schemas = CrdSchemas.from_documents([crd()])
    obj = {**policy(), "status": asyncio.run(written_status())}
    assert schemas.knows(f"{GROUP}/{VERSION}", KIND)
    assert schemas.pruned_paths(obj) == []
    assert schemas.prune(obj) == obj
    assert schemas.problems(obj) == []


def test_the_crd_still_prunes_what_nobody_declared() -> None:
    # The check above can fail: an undeclared field is reported and dropped.
    schemas = CrdSchemas.from_documents([crd()])
    obj = {**policy(), "status": {"inventory": {"joined": ["a"], "leaving": ["b"]}}}
    assert schemas.pruned_paths(obj) == ["status.inventory.leaving"]


@pytest.mark.skipif(bool(missing()), reason=missing() or "ok")
def test_the_status_survives_a_real_api_server(apiserver: dict[str, Any]) -> None:
    policies = Kind(GROUP, VERSION, PLURAL, False)

    async def main() -> None:
        status = await written_status()
        manager = await Kube.from_kubeconfig(apiserver, "manager")
        try:
            await wait_ready(manager)
            await install(manager)  # installs crd() with the other CRDs
            body = policy("status-round-trip")
            await manager.create(policies, body)
            await manager.merge_patch(
                policies, "status-round-trip", {"status": status}, status=True
            )
            stored = await manager.get(policies, "status-round-trip")
            assert stored["status"] == status
            assert stored["spec"]["inventory"]["drainTimeout"] == "30m"
        finally:
            await manager.close()

    asyncio.run(main())
