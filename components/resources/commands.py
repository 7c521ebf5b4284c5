"""Running the command-line tools the dynamic providers drive (docker, kind), with errors a
person can act on."""

from __future__ import annotations

import re
import subprocess

import yaml

# A Go stack frame as kubeadm prints one under an error at --v=5 and above (kind runs it at
# --v=6, kind v0.33.0 pkg/cluster/internal/create/actions/kubeadminit/init.go): the function
# line, then the file line indented by a tab. Neither says what went wrong.
_FRAME_FILE = re.compile(r"^\t\S+\.(go|s):\d+")
_FRAME_FUNC = re.compile(r"^[\w./-]+\.[\w.()*]+$")
# kind's own error line (cmd/kind/app/main.go, logError): "ERROR: failed to create cluster: ..."
_TOOL_ERROR = re.compile(r"^ERROR: ")


class CommandFailed(Exception):
    pass


def run(args: list[str], stdin: str | None = None, timeout: float = 900) -> str:
    """Run a CLI; its stdout, or CommandFailed naming the command and the end of stderr."""
    try:
        result = subprocess.run(
            args, input=stdin, capture_output=True, text=True, timeout=timeout, check=False
        )
    except FileNotFoundError as exc:
        raise CommandFailed(
            f"{args[0]} is not installed or not on PATH "
            "(scripts/up.sh installs the pinned kind and Pulumi CLI)"
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise CommandFailed(f"`{' '.join(args[:4])}` did not finish in {timeout:.0f}s") from exc
    if result.returncode != 0:
        said = failure_lines(result.stderr or result.stdout)
        raise CommandFailed(f"`{' '.join(args[:4])}` failed (exit {result.returncode}):\n{said}")
    return result.stdout


def failure_lines(output: str, keep: int = 8, width: int = 400) -> str:
    """What a failed command said, in a few lines: the tool's own ERROR line (kind names the
    step that failed there), then the last `keep` lines that are not a Go stack trace (kubeadm
    ends its output with one, under the lines that say why)."""
    lines = output.strip().splitlines()
    frames = {i for i, line in enumerate(lines) if _FRAME_FILE.match(line)}
    frames |= {i - 1 for i in frames if i > 0 and _FRAME_FUNC.match(lines[i - 1])}
    said = [line for i, line in enumerate(lines) if i not in frames and line.strip()]
    first = [line for line in said[:-keep] if _TOOL_ERROR.match(line)][:1]
    return "\n".join(line[:width] for line in first + said[-keep:])


def kubeconfig_ca(kubeconfig: str) -> str:
    config = yaml.safe_load(kubeconfig) or {}
    clusters = config.get("clusters") or [{}]
    return (clusters[0].get("cluster") or {}).get("certificate-authority-data", "")
