"""The failure message of a Pulumi run puts the error that stopped the engine first."""

from __future__ import annotations

import json
import subprocess

from tests.helpers.pulumi_failures import pulumi_failure

ECHO = 'Traceback ...\n  File "rpc.py"\nException: resource monitor shut down\n'

_ECHO_TEXT = "resource monitor shut down"


def _done(stdout: str, stderr: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess(["pulumi"], 255, stdout, stderr)


def test_a_json_preview_names_the_cause_before_the_echoes() -> None:
    report = {
        "diagnostics": [
            {"urn": "urn:stack", "message": ECHO * 40, "severity": "error"},
            {"urn": "urn:obj", "message": "failed calling webhook", "severity": "error"},
            {"urn": "urn:obj", "message": "a warning", "severity": "warning"},
        ]
    }
    said = pulumi_failure(_done(json.dumps(report, indent=4)))
    errors = said.split("--- stdout")[0]
    assert errors.index("urn:obj: failed calling webhook") < errors.index(_ECHO_TEXT)
    assert errors.count(_ECHO_TEXT) == 1 and "a warning" not in errors


def test_text_output_gives_its_error_lines() -> None:
    text = "Diagnostics:\n  kind:Mirrors (w1):\n    error: docker exec failed\n"
    said = pulumi_failure(_done(text))
    assert "- docker exec failed" in said and said.startswith("exit 255")
