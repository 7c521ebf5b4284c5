"""The packages' import graph: every module imports on its own in a fresh interpreter, no
module imports itself back through others (a cycle makes import order matter: the module
first imported decides which names exist yet), and `components/` flows one way, each
stage importing only the stages before it. And the seam between the two packages holds
both ways: `components/` uses of the controller only its `controller.api` package, and
`controller/` imports neither `components/` nor Pulumi (its image holds controller/ alone).
Function-level imports count too: they only move a cycle, a backward import or a breach
of the seam to run time."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("controller", "components")
# bench/ scripts import each other by bare name (they run with bench/ on sys.path).
SCRIPTS = "bench"
# The data flow of components/, in order (README, "Layout"). A module may import its own
# stage and the ones before it. The modules directly in components/ (`python -m
# components`, and old module paths Pulumi states hold) come after every stage.
STAGES = ("model", "objects", "upstream", "checks", "resources", "cli")
# All that components/ may import of controller/ (controller/api/__init__.py says why).
SEAM = "controller.api"


def modules() -> list[str]:
    found = [
        ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if path.stem != "__main__"
    ]
    found += [f"{SCRIPTS}.{path.stem}" for path in (ROOT / SCRIPTS).glob("*.py")]
    return sorted(m.removesuffix(".__init__") for m in found)


def source_of(module: str) -> Path:
    path = ROOT / module.replace(".", "/")
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def imports_of(module: str, known: set[str], source: str | None = None) -> set[str]:
    """The project modules `module` imports, anywhere in its code (`source`: its text, read
    from its file when not given)."""
    path = source_of(module)
    tree = ast.parse(source if source is not None else path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in known}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            name = node.module
            if module.startswith(f"{SCRIPTS}.") and f"{SCRIPTS}.{name}" in known:
                name = f"{SCRIPTS}.{name}"  # `from dq_sim import ...` inside bench/
            if name in known:
                found.add(name)
            # `from controller import policy_api` imports a module, not a name.
            found |= {f"{name}.{a.name}" for a in node.names} & known
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


def stage_of(module: str) -> int | None:
    """Where `module` sits in the data flow of components/; None outside components/."""
    parts = module.split(".")
    if parts[0] != "components":
        return None
    if len(parts) >= 2 and parts[1] in STAGES:
        return STAGES.index(parts[1])
    return len(STAGES)  # components/__main__.py and the old module paths: after all stages


def backward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a later stage than the importer's own, as `module -> imported`."""
    found = []
    for module, imported in sorted(graph.items()):
        own = stage_of(module)
        if own is None:
            continue
        for other in sorted(imported):
            stage = stage_of(other)
            if stage is not None and stage > own:
                found.append(f"{module} -> {other}")
    return found


