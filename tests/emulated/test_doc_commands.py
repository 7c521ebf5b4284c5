"""The docs' cheap commands run as written: every `mkf --version`, `mkf validate` and
`mkf render` a page shows (none needs a cluster or the Pulumi CLI), in a copy of the project
as a user has it after the README's "Your first stack" (stacks/Pulumi.mine.yaml saved, the
change committed, origin/main where the README's --base names it). Each must end as the page
says: exit 0 (1 where a `--exit-code` diff is shown differing), no traceback. The unit tier
checks every other command parses (tests/unit/test_docs.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.ambient import as_a_user
from tests.helpers.doc_commands import ROOT, documented_commands, segments
from tests.helpers.kind_tier import copy_project

MKF = Path(sys.executable).parent / "mkf"
# What runs offline in a second: no cluster, no Pulumi CLI, no fleet directory.
CHEAP = {"--version", "validate", "render"}


def cheap_commands() -> list[tuple[str, list[str]]]:
    found = []
    for where, line, whole in documented_commands():
        if not whole:
            continue
        for words in segments(line):
            if (
                len(words) > 1
                and words[0] in ("mkf", ".venv/bin/mkf")
                and words[1] in CHEAP
                and "--fleet" not in words
            ):
                found.append((where, words[1:]))
    return found


def first_stack() -> str:
    """The stack file the README's "Your first stack" says to save as stacks/Pulumi.mine.yaml."""
    text = (ROOT / "README.md").read_text()
    after = text[text.index("Save as `stacks/Pulumi.mine.yaml`") :]
    return re.search(r"^```yaml\n(.*?)^```", after, re.S | re.M).group(1)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = copy_project(tmp_path_factory.mktemp("doc-commands") / "project")
    (project / "stacks" / "Pulumi.mine.yaml").write_text(first_stack())
    git = ["git", "-c", "user.name=docs", "-c", "user.email=docs@example.com"]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "mine"],
                 ["update-ref", "refs/remotes/origin/main", "HEAD"]):  # fmt: skip
        subprocess.run([*git, *args], cwd=project, check=True, capture_output=True)
    return project


def test_the_docs_show_cheap_commands() -> None:
    commands = cheap_commands()
    assert len(commands) >= 7, commands
    assert {words[0] for _, words in commands} == CHEAP


@pytest.mark.parametrize(("where", "words"), cheap_commands(), ids=lambda v: str(v))
def test_a_cheap_documented_command_runs_as_written(
    project: Path, where: str, words: list[str]
) -> None:
    result = subprocess.run(
        [str(MKF), *words],
        cwd=project,
        env=as_a_user(os.environ),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    shown = f"{where}: mkf {' '.join(words)}\n{result.stdout[-2000:]}{result.stderr[-2000:]}"
    assert "Traceback" not in result.stderr, shown
    assert result.returncode == 0, shown
    assert result.stdout.strip() or result.stderr.strip(), shown
