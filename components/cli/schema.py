"""The JSON Schema of a stack file (stacks/Pulumi.<stack>.yaml), generated from the typed
model in spec.py, so that editors complete and check stack files as they are typed.

The committed copy is schema/stack.schema.json; `python -m components schema` writes it
and `--check` fails when it is stale (a test runs the same comparison). Every stack file
names it in its first line:

    # yaml-language-server: $schema=../schema/stack.schema.json
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from components.model.spec import PROJECT, FleetSpec
from components.model.stack_file import PROVIDER_NAMESPACES, STACK_FILE_KEYS

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schema" / "stack.schema.json"
# The first line of every stack file, relative to stacks/.
MODELINE = "# yaml-language-server: $schema=../schema/stack.schema.json"


def stack_schema() -> dict[str, Any]:
    model = FleetSpec.model_json_schema(by_alias=True, mode="validation")
    defs = model.pop("$defs", {})
    properties = {f"{PROJECT}:{key}": value for key, value in model.get("properties", {}).items()}
    properties[f"{PROJECT}:fleetName"]["description"] = (
        "The fleet's name (a DNS label); default: the stack's name."
    )
    others = "|".join(PROVIDER_NAMESPACES)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"{PROJECT} stack file",
        "description": (
            "A Pulumi stack file of multikueue-fleet (stacks/Pulumi.<stack>.yaml). "
            "Generated from components/model/spec.py by `python -m components schema`: do not "
            "edit by hand."
        ),
        "type": "object",
        "properties": {
            "config": {
                "type": "object",
                "description": f"`{PROJECT}:KEY` entries, and provider settings "
                f"({', '.join(PROVIDER_NAMESPACES)}).",
                "properties": properties,
                "patternProperties": {f"^({others}):.+$": {}},
                "additionalProperties": False,
            },
            **{
                key: {"type": "string"} if key != "environment" else {}
                for key in STACK_FILE_KEYS
                if key != "config"
            },
        },
        "required": ["config"],
        "additionalProperties": False,
        "$defs": defs,
    }


def schema_text() -> str:
    return json.dumps(stack_schema(), indent=2, ensure_ascii=False) + "\n"
