"""The DispatchPolicy CRD on a real kube-apiserver."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controller.kinds import Kind
from controller.kube import Kube
from controller.policy_api import GROUP, PLURAL, VERSION
from tests.helpers.apiserver import install, missing, wait_ready
from tests.helpers.policy_cases import policy, written_status


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
