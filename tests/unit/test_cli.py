"""Every command-line entry point of `python -m components` this side owns (validate,
render, reader-access, status, schema), run as a user would with bad input: one clear
error, a non-zero exit, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.helpers.stack_texts import SMALL, cli, write_stack


@pytest.fixture
def small(tmp_path: Path) -> Path:
    return write_stack(tmp_path, "small", SMALL)


def bad_runs(tmp_path: Path, small: Path) -> list[tuple[tuple[str, ...], int, str]]:
    empty = tmp_path / "empty"
    empty.mkdir(exist_ok=True)
    stale = tmp_path / "stale.json"
    stale.write_text("{}")
    broken = tmp_path / "broken"
    broken.mkdir(exist_ok=True)
    (broken / "summary.json").write_text('{"clusters": [{"name": "m"}]}')
    return [
        (("validate", "--stack", "nosuch"), 1, "no such stack file"),
        (("validate",), 2, "validate needs --stack NAME or --all"),
        (("validate", "--all", "--stacks-dir", str(empty)), 2, "no stack files"),
        (("render", "--stack", "nosuch", "--out", str(tmp_path / "o")), 1, "no such stack file"),
        (("render",), 2, "render needs one --stack NAME"),
        (("render", "--diff", "--stack", str(small)), 2, "not inside this checkout"),
        (
            ("render", "--diff", "--old", "no-such-rev:stacks/x.yaml", "--new", str(small)),
            2,
            "no-such-rev:stacks/x.yaml",
        ),
        (("reader-access", "--stack", "nosuch", "--cluster", "w"), 1, "no such stack file"),
        (("reader-access", "--stack", str(small), "--cluster", "Bad_Name"), 2, "DNS label"),
        (("reader-access", "--cluster", "w"), 2, "reader-access needs one --stack NAME"),
        (("status", "--dir", str(empty)), 2, "summary.json not found"),
        (("status", "--dir", str(broken)), 2, "cannot be read"),
        (("status", "--wait", "soon"), 2, "'soon' is not a number of seconds"),
        # float() takes these, and a wait of nan or inf seconds never ends.
        (("status", "--wait", "nan"), 2, "'nan' is not a finite number of seconds"),
        (("status", "--wait", "inf"), 2, "'inf' is not a finite number of seconds"),
        (("status", "--wait", "-5"), 2, "'-5' is not a finite number of seconds"),
        (
            ("validate", "--all", "--stacks-dir", str(tmp_path / "no-such-dir")),
            2,
            f"--stacks-dir {tmp_path / 'no-such-dir'} does not exist",
        ),
        (("validate", "--all", "--stacks-dir", str(stale)), 2, "is not a folder"),
        (("schema", "--check", "--out", str(stale)), 1, "mkf schema"),
        (("no-such-command",), 2, "invalid choice"),
        (("--debug", "validate", "--stack", "nosuch"), 1, "no such stack file"),
        (("validate", "--stack", "nosuch", "--debug", "-q"), 1, "no such stack file"),
        (("render", "--diff", "--old", str(small)), 2, "render --diff needs --stack NAME"),
        (("status", "-o", "yaml"), 2, "invalid choice: 'yaml'"),
        (("job", "default/sample-job", "--dir", str(empty)), 2, "summary.json not found"),
        (("job", "sample-job", "--kind", "cronjob"), 2, "invalid choice: 'cronjob'"),
        (("job", "x", "--watch", "--interval", "nan"), 2, "'nan' is not a finite number"),
        (("logs", "sample-job", "--since", "soon"), 2, "'soon' is not a duration"),
        (("logs", "x", "--pod", "p", "--all-pods"), 2, "not allowed with argument --pod"),
        (("logs", "x", "--dir", str(broken)), 2, "cannot be read"),
    ]


# Each a process of its own, as a user runs it: spread over the unit tier's workers.
CHUNKS = 4


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_bad_input_is_one_clear_error(tmp_path: Path, small: Path, chunk: int) -> None:
    for args, code, text in bad_runs(tmp_path, small)[chunk::CHUNKS]:
        result = cli(*args, cwd=tmp_path)
        assert result.returncode == code, (args, result.stderr)
        assert "Traceback" not in result.stderr, (args, result.stderr)
        assert text in result.stderr, (args, result.stderr)


def test_diff_of_a_stack_new_since_the_base_shows_it_all_added(tmp_path: Path, small: Path) -> None:
    result = cli(
        "render", "--diff", "--old", "HEAD:stacks/Pulumi.brand-new.yaml", "--new", str(small)
    )
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]  # said first, not after a thousand lines
    assert first.startswith("HEAD:stacks/Pulumi.brand-new.yaml does not exist: the whole stack")
    assert "    +apiVersion" not in result.stdout  # each object's line, not its body
    assert len(result.stdout.splitlines()) < 80
    for directory in ("manager", "worker-worker1", "worker-worker2"):
        assert f"== {directory}: cluster added" in result.stdout
    assert "+ ClusterQueue cq (added)" in result.stdout
    assert "(changed)" not in result.stdout and "(removed)" not in result.stdout


def test_status_reads_what_up_wrote(tmp_path: Path) -> None:
    # A summary naming a kubeconfig of an unreachable cluster: status answers (not ready).
    (tmp_path / "m.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "m",
                "clusters": [{"name": "m", "cluster": {"server": "https://127.0.0.1:9"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "m", "context": {"cluster": "m", "user": "u"}}],
            }
        )
    )
    summary = {"clusters": [{"name": "m", "role": "manager", "kubeconfig": "m.yaml"}]}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    result = cli("status", "--dir", str(tmp_path), "--json", timeout=120)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert json.loads(result.stdout)["ready"] is False
