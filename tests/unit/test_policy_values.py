"""The DispatchPolicy API refuses at the API server what the controller would refuse at
run time, and the stack's dispatcher.policy reads durations exactly as the controller does.

VALUES is one table of spec values, right and wrong, for every key the controller checks
(names, label keys and values, enums, numbers, durations, orderBy). For each, the
controller's verdict (controller/policy_api.py `parse`, on the object as the server
stores it) and the CRD's (controller/policy_api.py `crd`, checked offline by
components/checks/crd_schema.py, and by a real kube-apiserver when KUBEBUILDER_ASSETS is
set) must be the same."""

from __future__ import annotations

from typing import Any

import pytest

from components.checks.crd_schema import CrdSchemas
from components.model.spec import load_spec
from components.objects.dispatcher import default_policy
from controller.model import Policy
from controller.policy_api import (
    MAX_SELECTOR_LABELS,
    crd,
    is_duration,
    parse,
    policy_object,
    seconds,
)
from tests.helpers.fleet_config import base, only, problems_of
from tests.helpers.policy_cases import (
    LABELS,
    LONG_PREFIX,
    VALUES,
    controller_refuses,
    inventory,
    labels_at,
    policy_with_spec,
)

for text in (
    "5m",
    "1h30m",
    "0.5s",
    "500ms",
    "0s",
    "0",
    "5",
    "1d",
    "5m\n",
    "-5m",
    "1us",
    "",
    "5 m",
    "1.m",
    ".5m",
):
    VALUES.append((f"widenAfter {text!r}", {"widenAfter": text}))
    VALUES.append((f"drainTimeout {text!r}", inventory(drainTimeout=text)))
for where in ("clusterSelector", "inventory"):
    for name, labels in (
        ("ok", {"zone": "a", "example.com/gpu": "t4"}),
        ("empty value", {"zone": ""}),
        ("empty prefix", {"/zone": "a"}),
        ("empty name", {"example.com/": "a"}),
        ("space in key", {"bad key": "a"}),
        ("two slashes", {"a/b/c": "a"}),
        ("64-character name", {"x" * 64: "a"}),
        ("63-character name", {"x" * 63: "a"}),
        ("253-character prefix", {f"{LONG_PREFIX}/x": "a"}),
        ("254-character prefix", {f"b{LONG_PREFIX}/x": "a"}),
        ("upper-case prefix", {"Example.com/x": "a"}),
        ("64-character value", {"zone": "v" * 64}),
        ("value with a space", {"zone": "a b"}),
        ("value a number", {"zone": 1}),
        (f"{MAX_SELECTOR_LABELS} labels", LABELS),
        (f"{MAX_SELECTOR_LABELS + 1} labels", {**LABELS, "one-more": "x"}),
    ):
        VALUES.append((f"{where} {name}", labels_at(where, labels)))
    # Selectors the controller does not read: stored as written they would select every
    # worker, so the server must refuse them as the parser does.
    for name, selector in (
        ("shorthand (labels without matchLabels)", {"zone": "a"}),
        ("matchExpressions", {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}),
        (
            "matchLabels and matchExpressions",
            {"matchLabels": {"zone": "a"}, "matchExpressions": []},
        ),
        ("empty selector", {}),
    ):
        spec = (
            inventory(selector=selector) if where == "inventory" else {"clusterSelector": selector}
        )
        VALUES.append((f"{where} {name}", spec))
for order in (
    "name",
    "created",
    "label:zone",
    "label:example.com/zone",
    "label:",
    "label:bad key",
    "label:/zone",
    "label:a/b/c",
    "size",
    f"label:{LONG_PREFIX}/x",
    f"label:b{LONG_PREFIX}/x",
):
    VALUES.append((f"orderBy {order[:30]!r}", inventory(orderBy=order)))
VALUES += [
    ("inventory without multiKueueConfig", {"inventory": {"orderBy": "name"}}),
    ("multiKueueConfig upper case", {"inventory": {"multiKueueConfig": "Inv"}}),
    ("multiKueueConfig ok", {"inventory": {"multiKueueConfig": "inv.a"}}),
    ("accessProvider and properties", inventory(accessProvider="x", requiredProperties=["a"])),
]


SCHEMAS = CrdSchemas.from_documents([crd()])


def schema_refuses(obj: dict[str, Any]) -> list[str]:
    return SCHEMAS.problems(SCHEMAS.with_defaults(obj))


