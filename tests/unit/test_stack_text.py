"""Reading stack text: every way a file can be unreadable or misleading is one clear error
with the file, the line, the config path where there is one, and a fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.checks.load import load_stack
from components.model.problems import FleetConfigError, Problem
from components.model.stack_file import parse_stack_text, read_stack_text
from tests.helpers.stack_texts import SMALL, cli, write_stack


def problems_of(tmp_path: Path, text: str) -> list[Problem]:
    path = write_stack(tmp_path, "t", text)
    with pytest.raises(FleetConfigError) as caught:
        load_stack(str(path))
    return caught.value.problems


def line_of(text: str, needle: str) -> int:
    """The 1-based line of the last occurrence of `needle` in `text`."""
    return text[: text.rindex(needle)].count("\n") + 1


def only(problems: list[Problem]) -> Problem:
    assert len(problems) == 1, "\n".join(map(str, problems))
    return problems[0]


# (id, text, config path, line, text in the message, text in the fix)
CASES = [
    (
        "duplicate key in a worker",
        SMALL.replace("    - name: worker1\n", "    - name: worker1\n      name: worker3\n"),
        "workers[0].name",
        "name: worker3",
        "duplicate key 'name' (first on line 7)",
        "keep one",
    ),
    (
        "duplicate config key",
        SMALL + "  multikueue-fleet:fleetName: other\n",
        "fleetName",
        "fleetName: other",
        "duplicate key 'multikueue-fleet:fleetName' (first on line 2)",
        "keep one",
    ),
    (
        "namespace typo",
        SMALL.replace("multikueue-fleet:workers:", "multikueue-flet:workers:"),
        "multikueue-flet:workers",
        "multikueue-flet:workers",
        "not this project's namespace",
        "did you mean 'multikueue-fleet:workers'?",
    ),
    (
        "another namespace with a project key",
        SMALL.replace("multikueue-fleet:queues:", "mkf:queues:"),
        "mkf:queues",
        "mkf:queues",
        "would be ignored",
        "multikueue-fleet:queues",
    ),
    (
        "bare key",
        SMALL.replace("multikueue-fleet:frameworks:", "frameworks:"),
        "frameworks",
        "frameworks:",
        "needs a namespace",
        "`multikueue-fleet:frameworks`",
    ),
    (
        "unknown top-level key",
        SMALL.replace("config:", "confg:", 1),
        "confg",
        1,
        "unknown top-level key",
        "did you mean 'config'?",
    ),
    ("empty file", "", "", 1, "the stack file is empty", "config:"),
    ("only comments", "# a stack\n# nothing yet\n", "", 1, "is empty", "config:"),
    ("top-level list", "- config\n- x\n", "", 1, "not a list", "config:"),
    ("config is a list", "config:\n  - a\n  - b\n", "config", 1, "not a list", "KEY: value"),
    ("config is empty", "config:\n", "config", 1, "`config:` is empty", "KEY: value"),
    (
        "config without project keys",
        "config:\n  kubernetes:context: kind-x\n",
        "config",
        1,
        "no multikueue-fleet: keys",
        "KEY: value",
    ),
    (
        "unparsable YAML",
        SMALL.replace("cpu: 4", "cpu: [4"),
        "",
        "memory: 8Gi",
        "flow sequence (from line 24), expected ',' or ']'",
        "YAML syntax",
    ),
    (
        "tab indentation",
        SMALL.replace("    name: manager", "\tname: manager"),
        "",
        "\tname",
        "not valid YAML",
        "indentation",
    ),
]


@pytest.mark.parametrize(
    ("text", "path", "line", "message", "fix"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_text(
    tmp_path: Path, text: str, path: str, line: int | str, message: str, fix: str
) -> None:
    if isinstance(line, str):
        line = line_of(text, line)
    problem = only(problems_of(tmp_path, text))
    assert problem.path == path, problem
    assert problem.line == line, problem
    assert message in problem.message
    assert fix in problem.hint


def test_every_problem_of_the_text_at_once(tmp_path: Path) -> None:
    text = SMALL.replace("multikueue-fleet:workers:", "multikueue-flet:workers:").replace(
        "multikueue-fleet:frameworks:", "frameworks:"
    )
    assert [p.path for p in problems_of(tmp_path, text)] == [
        "multikueue-flet:workers",
        "frameworks",
    ]


def test_missing_file_names_the_stacks(tmp_path: Path) -> None:
    with pytest.raises(FleetConfigError) as caught:
        load_stack(str(tmp_path / "Pulumi.nope.yaml"))
    problem = only(caught.value.problems)
    assert "no such stack file" in problem.message
    assert "dev" in problem.hint
    assert str(tmp_path / "Pulumi.nope.yaml") in str(caught.value)


def test_a_directory_is_not_a_stack(tmp_path: Path) -> None:
    with pytest.raises(FleetConfigError, match="is a directory"):
        load_stack(str(tmp_path))


def test_report_shows_file_and_line(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path, "t", SMALL.replace("name: worker2", "name: worker1\n      name: x")
    )
    with pytest.raises(FleetConfigError) as caught:
        load_stack(str(path))
    assert f"    at: {path}:11" in str(caught.value)


def test_secret_values_are_found() -> None:
    """Only the project's keys are kept (other namespaces belong to their providers), and
    secure values are marked; parse_stack_text gives the same two as read_stack_text."""
    text = (
        "config:\n"
        "  kubernetes:context: x\n"
        "  multikueue-fleet:fleetName: f\n"
        "  multikueue-fleet:workerKubeconfigs:\n"
        "    w1:\n"
        "      secure: v1:abcd\n"
    )
    read = read_stack_text(text)
    assert read.config == {"fleetName": "f", "workerKubeconfigs": {"w1": {"secure": "v1:abcd"}}}
    assert read.secret == {"workerKubeconfigs"}
    assert parse_stack_text(text) == (read.config, read.secret)
    assert read.lines["workerKubeconfigs.w1"] == 5
    assert read.lines["workerKubeconfigs.w1.secure"] == 6


def _alias_bomb() -> str:
    text = "config:\n  multikueue-fleet:fleetName: bomb\n  multikueue-fleet:kueue:\n"
    text += '    a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n'
    for i in range(1, 12):  # 9**12 values once expanded: a walk that expands them never ends
        text += f"    a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n"
    return text


# The inputs below would hang or crash a reader that is not bounded: each runs in its own
# process with a generous time limit, so a regression fails instead of hanging the suite.


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (_alias_bomb(), "more than 250,000 values once its YAML aliases are expanded"),
        ("config:\n" + "  # padding\n" * 500_000, "larger than 1,048,576 bytes"),
        ("config:\n  multikueue-fleet:x: " + "[" * 100_000 + "]" * 100_000 + "\n", "nested"),
        ("config:\n  multikueue-fleet:x: " + "- " * 100_000 + "x\n", "not valid YAML"),
        ("config:\n  multikueue-fleet:x: &a [*a]\n", "nested more than 64 levels"),
    ],
    ids=["alias bomb", "5 MB file", "deep brackets", "deep dashes", "recursive alias"],
)
def test_hostile_text_is_refused_quickly(tmp_path: Path, text: str, message: str) -> None:
    path = write_stack(tmp_path, "hostile", text)
    assert len(text) < 2_000 or len(text) > 100_000
    for command in (
        ("validate", "--stack", str(path)),
        ("render", "--stack", str(path), "--out", str(tmp_path / "out")),
    ):
        result = cli(*command, timeout=120)
        assert result.returncode == 1, result.stderr
        assert "Traceback" not in result.stderr
        assert message in result.stderr
        assert "fix: " in result.stderr
    assert not (tmp_path / "out").exists()


def test_validate_all_reports_every_stack_the_unreadable_ones_included(tmp_path: Path) -> None:
    write_stack(tmp_path, "a-good", SMALL)
    write_stack(tmp_path, "b-list", "- a\n")
    write_stack(tmp_path, "c-bomb", _alias_bomb())
    write_stack(tmp_path, "d-yaml", "config: [\n")
    write_stack(tmp_path, "e-good", SMALL.replace("fleetName: small", "fleetName: other"))
    result = cli("validate", "--all", "--stacks-dir", str(tmp_path))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    out = result.stdout + result.stderr
    for name in ("a-good", "e-good"):
        assert f"Pulumi.{name}.yaml: 0 error(s)" in out
    for name in ("b-list", "c-bomb", "d-yaml"):
        assert f"Pulumi.{name}.yaml: 1 error(s)" in out


def test_validate_all_passes_on_good_stacks(tmp_path: Path) -> None:
    write_stack(tmp_path, "one", SMALL)
    result = cli("validate", "--all", "--stacks-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
