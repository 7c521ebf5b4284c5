"""The packages' import graph: every module imports on its own in a fresh interpreter, and
no module imports itself back through others (a cycle makes import order matter: the
module first imported decides which names exist yet). Function-level imports count too:
they only move the cycle to run time."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("controller", "components")


def modules() -> list[str]:
    return sorted(
        f"{package}.{path.stem}"
        for package in PACKAGES
        for path in (ROOT / package).glob("*.py")
        if path.stem not in ("__init__", "__main__")
    )


def imports_of(module: str, known: set[str]) -> set[str]:
    """The project modules `module` imports, anywhere in its code."""
    path = ROOT / (module.replace(".", "/") + ".py")
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in known}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module in known:
                found.add(node.module)
            # `from controller import policy_api` imports a module, not a name.
            found |= {f"{node.module}.{a.name}" for a in node.names} & known
    return found - {module}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle found by a depth-first walk, each as the modules around it."""
    found: list[list[str]] = []
    state: dict[str, str] = {}  # "open" while on the walk's path, "done" once finished
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                found.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    known = set(modules())
    found = cycles({m: imports_of(m, known) for m in known})
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


@pytest.mark.parametrize("module", [m for m in modules() if m.startswith("controller.")])
def test_each_controller_module_imports_alone(module: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", f"import {module}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