@pytest.mark.parametrize(("case", "spec"), VALUES, ids=[v[0] for v in VALUES])
def test_the_crd_and_the_controller_agree(case: str, spec: dict[str, Any]) -> None:
    obj = policy_with_spec("p", spec)
    by_schema = schema_refuses(obj)
    assert not [p for p in by_schema if p.startswith("unchecked rule")], by_schema
    # What the controller reads is what the server stored: pruned and defaulted.
    by_controller = controller_refuses(SCHEMAS.with_defaults(obj))
    assert bool(by_schema) == bool(by_controller), (by_schema, by_controller)
    # And one the controller takes as written is taken by the server too; one it refuses
    # as written is refused by the server too (not pruned into something it takes).
    assert bool(controller_refuses(obj)) == bool(by_schema), (case, by_schema)


def test_the_table_has_both_verdicts() -> None:
    """The agreement above means something only if the table holds both kinds."""
    verdicts = [bool(controller_refuses(policy_with_spec("p", spec))) for _, spec in VALUES]
    assert verdicts.count(True) > 30 and verdicts.count(False) > 20


def test_a_refusal_names_the_key_and_the_fix() -> None:
    (line,) = controller_refuses(policy_with_spec("p", {"widenAfter": "0"}))
    assert line.startswith("DispatchPolicy p: spec.widenAfter: '0' is refused")
    assert "fix: set widenAfter to a duration like 30s, 5m or 1h30m" in line
    (line,) = controller_refuses(
        policy_with_spec("p", labels_at("clusterSelector", {"/zone": "a"}))
    )
    assert line.startswith("DispatchPolicy p: spec.clusterSelector.matchLabels")
    assert "fix: set matchLabels to" in line


@pytest.mark.parametrize(
    "text", ["5m", "1h30m", "0.5s", "500ms", "0s", "0", "500us", "1d", "-5m", ".5m", "5m\n"]
)
def test_the_stack_reads_durations_as_the_controller_does(text: str) -> None:
    config = base()
    config["dispatcher"] = {"policy": {"widenAfter": text}}
    problems = [p for p in problems_of(config) if p.path == "dispatcher.policy.widenAfter"]
    assert bool(problems) == (not is_duration(text)), problems
    if problems:
        assert problems[0].hint  # one line with the fix, never a bare ValueError
        return
    # The stack's default policy is one the CRD and the controller both take, and means
    # the same time.
    spec, _ = load_spec(config, "t")
    assert spec is not None
    policy = default_policy(spec)
    obj = policy_object("default", policy)
    assert schema_refuses(obj) == [] and controller_refuses(obj) == []
    assert seconds(obj["spec"]["widenAfter"]) == seconds(text)


def test_the_stack_refuses_a_selector_the_crd_would() -> None:
    config = base()
    labels = {**LABELS, "one-more": "x"}
    config["workers"][0]["labels"] = labels
    config["dispatcher"] = {"policy": {"clusterSelector": labels}}
    assert "at most" in only(problems_of(config), "dispatcher.policy.clusterSelector").message
    config["dispatcher"]["policy"]["clusterSelector"] = LABELS
    assert [p for p in problems_of(config) if p.path.startswith("dispatcher")] == []


@pytest.mark.parametrize(("clusters", "percent"), [(1, 90), (4, 75), (20, 100), (2, 1)])
def test_the_stacks_hedging_reaches_the_dispatchers_policy(clusters: int, percent: int) -> None:
    """`dispatcher.policy.hedgeClusters` and `hedgeSharePercent` become the default
    DispatchPolicy's, which the CRD and the controller both take, meaning the same."""
    config = base()
    config["dispatcher"] = {"policy": {"hedgeClusters": clusters, "hedgeSharePercent": percent}}
    spec, _ = load_spec(config, "t")
    assert spec is not None
    policy = default_policy(spec)
    assert (policy.hedge_clusters, policy.hedge_share) == (clusters, percent / 100)
    obj = policy_object("default", policy)
    assert schema_refuses(obj) == [] and controller_refuses(obj) == []
    assert parse(obj)[0] == policy


def test_a_stack_that_says_nothing_gets_the_dispatchers_own_defaults() -> None:
    """The stack's defaults for dispatcher.policy (components/model/spec.py) are written out
    there, for the schema and the reference page; they must be the controller's `Policy()`
    (controller/model.py), the defaults BENCHMARKS.md section 4 chose, field for field."""
    spec, _ = load_spec(base(), "t")
    assert spec is not None
    assert default_policy(spec) == Policy(name="default")
