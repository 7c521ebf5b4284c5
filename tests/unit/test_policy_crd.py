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

from components.checks.crd_schema import CrdSchemas
from controller.policy_api import GROUP, KIND, VERSION, crd
from tests.helpers.policy_cases import policy, written_status


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
