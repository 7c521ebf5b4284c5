"""A temporary folder of its own for each Pulumi command this project runs.

pulumi-kubernetes writes every Kubernetes provider's kubeconfig, client key included, to a
new file in $TMPDIR for Helm's settings and never removes it (provider/v4 at the pinned
commit f47bc2d6f199: pkg/provider/provider.go `Configure` calls `writeKubeconfigToFile`,
pkg/provider/util.go `os.CreateTemp("", "kubeconfig")`). That is one credential file per
cluster per preview, up or destroy, left in /tmp. `mkf` and scripts/up.sh and down.sh give
the engine a folder under the ignored state folder instead (mode 0700) and remove it when
the command ends. A folder left by a command that was killed (its process is gone) is
removed by the next command.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

PREFIX = "engine-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive, and not ours to judge
        pass
    return True


def sweep(root: Path) -> list[Path]:
    """Removes the folders under `root` whose command (the pid in the name) is gone."""
    removed = []
    for folder in root.glob(f"{PREFIX}*"):
        pid = folder.name[len(PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def new_folder(state: Path, pid: int) -> Path:
    """A fresh folder under `state`/tmp for the engine of command `pid`, after the folders
    of commands that are gone were swept."""
    root = state / "tmp"
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o700)
    sweep(root)
    # mkdtemp makes it 0700: the kubeconfigs in it hold client keys.
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{pid}-", dir=root))


@contextlib.contextmanager
def engine_tmpdir(state: Path) -> Iterator[Path]:
    """A fresh folder under `state`/tmp for this command's engine, removed when it ends."""
    folder = new_folder(state, os.getpid())
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """`python -m components.cli.engine_tmp STATE PID`: scripts/up.sh and down.sh's folder
    (the script's pid, which it removes on exit), printed; the same rule as mkf's."""
    state, pid = argv if argv is not None else sys.argv[1:]
    print(new_folder(Path(state), int(pid)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
