"""The real tier: promtool v3.16.0, built from its Go module (tools/promtool), checks the
alerting rules in monitoring/ and runs their unit tests, with the commands
docs/operations.md shows; Prometheus' parser reads every query of the rules and the dashboard.
That each metric they name is exported is checked by scraping the loopback fleet
(tests/real/test_real_dispatch.py)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.monitoring import (
    MONITORING,
    ROOT,
    RULE_TESTS,
    RULES,
    metric_names,
    queries,
)
from tests.helpers.real_fleet import binaries


@pytest.fixture(scope="module")
def promtool() -> Path:
    return binaries(("promtool",))["promtool"]


def documented_commands() -> list[list[str]]:
    """The lines of the shell block in docs/operations.md, "Dashboards and alerts"."""
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text.split("## Dashboards and alerts", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "no shell block in the section"
    lines = [shlex.split(line, comments=True) for line in block.group(1).splitlines()]
    return [words for words in lines if words]


def run(promtool: Path, args: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool), *args], cwd=cwd, capture_output=True, text=True, check=False
    )


def test_promtool_says_it_is_the_pinned_release(promtool: Path) -> None:
    result = run(promtool, ["--version"])
    assert result.returncode == 0 and "promtool, version 3.16.0 " in result.stdout, result


def test_the_documented_commands_build_promtool_check_the_rules_and_pass_their_tests(
    promtool: Path,
) -> None:
    build, *checks = documented_commands()
    assert build[1:] == ["-m", "loopback", "build", "promtool"], build
    built = subprocess.run(
        [sys.executable, *build[1:]], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert built.returncode == 0 and "promtool" in built.stdout, built
    assert [words[:3] for words in checks] == [
        [".tools/bin/promtool", "check", "rules"],
        [".tools/bin/promtool", "test", "rules"],
    ]
    for words in checks:
        # .tools/bin/promtool is toolchain.BIN_DIR's promtool unless MKF_TOOLS_BIN moves it.
        result = run(promtool, words[1:])
        assert result.returncode == 0, f"{shlex.join(words)}:\n{result.stdout}{result.stderr}"
        assert "SUCCESS" in result.stdout, result.stdout


def test_an_alert_changed_without_its_test_fails_promtool_test(
    promtool: Path, tmp_path: Path
) -> None:
    """The unit tests bite: a worker must now be unhealthy for 10 minutes, not 5, and the
    case that expects the alert at 8 minutes fails."""
    changed = RULES.read_text().replace(
        "expr: mkf_worker_healthy == 0\n        for: 5m",
        "expr: mkf_worker_healthy == 0\n        for: 10m",
    )
    assert changed != RULES.read_text()
    (tmp_path / RULES.name).write_text(changed)
    shutil.copyfile(RULE_TESTS, tmp_path / RULE_TESTS.name)
    result = run(promtool, ["test", "rules", RULE_TESTS.name], cwd=tmp_path)
    assert result.returncode != 0, result.stdout
    assert "MultiKueueWorkerUnhealthy" in result.stdout + result.stderr


def test_the_metric_names_are_what_prometheus_parser_sees(promtool: Path) -> None:
    """Functions, aggregations, label names in by/on, strings with braces and offsets are
    not metric names; a selector by __name__ is."""
    expr = (
        'histogram_quantile(0.9, sum by (le, cluster) (rate(a_seconds_bucket{x="{y}"}[5m] '
        'offset 1m))) / on (job) group_left (pod) b_total and {__name__="c_gauge"} '
        "or vector(0) unless absent(d_info) > bool 1"
    )
    assert metric_names(promtool, expr) == {"a_seconds_bucket", "b_total", "c_gauge", "d_info"}
    with pytest.raises(ValueError, match="does not parse"):
        metric_names(promtool, "sum(rate(a_total[5m])")
    with pytest.raises(ValueError, match="without a metric name"):
        metric_names(promtool, '{job="x"}')


def test_every_rule_and_panel_query_parses_and_names_a_metric(promtool: Path) -> None:
    found = queries()
    assert len(found) > 30 and MONITORING.is_dir()
    problems = []
    for where, expr in found:
        try:
            if not metric_names(promtool, expr):
                problems.append(f"{where}: names no metric: {expr}")
        except ValueError as exc:
            problems.append(f"{where}: {exc}")
    assert not problems, "\n".join(problems)
