"""components/checks holds one module per subject and one list that assembles the rules
(validate.RULES), as Kueue keeps one webhook file per kind (pkg/webhooks/
clusterqueue_webhook.go at v0.19.2): a rule written in a subject's module and left out of
the list would never run, and nothing else would say so."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from collections.abc import Callable
from typing import Any

import components.checks as checks
from components.checks import validate

# Shaped as a rule, and not one: the assembler itself, and the check of rendered objects
# (it runs on what the stack renders, after the rules: components/checks/limits.py).
NOT_RULES = {"components.checks.validate.validate", "components.checks.limits.object_problems"}


def _rule_shaped() -> dict[str, Callable[..., Any]]:
    """Every public function of components/checks taking a FleetSpec alone and giving
    Problems."""
    found = {}
    for module_info in pkgutil.iter_modules(checks.__path__):
        module = importlib.import_module(f"{checks.__name__}.{module_info.name}")
        for name, value in vars(module).items():
            if name.startswith("_") or not inspect.isfunction(value):
                continue
            if value.__module__ != module.__name__:
                continue  # imported from elsewhere
            signature = inspect.signature(value)
            params = list(signature.parameters.values())
            if (
                len(params) == 1
                and params[0].annotation == "FleetSpec"
                and "Problem" in str(signature.return_annotation)
            ):
                found[f"{module.__name__}.{name}"] = value
    return found


def test_every_rule_of_a_subject_is_in_the_one_list() -> None:
    shaped = _rule_shaped()
    assert len(shaped) > 40  # the search finds the rules at all
    listed = set(validate.RULES)
    missing = sorted(name for name, rule in shaped.items() if rule not in listed)
    assert missing == sorted(NOT_RULES), f"rules that never run: {set(missing) - NOT_RULES}"
    assert len(validate.RULES) == len(listed), "a rule listed twice runs twice"


def test_each_rule_lives_in_a_module_named_for_its_subject() -> None:
    """Not in the list's own module, nor outside components/checks; and the module
    docstring names every subject module that holds a rule, so it reads true."""
    modules = {rule.__module__ for rule in validate.RULES}
    assert all(m.startswith(f"{checks.__name__}.") for m in modules), modules
    assert validate.__name__ not in modules
    named = set(re.findall(r"(\w+)\.py", validate.__doc__ or ""))
    holding = {m.rsplit(".", 1)[1] for m in modules}
    assert holding <= named, f"not named in validate.py's docstring: {holding - named}"
