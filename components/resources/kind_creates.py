"""kind clusters whose creation was cut short: what a stack began to make and its state
does not record.

`kind create cluster` stopped half-way (the Pulumi CLI's process group killed when an
interrupt's grace ran out, components/cli/automation.py `Supervisor`) leaves node containers
that the stack's state holds only as a pending create, and `pulumi destroy` skips a pending
create ("interrupted while creating"): the cluster outlives the fleet. kind itself removes
the nodes of a create that fails, not of one that is killed (kind v0.33.0
pkg/cluster/internal/create/create.go: the deletion on error runs in the process).

So the provider marks a create before it runs kind, beside the stack's own kubeconfig for
that cluster, and only for a cluster that did not exist then: whatever carries that name
afterwards, this stack made. The mark goes once kind returns. A teardown deletes the cluster
of every mark left (`remove_cut_short`), so nothing is deleted that the stack did not make.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from components.resources.commands import CommandFailed, run

ROOT = Path(__file__).resolve().parents[2]
MARK = ".creating"
# The bound of a `kind delete cluster`, here and in the provider (clusters.py).
KIND_DELETE_TIMEOUT = 300.0


def stack_folder(stack: str, root: Path = ROOT) -> Path:
    """Where the stack's kind kubeconfigs (and marks) are: beside the local backend state."""
    return root / ".pulumi-state" / "kind" / re.sub(r"[^A-Za-z0-9_.-]", "_", stack)


def mark_of(kubeconfig_path: str) -> Path:
    return Path(kubeconfig_path).with_suffix(MARK)


@contextmanager
def creating(kind: str, name: str, kubeconfig_path: str) -> Iterator[None]:
    """Marks the create of `name` while the block runs; the mark stays when it raises or
    is killed (kind removes the nodes of a create that fails, and the next teardown finds
    none; of one that is killed, the teardown removes them)."""
    mark = mark_of(kubeconfig_path)
    mark.parent.mkdir(parents=True, exist_ok=True)
    mark.write_text(json.dumps({"kind": kind, "name": name, "kubeconfig": kubeconfig_path}))
    yield
    mark.unlink(missing_ok=True)


def remove_cut_short(folder: Path, log: Callable[[str], None]) -> list[str]:
    """Deletes the cluster of every mark in `folder` (a stack's kind folder) that kind still
    lists, and the marks; returns the clusters deleted. Raises CommandFailed, naming the
    cluster and the command that deletes it, when kind cannot."""
    deleted: list[str] = []
    for mark in sorted(folder.glob(f"*{MARK}")) if folder.is_dir() else []:
        try:
            found = json.loads(mark.read_text())
            kind, name, kubeconfig = found["kind"], found["name"], found["kubeconfig"]
        except (OSError, ValueError, KeyError, TypeError):
            log(f"{mark}: not a mark this project wrote; left as it is")
            continue
        try:
            if name in run([kind, "get", "clusters"]).split():
                args = [kind, "delete", "cluster", "--name", name, "--kubeconfig", kubeconfig]
                run(args, timeout=KIND_DELETE_TIMEOUT)
                log(f"kind cluster {name}: its create was cut short; deleted")
                deleted.append(name)
        except (CommandFailed, OSError) as exc:
            raise CommandFailed(
                f"kind cluster {name} was left half made by an interrupted create and could "
                f"not be deleted ({exc}); delete it with `kind delete cluster --name {name}`"
            ) from None
        Path(kubeconfig).unlink(missing_ok=True)
        mark.unlink()
    return deleted


def main(argv: list[str]) -> int:
    """`python -m components.resources.kind_creates STACK`: what scripts/down.sh runs after
    `pulumi destroy`. One line, and 1, when a cluster could not be deleted."""
    if len(argv) != 1:
        print("usage: python -m components.resources.kind_creates STACK", file=sys.stderr)
        return 2
    try:
        remove_cut_short(stack_folder(argv[0]), print)
    except CommandFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
