"""Running the command-line tools the dynamic providers drive (docker, kind), with errors a
person can act on."""

from __future__ import annotations

import subprocess

import yaml


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
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-8:])
        raise CommandFailed(f"`{' '.join(args[:4])}` failed (exit {result.returncode}):\n{tail}")
    return result.stdout


def kubeconfig_ca(kubeconfig: str) -> str:
    config = yaml.safe_load(kubeconfig) or {}
    clusters = config.get("clusters") or [{}]
    return (clusters[0].get("cluster") or {}).get("certificate-authority-data", "")
