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

A teardown that follows the kill closely can race the Docker engine: a node container whose
`docker create` was under way when kind was killed is listed by `docker ps -a` before the
engine can remove it (`docker rm -f` answers "No such container"), and it lands, in state
Created, after the delete has returned (measured on Docker 20.10.24, 2026-12-01: a create
whose client is killed still completes, and a `docker rm -f` racing it fails while the
container stays). So the teardown looks again until kind has not listed the cluster for a
few looks in a row, deleting it each time it is listed.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from components.resources.commands import CommandFailed, run

ROOT = Path(__file__).resolve().parents[2]
MARK = ".creating"
# The bound of a `kind delete cluster`, here and in the provider (clusters.py).
KIND_DELETE_TIMEOUT = 300.0
# A cut-short cluster is gone when kind has not listed it for SETTLE_LOOKS looks in a row,
# SETTLE_PAUSE seconds apart (the engine's in-flight creates land within a second or two
# on an idle host, several under a CI's load); a teardown gives up after SETTLE_LIMIT.
SETTLE_LOOKS = 3
SETTLE_PAUSE = 3.0
SETTLE_LIMIT = 180.0


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


@dataclass(frozen=True)
class _CutShort:
    mark: Path
    kind: str
    name: str
    kubeconfig: str


def _marks(folder: Path, log: Callable[[str], None]) -> list[_CutShort]:
    found: list[_CutShort] = []
    for mark in sorted(folder.glob(f"*{MARK}")) if folder.is_dir() else []:
        try:
            read = json.loads(mark.read_text())
            found.append(_CutShort(mark, read["kind"], read["name"], read["kubeconfig"]))
        except (OSError, ValueError, KeyError, TypeError):
            log(f"{mark}: not a mark this project wrote; left as it is")
    return found


def _not_deleted(name: str, why: object) -> CommandFailed:
    return CommandFailed(
        f"kind cluster {name} was left half made by an interrupted create and could not be "
        f"deleted ({why}); delete it with `kind delete cluster --name {name}`"
    )


def _delete_until_gone(clusters: list[_CutShort], log: Callable[[str], None]) -> list[str]:
    """Deletes each cluster while kind lists it, until none has been listed for SETTLE_LOOKS
    looks in a row; returns those it deleted."""
    deleted: list[str] = []
    unlisted = {c.name: 0 for c in clusters}
    failures: dict[str, object] = {}
    deadline = time.monotonic() + SETTLE_LIMIT
    while True:
        listed: dict[str, list[str]] = {}
        for c in clusters:
            if unlisted[c.name] >= SETTLE_LOOKS:
                continue
            try:
                if c.kind not in listed:
                    listed[c.kind] = run([c.kind, "get", "clusters"]).split()
            except (CommandFailed, OSError) as exc:
                raise _not_deleted(c.name, exc) from None
            if c.name not in listed[c.kind]:
                unlisted[c.name] += 1
                continue
            unlisted[c.name] = 0
            args = [c.kind, "delete", "cluster", "--name", c.name, "--kubeconfig", c.kubeconfig]
            try:
                run(args, timeout=KIND_DELETE_TIMEOUT)
            except (CommandFailed, OSError) as exc:
                failures[c.name] = exc  # the engine may still be making a node: again
                continue
            if c.name not in deleted:
                log(f"kind cluster {c.name}: its create was cut short; deleted")
                deleted.append(c.name)
        waiting = [name for name, looks in unlisted.items() if looks < SETTLE_LOOKS]
        if not waiting:
            return deleted
        if time.monotonic() >= deadline:
            name = waiting[0]
            raise _not_deleted(name, failures.get(name, f"still listed after {SETTLE_LIMIT:.0f} s"))
        time.sleep(SETTLE_PAUSE)


def remove_cut_short(folder: Path, log: Callable[[str], None]) -> list[str]:
    """Deletes the cluster of every mark in `folder` (a stack's kind folder) that kind still
    lists, and the marks; returns the clusters deleted. Raises CommandFailed, naming the
    cluster and the command that deletes it, when kind cannot (the marks stay, for the
    next teardown)."""
    clusters = _marks(folder, log)
    deleted = _delete_until_gone(clusters, log) if clusters else []
    for c in clusters:
        Path(c.kubeconfig).unlink(missing_ok=True)
        c.mark.unlink()
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
