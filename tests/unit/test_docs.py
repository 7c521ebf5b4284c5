"""The docs cannot drift from the code: the generated pages are what `mkf reference` makes,
every documented command parses with the real parser (or names a script that exists, with
the flags it has), every stack key a page names exists in the model, every stack example
validates, every link resolves, and defaults appear only in generated tables."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import re
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from components.checks.load import load_checked
from components.cli.mkf import build_parser
from components.cli.reference import (
    PAGES,
    REGION,
    _models,
    _nested,
    documented_fields,
    field_doc,
    generated_pages,
)
from components.model.field_docs import FIELD_DEFAULTS, FIELD_DOCS
from components.model.spec import FleetSpec
from components.model.stack_file import read_stack_text
from controller.field_docs import CONTROLLER_DOCS
from controller.policy_api import PolicySpec
from controller.settings import SettingsFile
from tests.helpers.doc_commands import (
    DOCUMENTS,
    FENCE,
    INLINE,
    documented_commands,
    hand_written,
    relative,
    segments,
)
from tests.helpers.stack_texts import ROOT

# --- generated pages ------------------------------------------------------------------------


def test_the_generated_pages_are_what_the_code_makes() -> None:
    for path, text in generated_pages(build_parser()).items():
        assert path.read_text() == text, f"{relative(path)} is stale: run `mkf reference`"


def test_every_page_with_generated_regions_is_generated() -> None:
    for path in DOCUMENTS:
        if REGION.search(path.read_text()):
            assert path in PAGES, relative(path)


@pytest.mark.parametrize(
    ("root", "docs"),
    [(FleetSpec, FIELD_DOCS), (PolicySpec, CONTROLLER_DOCS), (SettingsFile, CONTROLLER_DOCS)],
)
def test_every_field_is_described(root: type[BaseModel], docs: dict[str, str]) -> None:
    missing = [
        f"{model.__name__}.{key}"
        for model, key in documented_fields(root)
        if not field_doc(docs, model, key)
    ]
    where = "components/model" if docs is FIELD_DOCS else "controller"
    assert not missing, f"describe these in {where}/field_docs.py, then `mkf reference`: {missing}"


def test_every_description_names_a_field() -> None:
    models = {m for root in (FleetSpec, PolicySpec, SettingsFile) for m, _ in _models(root, "")}
    known = {
        f"{cls.__name__}.{field.alias or name}"
        for model in models
        for cls in model.__mro__
        if issubclass(cls, BaseModel) and cls is not BaseModel
        for name, field in model.model_fields.items()
    }
    stale = (set(FIELD_DOCS) | set(CONTROLLER_DOCS) | set(FIELD_DEFAULTS)) - known
    assert not stale, f"no such field: {sorted(stale)}"


# --- commands -------------------------------------------------------------------------------


def check_named(parser: argparse.ArgumentParser, words: list[str]) -> str | None:
    """Why the subcommands and flags named do not exist (a command named in prose may leave
    out what it requires), or None."""
    for word in words:
        subcommands = next(
            (a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)),
            {},
        )
        if word in subcommands:
            parser = subcommands[word]
        elif word.startswith("-") and word != "-":
            options = {o for a in parser._actions for o in a.option_strings}
            if word.split("=")[0] not in options:
                return f"{parser.prog} has no {word}"
        elif subcommands:
            return f"{parser.prog} has no command {word}"
    return None


def check_command(words: list[str], whole: bool = True) -> str | None:
    """Why the command does not exist as documented, or None."""
    if not words:
        return None
    head, rest = words[0], words[1:]
    if head in ("source", "bash") and rest:
        head, rest = rest[0], rest[1:]
        if head.startswith("<("):
            return None
    if head.endswith("/python") and rest[:1] == ["-m"] and len(rest) > 1:
        head, rest = rest[1], rest[2:]
        if head in ("kindnode", "loopback"):
            return _parses(importlib.import_module(f"{head}.__main__")._parser(), rest)
        if head == "controller":
            rest = ["controller", *rest]
        elif head != "components":
            return None
        head = "mkf"
    elif head.endswith("/python") and rest and rest[0].startswith("bench/"):
        script = ROOT / rest[0]
        if not script.is_file():
            return f"no such benchmark {rest[0]}"
        source = script.read_text()
        flags = [w.split("=")[0] for w in rest[1:] if w.startswith("--")]
        unknown = [f for f in flags if f'"{f}"' not in source]
        return f"{rest[0]} has no {unknown}" if unknown else None
    if head.startswith("scripts/"):
        return None if (ROOT / head).is_file() else f"no such script {head}"
    if head in ("mkf", ".venv/bin/mkf") and not whole:
        return check_named(build_parser(), rest)
    if head in ("mkf", ".venv/bin/mkf"):
        return _parses(build_parser(), rest)
    return None


def _parses(parser: argparse.ArgumentParser, words: list[str]) -> str | None:
    """Why the parser refuses the words, or None."""
    try:
        with (
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.redirect_stderr(io.StringIO()) as err,
        ):
            parser.parse_args(words)
    except SystemExit as exit_:
        if exit_.code:
            return f"{parser.prog} refuses it: {err.getvalue().strip().splitlines()[-1]}"
    return None


def test_every_documented_command_exists() -> None:
    problems = []
    commands = documented_commands()
    assert len(commands) > 20  # the README's and the pages' commands are found
    for where, line, whole in commands:
        for words in segments(line):
            why = check_command(words, whole)
            if why:
                problems.append(f"{where}: `{line.strip()}`: {why}")
    assert not problems, "\n".join(problems)


def test_a_wrong_command_is_caught() -> None:
    assert check_command(["mkf", "render", "--difff"])
    assert check_command(["mkf", "validat"])
    assert check_command([".venv/bin/python", "-m", "controller", "explian", "a/b"])
    assert check_command(["scripts/upp.sh"])
    assert check_command([".venv-dev/bin/python", "bench/policy_bench.py", "--nope"])
    assert check_command(["mkf", "status", "--wait", "600"]) is None
    assert check_command(["mkf", "controller"], whole=False) is None
    assert check_command(["mkf", "controler"], whole=False)
    assert check_command(["mkf", "render", "--outt"], whole=False)
    assert check_command([".venv/bin/python", "-m", "kindnode", "build", "--for-stak", "dev"])
    assert check_command([".venv/bin/python", "-m", "loopback", "upp"])
    assert check_command(["v/python", "-m", "kindnode", "build", "--for-stack", "x"]) is None


# --- stack keys and examples --------------------------------------------------------------

TOP = {field.alias or name for name, field in FleetSpec.model_fields.items()}
SEGMENT = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")


def resolve(path: str) -> str | None:
    """Why the stack key path does not exist in the model, or None. Keys below a free-form
    map (labels, quotas) are the user's own and not checked."""
    parts = [p for p in re.sub(r"\[[^\]]*\]", "", path).split(".") if p]
    model: Any = FleetSpec
    for i, part in enumerate(parts):
        if model is None:
            return None  # under a map: the user's keys
        fields = {f.alias or n: f for n, f in model.model_fields.items()}
        if part not in fields:
            return f"{'.'.join(parts[: i + 1])}: no such key (known: {', '.join(fields)})"
        annotation = fields[part].annotation
        inner = [m for m, suffix in _nested(annotation) if ".<key>" not in suffix]
        model = None if typing.get_origin(annotation) is dict or not inner else inner[0]
    return None


