"""`mkf`, the installed command: pyproject's console script, the same verbs as the `python
-m` forms, --version, --debug in every help, flags before or after the subcommand, and shell
completion generated from the parser (run in bash, and in zsh where it is installed)."""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from components.cli import main as fleet
from components.cli.completion import command_tree, completion_script
from components.cli.mkf import build_parser
from controller import cli as controller
from tests.helpers.stack_texts import ROOT, SMALL, write_stack

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
MKF = Path(sys.executable).parent / "mkf"


def test_the_console_script_is_declared_and_resolves() -> None:
    target = PYPROJECT["project"]["scripts"]["mkf"]
    module, _, function = target.partition(":")
    assert callable(getattr(importlib.import_module(module), function))
    packages = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    assert {"components", "controller"} <= set(packages)


def test_the_installed_command_runs_from_anywhere(tmp_path: Path) -> None:
    """scripts/test.sh installs the project into this environment (`pip install -e .`)."""
    assert MKF.is_file(), f"{MKF} is missing: run `pip install --no-deps -e .` (test.sh does)"
    version = subprocess.run([MKF, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith(f"mkf {PYPROJECT['project']['version']} (Kueue v0.19.2")
    small = write_stack(tmp_path, "small", SMALL)
    result = subprocess.run(
        [MKF, "validate", "--stack", str(small), "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert (result.returncode, result.stderr) == (0, "")
    result = subprocess.run(
        [MKF, "controller", "explain", "just-a-name"], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 2 and "is not <namespace>/<name>" in result.stderr


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def every_parser(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    return [parser] + [p for sub in subcommands(parser).values() for p in every_parser(sub)]


def test_the_same_verbs_as_the_python_m_forms() -> None:
    components = argparse.ArgumentParser()
    fleet.configure(components)
    ctl = argparse.ArgumentParser()
    controller.configure(ctl)
    mkf = subcommands(build_parser())
    assert set(mkf) == set(subcommands(components)) | {"controller", "completion"}
    assert set(subcommands(mkf["controller"])) == set(subcommands(ctl)) == {"run", "explain"}


def test_every_help_names_debug_and_quiet() -> None:
    components = argparse.ArgumentParser(prog="python -m components")
    fleet.configure(components)
    ctl = argparse.ArgumentParser(prog="python -m controller")
    controller.configure(ctl)
    for top in (build_parser(), components, ctl):
        for parser in every_parser(top):
            text = parser.format_help()
            if parser.prog.endswith("completion"):
                continue  # prints a script: nothing to debug or quiet
            assert "--debug" in text and "-q, --quiet" in text, parser.prog


@pytest.mark.parametrize(
    "args",
    [
        ["--debug", "validate", "--stack", "nosuch"],
        ["validate", "--stack", "nosuch", "--debug"],
        ["-q", "controller", "--kubeconfig", "K", "explain", "a/b"],
        ["controller", "explain", "a/b", "--kubeconfig", "K", "-q"],
        ["controller", "--debug", "run", "--config", "C"],
        ["completion", "bash", "-q"],
        ["-q", "completion", "zsh"],
    ],
)
def test_flags_before_or_after_the_subcommand(args: list[str]) -> None:
    parsed = build_parser().parse_args(args)
    if "--debug" in args:
        assert parsed.debug is True
    if "-q" in args:
        assert parsed.quiet is True
    if "--kubeconfig" in args:
        assert parsed.kubeconfig == "K"
    if "--config" in args:
        assert parsed.config == "C"


def test_controller_flags_after_the_subcommand(tmp_path: Path) -> None:
    """`explain x --kubeconfig f` once failed: controller flags had to come first."""
    result = subprocess.run(
        [sys.executable, "-m", "controller", "explain", "ns/wl", "--kubeconfig", "nofile"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert result.returncode == 1
    assert result.stderr.startswith("kubeconfig nofile (from --kubeconfig): no such file")


# --- completion ---------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A directory with stacks in it, where completion offers their names."""
    (tmp_path / "stacks").mkdir()
    for name in ("dev", "gke"):
        (tmp_path / "stacks" / f"Pulumi.{name}.yaml").write_text("config: {}\n")
    return tmp_path


CASES = [
    ("mkf ren", ["render"]),
    ("mkf render --st", ["--stack"]),
    ("mkf render --stack ", ["dev", "gke"]),
    ("mkf --debug validate --stack g", ["gke"]),
    ("mkf status -o ", ["json", "text"]),
    ("mkf status --wait ", []),
    ("mkf controller ex", ["explain"]),
    ("mkf controller explain --conn", ["--connect-timeout"]),
    ("mkf completion ", ["bash", "zsh"]),
    ("mkf up --base c", []),  # no stack named c* here
]


def bash_completions(script: str, line: str, cwd: Path) -> list[str]:
    words = line.split(" ")
    program = (
        f"{script}\nCOMP_WORDS=({' '.join(repr(w) for w in words)})\n"
        f"COMP_CWORD={len(words) - 1}\n_mkf\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n"
    )
    result = subprocess.run(
        ["bash", "-c", program], cwd=cwd, capture_output=True, text=True, check=True
    )
    return sorted(w for w in result.stdout.splitlines() if w)


@pytest.mark.parametrize(("line", "expected"), CASES)
def test_bash_completion(project: Path, line: str, expected: list[str]) -> None:
    script = completion_script(build_parser(), "bash")
    assert bash_completions(script, line, project) == expected


def test_completion_knows_every_command_and_flag() -> None:
    tree = command_tree(build_parser(), "mkf")
    assert "mkf controller explain" in tree and "mkf render" in tree
    assert {"--diff", "--out", "-o", "--debug", "-q"} <= set(tree["mkf render"].words)
    assert "--version" in tree["mkf"].words
    script = completion_script(build_parser(), "zsh")
    assert script.startswith("#compdef mkf\n")
    for path in tree:
        assert f'"{path}")' in script, path


@pytest.mark.parametrize(("line", "expected"), CASES)
def test_zsh_completion(project: Path, line: str, expected: list[str]) -> None:
    """The zsh script run with `compadd` and `_files` standing in for the completion
    system's own: they print what they were offered. zsh is a set-up prerequisite
    (README; scripts/test.sh stops without it, .ci/run installs it), so its absence is a
    failure, not a skip."""
    if shutil.which("zsh") is None:
        pytest.fail("zsh is not installed: `apt-get install zsh` (see the README's set-up)")
    script = completion_script(build_parser(), "zsh")
    words = line.split(" ")
    program = (
        f"{script}\ncompadd() {{ shift; print -l -- $@ }}\n_files() {{ }}\n"
        f"words=({' '.join(repr(w) for w in words)})\nCURRENT={len(words)}\n_mkf\n"
    )
    result = subprocess.run(
        ["zsh", "-f", "-c", program], cwd=project, capture_output=True, text=True, check=True
    )
    offered = [w for w in result.stdout.splitlines() if w]
    current = words[-1]
    # compadd filters by the current word itself; the stand-in gets every candidate.
    assert sorted(w for w in offered if w.startswith(current)) == expected


def test_the_version_of_a_checkout_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    from components.cli import version as module

    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(module.importlib.metadata, "version", missing)
    assert module.version() == PYPROJECT["project"]["version"]


@pytest.mark.parametrize(
    ("command", "refused"),
    [("down", ["--out", "--ready-timeout", "--base"]), ("preview", ["--out", "--ready-timeout"])],
)
def test_down_and_preview_offer_only_the_flags_they_use(command: str, refused: list[str]) -> None:
    parser = build_parser()
    for flag in refused:
        with pytest.raises(SystemExit):
            parser.parse_args([command, "--name", "x", flag, "1"])
    for flag in ("--out", "--ready-timeout"):
        parser.parse_args(["up", flag, "1"])  # up keeps them
    assert parser.parse_args(["down", "--name", "x", "--timeout", "60"]).timeout == 60


def test_mkf_acts_on_the_project_it_stands_in_and_says_which(tmp_path: Path) -> None:
    """Found upward by its Pulumi.yaml, as pulumi and git find theirs: a second clone's
    stacks, not those of the checkout mkf was installed from."""
    clone = tmp_path / "clone"
    (clone / "stacks").mkdir(parents=True)
    shutil.copy(ROOT / "Pulumi.yaml", clone / "Pulumi.yaml")
    write_stack(clone / "stacks", "mine", SMALL)
    inside = clone / "docs" / "deeper"
    inside.mkdir(parents=True)
    at_root = subprocess.run(
        [MKF, "validate", "--stack", "mine"], cwd=clone, capture_output=True, text=True
    )
    assert at_root.returncode == 0, at_root.stderr
    assert at_root.stdout.startswith("stacks/Pulumi.mine.yaml: 0 error(s)")
    assert "note: acting on" not in at_root.stderr
    below = subprocess.run(
        [MKF, "validate", "--stack", "mine"], cwd=inside, capture_output=True, text=True
    )
    assert below.returncode == 0, below.stderr
    assert "Pulumi.mine.yaml: 0 error(s)" in below.stdout
    assert f"note: acting on the project at {clone} (found above {inside})" in below.stderr
    # Another Pulumi project above is not this one: the installed checkout, said so.
    other = tmp_path / "other"
    other.mkdir()
    (other / "Pulumi.yaml").write_text("name: something-else\nruntime: python\n")
    outside = subprocess.run(
        [MKF, "validate", "--stack", "mine"], cwd=other, capture_output=True, text=True
    )
    assert outside.returncode == 1  # no stack `mine` there
    assert f"acting on the checkout mkf was installed from, {ROOT}" in outside.stderr
