"""A dynamic provider's traceback in Pulumi's output, shown as its one line of cause
(components/cli/pulumi_output.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from components.cli.pulumi_output import Tracebacks

ROOT = Path(__file__).resolve().parents[2]

# As Pulumi v3.274 prints a Python dynamic provider's exception (the message is the
# traceback, each line under the diagnostic's own indentation).
FAILED_UP = """\
Updating (dev):
 +  pulumi-python:dynamic/multikueue-fleet:KindCluster dev-worker1 creating (0s)
 +  pulumi-python:dynamic/multikueue-fleet:KindCluster dev-worker1 creating failed error: Exception calling application: Traceback (most recent call last):
Diagnostics:
  pulumi-python:dynamic/multikueue-fleet:KindCluster (dev-worker1):
    error: Exception calling application: Traceback (most recent call last):
      File "/p/.venv/lib/python3.11/site-packages/pulumi/dynamic/__main__.py", line 83, in wrapper
        return fn(self, request, context)
               ^^^^^^^^^^^^^^^^^^^^^^^^^^
      File "/p/components/resources/kind.py", line 120, in create
        run([kind, "create", "cluster"])
      File "/p/components/resources/commands.py", line 40, in run
        raise CommandFailed(message)
    components.resources.commands.CommandFailed: kind create cluster failed: cannot pull kindest/node: set kind.nodeImage or kind.registryMirrors

  pulumi:pulumi:Stack (multikueue-fleet-dev):
    error: update failed
    KeyError-like line that is not a traceback: kept
Resources:
    1 unchanged
"""  # noqa: E501


def test_a_provider_traceback_is_one_line_with_its_cause() -> None:
    shown: list[str] = []
    feed = Tracebacks(shown.append)
    for line in FAILED_UP.splitlines():
        feed(line)
    assert not [line for line in shown if "Traceback" in line or 'File "' in line]
    assert (
        "    error: kind create cluster failed: cannot pull kindest/node: set kind.nodeImage "
        "or kind.registryMirrors"
    ) in shown
    # The progress line's copy of the head, with no frames under it: marked, and the line
    # after it kept.
    progress = " +  pulumi-python:dynamic/multikueue-fleet:KindCluster dev-worker1 creating "
    assert f"{progress}failed error: (the cause follows under Diagnostics)" in shown
    assert "Diagnostics:" in shown
    # Everything else as it was, in order.
    assert shown[:2] == FAILED_UP.splitlines()[:2]
    assert shown[-5:] == FAILED_UP.splitlines()[-5:]


def test_an_error_of_another_kind_keeps_its_type() -> None:
    shown: list[str] = []
    feed = Tracebacks(shown.append)
    for line in (
        "    error: Exception calling application: Traceback (most recent call last):",
        '      File "/x.py", line 1, in f',
        "        d['k']",
        "    KeyError: 'k'",
        "after",
    ):
        feed(line)
    assert shown == ["    error: KeyError: 'k'", "after"]


def test_the_filter_passes_stdin_through_line_by_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "components.cli.pulumi_output"],
        input=FAILED_UP,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    assert "Traceback" not in done.stdout and "kind create cluster failed" in done.stdout
