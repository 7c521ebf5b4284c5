"""Every refusal of Kueue's rules (tests/helpers/kueue_rule_cases.py) beside what Kueue's real CRDs,
from the pinned release, say of the object the project would otherwise write."""

from __future__ import annotations

import pytest

from components.checks.crd_schema import CrdSchemas
from tests.helpers.kueue_rule_cases import CASES, RULE_KIND, Case, written_object


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_real_schema_agrees(case: Case, upstream_crds: CrdSchemas) -> None:
    obj = written_object(case)
    refused = upstream_crds.problems(upstream_crds.with_defaults(obj))
    if RULE_KIND[case.rule] == "schema":
        assert any(case.server_says in p for p in refused), refused
    else:
        # Only Kueue's webhook, the API server on a job, or Kueue itself sees it: the
        # CRD takes the object, so nothing offline but the project would stop it.
        assert refused == [], refused