def stack_paths(text: str) -> list[tuple[int, str]]:
    found = []
    for match in INLINE.finditer(text):
        span = match.group(1).split(":")[0].strip()
        first = re.split(r"[.\[]", span, maxsplit=1)[0]
        if first not in TOP or span == first:
            continue
        parts = [p for p in re.sub(r"\[[^\]]*\]", "", span).split(".") if p]
        if all(SEGMENT.match(p) for p in parts):
            found.append((text[: match.start()].count("\n") + 1, span))
    return found


def test_every_documented_stack_key_exists() -> None:
    problems = []
    checked = 0
    for path in DOCUMENTS:
        for line, span in stack_paths(hand_written(path.read_text())):
            checked += 1
            why = resolve(span)
            if why:
                problems.append(f"{relative(path)}:{line}: `{span}`: {why}")
    assert checked > 10
    assert not problems, "\n".join(problems)


def test_a_key_that_does_not_exist_is_caught() -> None:
    assert resolve("dispatcher.policy.clusterSelector.matchLabels") is None  # a flat map
    assert resolve("queues.flavors[0].nodeLabels") is None
    assert resolve("kueue.waitForPodsReady.onManagr")
    assert resolve("dispatcher.policy.matchLabels")


def test_every_stack_example_validates() -> None:
    checked = 0
    for path in DOCUMENTS:
        for match in FENCE.finditer(path.read_text()):
            if match.group(1) != "yaml" or "multikueue-fleet:" not in match.group(2):
                continue
            checked += 1
            where = f"{relative(path)} (example {checked})"
            read = read_stack_text(match.group(2), where)
            load_checked(read.config, "example", where, read.secret, read.lines)
    assert checked >= 4


