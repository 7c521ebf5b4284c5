"""Kueue's rules (tests/helpers/kueue_rule_cases.py) against the real thing: each upstream reference
read in Kueue's Go module of the pinned tag, and the objects dry-run created on a real
kube-apiserver with Kueue's real CRDs."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest

from components.checks.crd_schema import CrdSchemas
from components.checks.kueue_rules import KUEUE_TAG, RULE_INVENTORY
from components.upstream import gomodule, toolchain
from controller.kinds import Kind
from controller.kube import ApiError, Kube
from tests.helpers.apiserver import NS, install, missing, wait_ready
from tests.helpers.kueue_rule_cases import CASES, RULE_KIND, written_object


@pytest.fixture(scope="module")
def kueue_source() -> Path:
    try:
        return gomodule.module_dir("sigs.k8s.io/kueue", KUEUE_TAG)
    except (gomodule.ModuleSourceError, toolchain.ToolchainError) as exc:
        pytest.skip(f"Kueue {KUEUE_TAG}'s Go module cannot be had: {exc}")


@pytest.mark.parametrize("rule", RULE_INVENTORY, ids=[r.id for r in RULE_INVENTORY])
def test_each_upstream_reference_holds_the_rule(rule: Any, kueue_source: Path) -> None:
    for ref in rule.upstream:
        lines = (kueue_source / ref.file).read_text().splitlines()
        assert ref.text in lines[ref.line - 1], f"{ref}: {lines[ref.line - 1]!r}"


@pytest.mark.skipif(bool(missing()), reason=missing() or "ok")
def test_a_real_api_server_agrees(apiserver: dict[str, Any], upstream_crds: CrdSchemas) -> None:
    """The objects of CASES, dry-run created on a real kube-apiserver with Kueue's real
    CRDs: refused where the CRD refuses (`schema`), taken where only Kueue's webhook or
    behaviour would refuse (no Kueue runs beside this server)."""

    async def main() -> list[str]:
        kube = await Kube.from_kubeconfig(apiserver, "manager")
        wrong = []
        try:
            await wait_ready(kube)
            await install(kube)
            for case in CASES:
                obj = copy.deepcopy(written_object(case))
                obj["metadata"].pop("namespace", None)
                plural = f"{obj['kind'].lower()}s".replace("ys", "ies")
                kind = Kind("kueue.x-k8s.io", "v1beta2", plural, obj["kind"] == "LocalQueue")
                namespace = NS if kind.namespaced else None
                try:
                    await kube.request("POST", kind.path(namespace) + "?dryRun=All", body=obj)
                    said = ""
                except ApiError as exc:
                    if exc.status != 422:
                        raise
                    said = str(exc)
                schema = RULE_KIND[case.rule] == "schema"
                if schema != bool(said) or (schema and case.server_says not in said):
                    wrong.append(f"{case.id}: {said or 'accepted'}")
        finally:
            await kube.close()
        return wrong

    wrong = asyncio.run(main())
    assert wrong == [], "\n".join(wrong)