def imported(path: Path, source: str | None = None) -> set[str]:
    """Every module the file at `path` imports, anywhere in its code, third-party ones
    too (`source`: its text, read from the file when not given). `from controller import
    cli` imports `controller.cli`: a name imported from a top-level package counts as its
    module."""
    tree = ast.parse(source if source is not None else path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if "." in node.module:
                found.add(node.module)
            else:
                found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def seam_breaches(path: Path, source: str | None = None) -> list[str]:
    """The imports of the file at `path` that cross the seam the wrong way, as `file ->
    module`: from components/, anything of controller/ outside `SEAM`; from controller/,
    anything of components/ or Pulumi."""
    package = path.relative_to(ROOT).parts[0]
    found = []
    for module in sorted(imported(path, source)):
        top = module.split(".")[0]
        if package == "components":
            wrong = top == "controller" and module != SEAM and not module.startswith(f"{SEAM}.")
        else:
            wrong = top == "components" or top == "pulumi" or top.startswith("pulumi_")
        if wrong:
            found.append(f"{path.relative_to(ROOT)} -> {module}")
    return found


def test_components_use_only_the_controllers_api() -> None:
    found = [b for path in (ROOT / "components").rglob("*.py") for b in seam_breaches(path)]
    assert not found, f"imports of controller/ outside {SEAM}:\n" + "\n".join(found)


def test_the_controller_imports_neither_components_nor_pulumi() -> None:
    # The image holds controller/ only (controller/Dockerfile, .dockerignore).
    found = [b for path in (ROOT / "controller").rglob("*.py") for b in seam_breaches(path)]
    assert not found, "the controller importing the Pulumi side:\n" + "\n".join(found)


def test_the_seam_check_finds_a_breach_either_way() -> None:
    """A model module importing the controller's client, even inside a function, or the
    controller importing Pulumi or components/, is reported; the API package is not."""
    fieldtypes = ROOT / "components" / "model" / "fieldtypes.py"
    text = fieldtypes.read_text()
    assert seam_breaches(fieldtypes) == []
    late = "\n\ndef late():\n    from controller.kube import Kube\n    from controller import cli\n"
    assert seam_breaches(fieldtypes, text + late) == [
        "components/model/fieldtypes.py -> controller.cli",
        "components/model/fieldtypes.py -> controller.kube",
    ]
    assert seam_breaches(fieldtypes, text + "\nfrom controller import api, model\n") == [
        "components/model/fieldtypes.py -> controller.model",
    ]
    model = ROOT / "controller" / "model.py"
    text = model.read_text()
    assert seam_breaches(model) == []
    crossing = "\nimport pulumi_kubernetes\nfrom components.model import spec\n"
    assert seam_breaches(model, text + crossing) == [
        "controller/model.py -> components.model",
        "controller/model.py -> pulumi_kubernetes",
    ]


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    known = set(modules())
    found = cycles({m: imports_of(m, known) for m in known})
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_walk_sees_every_stage_and_bench() -> None:
    known = set(modules())
    for stage in STAGES:
        assert f"components.{stage}" in known
        assert any(m.startswith(f"components.{stage}.") for m in known), stage
    assert {"bench.dq_sim", "bench.dq_dispatchers"} <= known
    # bench/'s bare-name imports are seen: dq_dispatchers builds on dq_sim.
    assert "bench.dq_sim" in imports_of("bench.dq_dispatchers", known)


def test_the_order_check_finds_a_backward_import() -> None:
    """A model module that imported a builder, even inside a function, is reported."""
    known = set(modules())
    spec = source_of("components.model.spec").read_text()
    backward = spec + "\n\ndef late():\n    from components.objects.queues import queue_objects\n"
    graph = {m: imports_of(m, known) for m in known}
    assert backward_imports(graph) == []
    graph["components.model.spec"] = imports_of("components.model.spec", known, backward)
    assert backward_imports(graph) == [
        "components.model.spec -> components.objects.queues",
    ]
    # The same import the other way round (a builder importing the model) is allowed.
    assert "components.model.spec" in graph["components.objects.queues"]


def test_each_stage_imports_only_the_stages_before_it() -> None:
    known = set(modules())
    found = backward_imports({m: imports_of(m, known) for m in known})
    assert not found, f"imports against the data flow ({' -> '.join(STAGES)}):\n" + "\n".join(found)


def project_imports() -> set[tuple[str, str]]:
    """(module, name) for every `from components... / controller... import name` anywhere in
    the project's Python, function-level imports included."""
    found: set[tuple[str, str]] = set()
    files = [p for d in (*PACKAGES, SCRIPTS, "tests", "scripts") for p in (ROOT / d).rglob("*.py")]
    for path in [*files, ROOT / "__main__.py"]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.split(".")[0] in PACKAGES:
                    found |= {(node.module, a.name) for a in node.names}
            elif isinstance(node, ast.Import):
                found |= {(a.name, "") for a in node.names if a.name.split(".")[0] in PACKAGES}
    return found


def test_every_project_import_names_what_exists() -> None:
    """After a move, an import of the old path fails only when its code runs: a function-level
    import in a command nobody ran. Every one is resolved here, in a fresh interpreter."""
    script = (
        "import importlib, json, sys\n"
        "missing = []\n"
        "for module, name in json.load(sys.stdin):\n"
        "    try:\n"
        "        found = importlib.import_module(module)\n"
        "    except ImportError as exc:\n"
        "        missing.append(f'{module}: {exc}')\n"
        "        continue\n"
        "    if name and not hasattr(found, name):\n"
        "        try:\n"
        "            importlib.import_module(f'{module}.{name}')\n"
        "        except ImportError:\n"
        "            missing.append(f'{module}.{name}')\n"
        "print('\\n'.join(missing))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps(sorted(project_imports())),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", "imports of what does not exist:\n" + result.stdout


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


def test_commands_that_read_no_fleet_load_no_kubernetes_client() -> None:
    """mkf's parser and its offline commands (validate, render, ...) run in every test and
    CI step that starts mkf: the asynchronous Kubernetes client is a third of such a start,
    and only the commands that reach a running fleet import it (controller/kinds.py names
    the kinds without it)."""
    probe = (
        "import sys\n"
        "from components.cli.main import build_parser\n"
        "build_parser()\n"
        "import components.checks.load, components.cli.render, components.cli.capacity\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('kubernetes_asyncio', 'aiohttp', 'kubernetes')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", result.stdout
