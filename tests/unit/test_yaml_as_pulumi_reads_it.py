"""Stack files are read as Pulumi reads them (components/model/yaml_v3.py: gopkg.in/yaml.v3
v3.0.1 resolve.go, into untyped values), each scalar YAML 1.1 reads otherwise is a warning
with its line and the quoted fix, and characters YAML refuses are named by line and column.
tests/real/test_pulumi_engine.py holds the same table against the real Pulumi CLI."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.checks.load import load_stack
from components.model import stack_yaml
from components.model.problems import FleetConfigError
from components.model.stack_file import read_stack_text
from components.model.yaml_v3 import resolve_plain
from tests.helpers.stack_texts import ROOT, cli

DEV_FILE = ROOT / "stacks" / "Pulumi.dev.yaml"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        # YAML 1.2's booleans only; 1.1's yes/no/on/off/y/n stay text.
        ("true", True),
        ("False", False),
        ("TRUE", True),
        ("no", "no"),
        ("yes", "yes"),
        ("On", "On"),
        ("off", "off"),
        ("y", "y"),
        ("N", "N"),
        ("", None),
        ("~", None),
        ("Null", None),
        # strconv.ParseInt(s, 0, 64) once underscores are gone: 1.1's octal and 1.2's.
        ("012", 10),
        ("0o17", 15),
        ("0x1F", 31),
        ("0b101", 5),
        ("-0b11", -3),
        ("1_000", 1000),
        ("+12", 12),
        ("9223372036854775807", 2**63 - 1),
        ("18446744073709551615", 2**64 - 1),
        # no base 60, and what ParseInt refuses may still be a float
        ("1:30", "1:30"),
        ("08", 8.0),
        ("1e3", 1000.0),
        (".5", 0.5),
        ("-.inf", -math.inf),
        # timestamps, which Pulumi passes on as Go's time.Time String()
        ("2001-12-14", "2001-12-14 00:00:00 +0000 UTC"),
        ("2001-12-14T21:59:43.10Z", "2001-12-14 21:59:43.1 +0000 UTC"),
        ("2001-12-14t21:59:43+05:30", "2001-12-14 21:59:43 +0530 +0530"),
        ("2001-13-14", "2001-13-14"),
        ("=", "="),
        ("12abc", "12abc"),
    ],
)
def test_a_plain_scalar_is_what_yaml_v3_makes_of_it(text: str, value: Any) -> None:
    assert resolve_plain(text)[1] == value or (
        math.isnan(value) and math.isnan(resolve_plain(text)[1])
    )


def test_quoted_scalars_and_keys_are_text() -> None:
    doc = stack_yaml.load('a: "no"\nno: 1\n"012": \'yes\'\nb: !!int "012"\n')
    assert doc.data == {"a": "no", "no": 1, "012": "yes", "b": 10}
    # Only the plain key `no` reads otherwise in YAML 1.1 (as the boolean false).
    assert [(p.path, p.line) for p in doc.divergent] == [(("no",), 2)]


def _stack(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "Pulumi.mine.yaml"
    path.write_text(DEV_FILE.read_text() + extra)
    return path


def test_a_label_written_no_stays_the_text_no_and_says_why(tmp_path: Path) -> None:
    text = DEV_FILE.read_text().replace("region: local-a", "region: local-a\n        country: no")
    path = tmp_path / "Pulumi.mine.yaml"
    path.write_text(text)
    line = text.splitlines().index("        country: no") + 1
    spec, problems = load_stack(str(path))
    assert spec.workers[0].labels["country"] == "no"
    (warning,) = [p for p in problems if p.severity == "warning"]
    assert warning.path == "workers[0].labels.country" and warning.line == line
    assert 'no is the text "no" to Pulumi (YAML 1.2), but the boolean false' in warning.message
    assert warning.hint == 'quote it ("no") to mean the text, or write false for the boolean'
    rendered = cli("render", "--stack", str(path))
    assert rendered.returncode == 0, rendered.stderr
    assert "country: 'no'" in rendered.stdout or 'country: "no"' in rendered.stdout


def test_a_boolean_written_yes_is_refused_as_pulumi_up_would(tmp_path: Path) -> None:
    path = _stack(tmp_path, "  multikueue-fleet:dispatcher:\n    inventory: yes\n")
    with pytest.raises(FleetConfigError) as info:
        load_stack(str(path))
    (error,) = [p for p in info.value.problems if p.severity == "error"]
    assert error.path == "dispatcher.inventory" and "'yes'" in error.message


@pytest.mark.parametrize(
    ("char", "name"),
    [
        ("\x1b", "U+001B (ESC, from a coloured terminal paste)"),
        ("\x07", "U+0007"),
        ("\x0c", "U+000C"),
    ],
)
def test_a_control_character_is_named_by_line_and_column(
    tmp_path: Path, char: str, name: str
) -> None:
    text = DEV_FILE.read_text()
    text = text.replace("region: local-a", f"region: {char}[32mlocal-a")
    line = next(i for i, t in enumerate(text.split("\n"), start=1) if char in t)
    path = tmp_path / "Pulumi.mine.yaml"
    path.write_text(text)
    result = cli("validate", "--stack", str(path))
    assert result.returncode == 1, result.stdout
    assert f"error: line {line}, column 17: {name}" in result.stderr
    assert "position" not in result.stderr and "Traceback" not in result.stderr


def test_every_shipped_stack_reads_the_same_in_yaml_1_1_and_1_2() -> None:
    for path in sorted(DEV_FILE.parent.glob("Pulumi.*.yaml")):
        doc = stack_yaml.load(path.read_text())
        assert doc.divergent == [], path
        assert doc.data == yaml.safe_load(path.read_text()), path


def test_a_key_with_no_value_is_the_empty_text_pulumi_hands_the_program() -> None:
    read = read_stack_text("config:\n  multikueue-fleet:fleetName: ~\n  multikueue-fleet:x:\n")
    assert read.config == {"fleetName": "", "x": ""}
