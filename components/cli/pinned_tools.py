"""kind and the Pulumi CLI of the versions the project pins, for `mkf up`, `run`, `down` and
`preview`: the first on PATH when it is of that version, else the one scripts/up.sh or
`python -m loopback build` put in the project's tools folder (MKF_TOOLS_DIR, else
.tools/bin), which then goes first on PATH for every child; another version is used with a
warning saying which and how to get the pinned one (scripts/env.sh does the same)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from components.model.versions import KIND_VERSION, PULUMI_CLI_VERSION

PINNED = {"kind": f"{KIND_VERSION} ", "pulumi": f"v{PULUMI_CLI_VERSION}"}
HOW = {
    "kind": "scripts/up.sh installs it into .tools/bin (or `python -m loopback build kind`)",
    "pulumi": "scripts/up.sh installs it into .tools/bin (or `python -m loopback build pulumi`)",
}


def tools_folder(project: Path) -> Path:
    return Path(os.environ.get("MKF_TOOLS_DIR") or project / ".tools" / "bin")


def version_line(binary: str) -> str:
    """The first line `BINARY version` prints, "" when it cannot be run."""
    try:
        done = subprocess.run(
            [binary, "version"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    lines = (done.stdout or "").strip().splitlines()
    return lines[0].strip() if lines else ""


def use_pinned_tools(
    project: Path,
    log: Callable[[str], None],
    version_of: Callable[[str], str] = version_line,
) -> None:
    folder = tools_folder(project)
    for tool, pinned in PINNED.items():
        found = shutil.which(tool)
        if found and pinned in f"{version_of(found)} ":
            continue
        local = folder / tool
        if local.is_file() and os.access(local, os.X_OK) and pinned in f"{version_of(str(local))} ":
            os.environ["PATH"] = os.pathsep.join([str(folder), os.environ.get("PATH", "")])
            continue
        if found:
            shown = version_of(found) or "of a version it does not say"
            log(
                f"warning: {tool} at {found} is {shown}, not the pinned {pinned.strip()}: used "
                f"anyway; {HOW[tool]}"
            )
