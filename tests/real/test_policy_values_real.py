"""DispatchPolicy values the stack refuses, refused alike by a real kube-apiserver with the
project's DispatchPolicy CRD."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controller.kinds import Kind
from controller.kube import ApiError, Kube
from controller.policy_api import (
    GROUP,
    PLURAL,
    VERSION,
)
from tests.helpers.apiserver import install, missing, wait_ready
from tests.helpers.policy_cases import VALUES, controller_refuses, policy_with_spec


@pytest.mark.skipif(bool(missing()), reason=missing() or "ok")
def test_a_real_api_server_agrees(apiserver: dict[str, Any]) -> None:
    """The same table against a real kube-apiserver (dry-run creates): the CRD's CEL rules
    fit the server's cost budget, and its verdicts are the controller's."""
    policies = Kind(GROUP, VERSION, PLURAL, False)

    async def main() -> list[str]:
        kube = await Kube.from_kubeconfig(apiserver, "manager")
        disagree = []
        try:
            await wait_ready(kube)
            await install(kube)  # installs crd() (a rule over budget fails here)
            for i, (case, spec) in enumerate(VALUES):
                obj = policy_with_spec(f"p{i}", spec)
                try:
                    stored = await kube.request(
                        "POST", policies.path(None) + "?dryRun=All", body=obj
                    )
                    server = ""
                except ApiError as exc:
                    if exc.status != 422:
                        raise
                    server, stored = str(exc), None
                controller = controller_refuses(stored or obj)
                if bool(server) != bool(controller):
                    disagree.append(f"{case}: server {server!r}, controller {controller}")
        finally:
            await kube.close()
        return disagree

    assert asyncio.run(main()) == []
