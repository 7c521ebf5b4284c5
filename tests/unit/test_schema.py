"""The stack files' JSON Schema: generated from the model, committed, named by every stack
file, and agreeing with the model on what a stack file may hold."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from components.cli.schema import MODELINE, SCHEMA_PATH, schema_text
from tests.helpers.stack_texts import ROOT, SMALL, cli


def test_the_committed_schema_is_the_models() -> None:
    assert SCHEMA_PATH.read_text() == schema_text(), (
        "schema/stack.schema.json is stale: run `mkf schema` and commit it"
    )


def test_the_schema_command_writes_and_checks(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    assert cli("schema", "--out", str(out)).returncode == 0
    assert out.read_text() == schema_text()
    assert cli("schema", "--out", str(out), "--check").returncode == 0
    out.write_text("{}")
    stale = cli("schema", "--out", str(out), "--check")
    assert stale.returncode == 1
    assert "mkf schema" in stale.stderr


def test_every_stack_file_names_the_schema() -> None:
    for path in sorted((ROOT / "stacks").glob("Pulumi.*.yaml")):
        assert path.read_text().splitlines()[0] == MODELINE, path


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_shipped_stacks_and_a_small_one_are_valid(
    validator: jsonschema.Draft202012Validator,
) -> None:
    texts = [SMALL] + [p.read_text() for p in sorted((ROOT / "stacks").glob("Pulumi.*.yaml"))]
    for text in texts:
        errors = [e.message for e in validator.iter_errors(yaml.safe_load(text))]
        assert errors == []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("    provider: kind", "    provder: kind"),
        ("    provider: kind", "    provider: kinda"),
        ("multikueue-fleet:workers:", "multikueue-flet:workers:"),
        ("cpu: 4", 'cpu: "-1"'),
        ("region: a", "region: not ok!"),
        ("- name: worker1", "- name: Worker_1"),
        ("namespace: team-a", "namespace: Team A"),
    ],
)
def test_editors_see_what_the_model_refuses(
    validator: jsonschema.Draft202012Validator, old: str, new: str
) -> None:
    assert old in SMALL
    assert list(validator.iter_errors(yaml.safe_load(SMALL.replace(old, new))))
