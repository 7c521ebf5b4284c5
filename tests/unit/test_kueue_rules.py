"""Kueue v0.19.2's rules (components/checks/kueue_rules.py), offline: each case of
tests/helpers/kueue_rule_cases.py refused by the project with its path, text and fix; every
rule of the inventory has a case and names where the project checks it, and the inventory is
docs/kueue-rules.md. Against Kueue's real CRDs: tests/emulated/test_kueue_rules_schema.py; its
Go module and a real API server: tests/real/test_kueue_rules_real.py."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import pytest

from components.checks.kueue_rules import RULE_INVENTORY, inventory_table
from tests.helpers.fleet_config import base, problems_of
from tests.helpers.kueue_rule_cases import CASES, Case

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_project_refuses_it(case: Case) -> None:
    config = base()
    case.mutate(config)
    problems = problems_of(config)
    found = [p for p in problems if p.path == case.path and p.severity == case.severity]
    assert len(found) == 1, f"{case.path}: {[str(p) for p in problems]}"
    assert case.message in found[0].message
    assert found[0].hint, "every refusal says how to fix it"


def test_every_rule_has_a_case_and_every_case_a_rule() -> None:
    ids = [rule.id for rule in RULE_INVENTORY]
    assert len(ids) == len(set(ids))
    assert {c.rule for c in CASES} == set(ids)


@pytest.mark.parametrize("rule", RULE_INVENTORY, ids=[r.id for r in RULE_INVENTORY])
def test_each_rule_names_where_the_project_checks_it(rule: Any) -> None:
    assert rule.checked_in
    for ref in rule.checked_in:
        module, _, name = ref.partition(":")
        assert hasattr(importlib.import_module(module), name), ref


def test_the_docs_table_is_the_inventory() -> None:
    doc = (ROOT / "docs" / "kueue-rules.md").read_text()
    assert inventory_table() in doc, (
        "docs/kueue-rules.md is stale: paste `python -c 'from components.checks.kueue_rules "
        "import inventory_table; print(inventory_table())'` into it"
    )


def test_cited_lines_in_the_code_are_in_the_inventory() -> None:
    """A `file.go:LINE` cited in a module that checks the inventory's rules (each rule's
    checked_in) is a reference of the inventory, so the code and the table cannot cite
    different lines."""
    modules = {
        where.split(":", 1)[0]
        for rule in RULE_INVENTORY
        for where in rule.checked_in
        if where.startswith("components.checks.")
    }
    assert {"components.checks.cluster_queues", "components.checks.flavors"} <= modules
    known = {(Path(ref.file).name, ref.line) for rule in RULE_INVENTORY for ref in rule.upstream}
    for module in sorted(modules):
        text = (ROOT / (module.replace(".", "/") + ".py")).read_text()
        cited = {(m.group(1), int(m.group(2))) for m in re.finditer(r"(\w+\.go):(\d+)", text)}
        assert cited - known == set(), module