# --- links, defaults, length ----------------------------------------------------------------


# Pages another change in flight adds (issue 21: the Kueue rules the checks follow): a link
# to one is accepted while it is missing, and checked like any other once it is there.
ANNOUNCED = {ROOT / "docs" / "kueue-rules.md"}


def test_every_relative_link_resolves() -> None:
    problems = []
    for path in DOCUMENTS:
        for target in re.findall(r"\]\(([^)]+)\)", path.read_text()):
            if re.match(r"[a-z]+://", target) or target.startswith("#"):
                continue
            linked = (path.parent / target.split("#")[0]).resolve()
            if not linked.exists() and linked not in ANNOUNCED:
                problems.append(f"{relative(path)}: {target}")
    assert not problems, problems


def test_defaults_are_only_in_generated_tables() -> None:
    """A hand-written table of defaults drifts (the README once said `queues.flavors`
    defaults to `default-flavor`); defaults belong in the generated tables."""
    for path in DOCUMENTS:
        for line in hand_written(path.read_text()).splitlines():
            cells = [c.strip().lower() for c in line.split("|")] if line.startswith("|") else []
            assert "default" not in cells, f"{relative(path)}: hand-written defaults: {line}"


def test_the_readme_is_a_front_door() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: move detail to docs/"


def test_parser_help_is_consistent() -> None:
    """Every subcommand's help text is there for the generated command table."""
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            assert all(helps.get(name) for name in action.choices), helps


# --- running a fleet: prerequisites, day-2 how-tos, the diagram -----------------------------


def test_the_operations_page_covers_every_stack_kind_and_day2_operation() -> None:
    from components.model.spec import PROVIDERS

    text = (ROOT / "docs" / "operations.md").read_text()
    rows = {
        line.split("|")[1].strip().strip("`")
        for line in text.splitlines()
        if line.startswith("| `")
    }
    assert set(PROVIDERS) | {"loopback"} <= {row.split(" ")[0].strip("`") for row in rows}
    for tool in ("gcloud", "gke-gcloud-auth-plugin", "aws eks get-token", "kubectl", "Docker"):
        assert tool in text, tool
    for heading in (
        "### Add a worker",
        "### Remove a worker",
        "### Change quotas safely",
        "### Rotate a worker's credentials",
        "### Move to another Kueue release",
        "### Before a GKE stack",
        "### Before an EKS stack",
        "### Upgrade Kubernetes on a kind cluster",
        "### Upgrade Kubernetes on a GKE or EKS cluster",
        "### Back up and restore the stack's state",
        "### A stack left locked",
    ):
        assert heading in text, heading
    assert "![" in text and "(fleet.svg)" in text


