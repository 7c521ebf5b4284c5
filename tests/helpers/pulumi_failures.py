"""What a failed Pulumi CLI run said, cause first, for an assertion's message.

A failed preview or up ends with the language host's tracebacks of every registration
still waiting when the engine stopped ("Exception: resource monitor shut down", pulumi
v3 sdk/python/lib/pulumi/runtime/settings.py, handle_grpc_error), pages of them; the
error that stopped the engine comes before them, so the tail of the output is exactly the
wrong part to keep.
"""

from __future__ import annotations

import json
import re
import subprocess

# The echo of an engine that stopped, not its cause.
_ECHO = "resource monitor shut down"
_ERROR_LINE = re.compile(r"^\s*error:\s*(.+)$")


def _json_errors(stdout: str) -> list[str] | None:
    """The error diagnostics of `--json` output, by resource; None when it is not JSON."""
    try:
        report = json.loads(stdout)
    except ValueError:
        return None
    if not isinstance(report, dict):
        return None
    return [
        f"{d.get('urn', 'the program')}: {str(d.get('message', '')).strip()[:1500]}"
        for d in report.get("diagnostics") or []
        if d.get("severity") == "error"
    ]


def _text_errors(output: str) -> list[str]:
    """The `error:` lines of the text output (each resource's in its Diagnostics)."""
    return [m.group(1)[:1500] for line in output.splitlines() if (m := _ERROR_LINE.match(line))]


def pulumi_failure(done: subprocess.CompletedProcess[str], tail: int = 3000) -> str:
    """The exit code, every error Pulumi reported with the causes before the engine's echo
    of them, then the ends of stdout and stderr."""
    errors = _json_errors(done.stdout)
    if errors is None:
        errors = _text_errors(done.stdout)
    errors += _text_errors(done.stderr)
    causes = [e for e in errors if _ECHO not in e]
    echoes = len(errors) - len(causes)
    if echoes:
        causes.append(f"{echoes} more ending in {_ECHO!r}: the engine stopping, not a cause")
    said = "\n".join(f"- {e}" for e in causes) or "(no error line)"
    return (
        f"exit {done.returncode}; the errors, causes first:\n{said}\n"
        f"--- stdout (end)\n{done.stdout[-tail:]}\n--- stderr (end)\n{done.stderr[-tail:]}"
    )