def test_the_diagram_is_drawn_from_what_the_dev_stack_renders(tmp_path: Path) -> None:
    """docs/fleet.svg is what the code renders for the dev stack, not a drawing: it names the
    stack's workers and the identities the workers really get, and changes with the stack."""
    from components.cli.diagram import STACK, SVG, diagram_text
    from components.objects.worker_access import MULTIKUEUE_SA, READER_SA

    committed = SVG.read_text()
    assert committed == diagram_text()  # also in the generated pages above
    config = yaml.safe_load(STACK.read_text())
    workers = [w["name"] for w in config["config"]["multikueue-fleet:workers"]]
    assert workers
    for name in workers:
        assert f"worker cluster {name} (kind)" in committed, name
    assert f"ServiceAccount multikueue-fleet-system/{READER_SA}" in committed
    assert f"ServiceAccount kueue-system/{MULTIKUEUE_SA}" in committed
    assert f"as {READER_SA}" in committed and f"as {MULTIKUEUE_SA}" in committed
    assert "ServiceAccount reader" not in committed  # the name the hand-drawn picture gave
    assert "ClusterQueue cluster-queue: cpu 8, memory 16Gi" in committed  # the workers' sum

    # A third worker and another quota: the picture follows, which a drawing would not.
    config["config"]["multikueue-fleet:workers"].append({"name": "gpu-pool"})
    queue = config["config"]["multikueue-fleet:queues"]["clusterQueues"][0]
    queue["resourceGroups"][0]["flavors"][0]["resources"]["cpu"] = 6
    changed = tmp_path / "Pulumi.dev.yaml"
    changed.write_text(yaml.safe_dump(config))
    drawn = diagram_text(changed)
    assert drawn != committed
    assert "worker cluster gpu-pool (kind)" in drawn
    assert drawn.count(f"ServiceAccount multikueue-fleet-system/{READER_SA}") == len(workers) + 1
    assert "ClusterQueue cluster-queue: cpu 18, memory 24Gi" in drawn  # 3 x 6, 3 x 8Gi
    assert "MultiKueueClusters: worker1, worker2, gpu-pool" in drawn


def test_the_diagram_text_fits_its_boxes() -> None:
    """Widths from the longest line, heights from the line count: no text runs out of its
    box, and each part sits inside its cluster (a browser's Helvetica is narrower than the
    6.5 px a character is given)."""
    from components.cli.diagram import CHAR, layout

    _, boxes, _, bottom = layout()
    for box in boxes:
        assert max(len(t) for t in box.text) * CHAR + 10 <= box.w, box.text
        assert box.line_y(len(box.text) - 1) + 5 <= box.y + box.h, box.text
        assert box.y + box.h <= bottom
    clusters = [b for b in boxes if b.style == "cluster"]
    for part in (b for b in boxes if b.style in ("part", "secret")):
        assert any(
            c.x < part.x and part.x + part.w < c.x + c.w and c.y < part.y
            and part.y + part.h < c.y + c.h
            for c in clusters
        ), part.text  # fmt: skip


def test_every_file_a_documented_command_writes_is_ignored_by_git() -> None:
    """A shell block of the docs that writes a file (`> FILE`) writes it where git ignores
    it: a how-to followed literally leaves the tree clean and commits no credential (the
    dispatcher's kubeconfig holds a live token)."""
    import subprocess

    written = []
    for path in DOCUMENTS:
        for language, body in FENCE.findall(path.read_text()):
            if language not in ("sh", "bash"):
                continue
            for line in body.splitlines():
                if not line.lstrip().startswith("#"):
                    written += [
                        (relative(path), t)
                        for t in re.findall(r"(?<![0-9&>])>\s*([^\s|;&)]+)", line)
                    ]
    assert any("dispatcher.kubeconfig" in target for _, target in written)
    for page, target in written:
        ignored = subprocess.run(
            ["git", "check-ignore", "-q", "--no-index", target], cwd=ROOT, check=False
        )
        assert ignored.returncode == 0, f"{page} writes {target}, which git does not ignore"


def test_the_layout_names_every_module() -> None:
    """docs/architecture.md's layout is where a contributor finds a module's duty: each of
    components/ and controller/ is named there (by its file name, under its package)."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    missing = [
        str(path.relative_to(ROOT))
        for package in ("components", "controller")
        for path in sorted((ROOT / package).rglob("*.py"))
        if path.name != "__init__.py"
        and "__pycache__" not in path.parts
        and not re.search(rf"(?<![\w.]){re.escape(path.name)}\b", page)
    ]
    assert missing == [], f"docs/architecture.md's layout does not name {missing}"
