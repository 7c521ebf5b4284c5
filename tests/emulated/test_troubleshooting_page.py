"""The run-time examples of docs/troubleshooting.md are what the code prints: each console
example under "At run time" (a `$ mkf ...` line, then its output) is made here against
emulated clusters seeded with that situation, by the same code `mkf status` and
`mkf controller explain` run, and every line the page shows must be among the lines
printed, in the page's order (spacing aside: the status table pads to its widest cell).
A line `...` on the page stands for lines left out."""

from __future__ import annotations

import asyncio
import re
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from components.cli.mkf import build_parser
from components.cli.status import Installs, collect
from controller.app import explain
from controller.kube import Kube
from controller.model import Policy
from tests.helpers.fleet_harness import Fleet, K, active, cluster_queue, deployment, workload

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "troubleshooting.md"
SECTION = "## At run time"
NS = "team-a"
DISPATCHER = ("multikueue-fleet-system", "multikueue-fleet-dispatcher")
KUEUE = ("kueue-system", "kueue-controller-manager")
LEADER = "multikueue-fleet-dispatcher-5d8f7c9b4-x2k4q"


def examples() -> list[tuple[str, str, list[str]]]:
    """(heading, command, output lines) of every console example in the section."""
    text = PAGE.read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    section = text[start : end if end != -1 else len(text)]
    found = []
    for part in re.split(r"^### ", section, flags=re.M)[1:]:
        heading = part.splitlines()[0].strip()
        for body in re.findall(r"^```console\n(.*?)^```", part, flags=re.S | re.M):
            lines = body.splitlines()
            assert lines and lines[0].startswith("$ "), f"{heading}: starts with no `$ ` line"
            found.append((heading, lines[0][2:], lines[1:]))
    return found


# --- the situations ----------------------------------------------------------------------


async def status_of(mutate: Callable[[Fleet], None], installs: Installs | None = None) -> str:
    """`mkf status` of a manager and two workers, healthy but for what `mutate` does."""
    fleet = Fleet({"worker1": {"cpu": "8"}, "worker2": {"cpu": "8"}})
    await fleet.start()
    try:
        for emulator in [fleet.manager, *fleet.workers.values()]:
            emulator.put("apps/deployments", deployment(*KUEUE, 1))
            emulator.put(
                f"{K}/localqueues",
                {
                    "metadata": {"name": "user-queue", "namespace": NS},
                    "spec": {"clusterQueue": "cluster-queue"},
                },
            )
        fleet.manager.put(f"{K}/clusterqueues", cluster_queue("16", "64Gi"))
        # Kueue v0.19.2 pkg/controller/admissionchecks/multikueue/admissioncheck.go.
        check = active("multikueue", True, "Active", "The admission check is active")
        fleet.manager.put(f"{K}/admissionchecks", check)
        fleet.manager.put("apps/deployments", deployment(*DISPATCHER, 1))
        mutate(fleet)
        kubeconfigs = {"manager": fleet.manager.kubeconfig()}
        kubeconfigs |= {name: e.kubeconfig() for name, e in fleet.workers.items()}
        roles = {"manager": "manager", "worker1": "worker", "worker2": "worker"}
        return (await collect(kubeconfigs, roles, installs or Installs())).table()
    finally:
        await fleet.stop()


def image_not_pulled(fleet: Fleet) -> None:
    fleet.manager.put("apps/deployments", deployment(*DISPATCHER, 0))


def worker_refused(fleet: Fleet) -> None:
    """Kueue's conditions when the manager's token for worker2 is refused: the
    MultiKueueCluster inactive (multikueuecluster.go, ClientConnectionFailed with the
    client's error) and the AdmissionCheck still active for the other worker."""
    fleet.manager.put(
        f"{K}/multikueueclusters",
        active(
            "worker2",
            False,
            "ClientConnectionFailed",
            "the server has asked for the client to provide credentials",
        ),
    )
    fleet.manager.put(
        f"{K}/admissionchecks",
        active("multikueue", True, "SomeActiveClusters", "Inactive clusters: [worker2]"),
    )


def train(**kwargs: Any) -> dict[str, Any]:
    """The Workload Kueue made for Job team-a/train."""
    made = workload("job-train-7c2f1", namespace=NS, **kwargs)
    made["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u-1"}
    ]
    return made


async def explain_of(
    reserved: dict[str, str], job: dict[str, Any], leader: str | None = LEADER
) -> str:
    """`mkf controller explain team-a/train`, with each worker's CPU reserved as given."""
    fleet = Fleet({name: {"cpu": "8", "reserved": cpu} for name, cpu in reserved.items()})
    assert (fleet.settings.namespace, fleet.settings.lease_name) == DISPATCHER  # the defaults
    await fleet.start()
    try:
        fleet.manager.put(f"{K}/workloads", job)
        if leader:
            fleet.manager.put(
                "coordination.k8s.io/leases",
                {
                    "metadata": {"name": DISPATCHER[1], "namespace": DISPATCHER[0]},
                    "spec": {
                        "holderIdentity": leader,
                        "leaseDurationSeconds": 15,
                        "renewTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                    },
                },
            )
        kube = await Kube.from_kubeconfig(fleet.manager.kubeconfig(), "manager")
        try:
            # The policy a fleet runs with when its stack says nothing: what a user sees.
            settings = replace(fleet.settings, default_policy=Policy())
            return await explain(kube, settings, f"{NS}/train", timeout=10)
        finally:
            await kube.close()
    finally:
        await fleet.stop()


FULL = {"worker1": "7", "worker2": "6"}
EXPLAIN = f"mkf controller explain {NS}/train"
# The page's examples in its order: (heading, command, the situation that prints it).
SITUATIONS: list[tuple[str, str, Callable[[], Awaitable[str]]]] = [
    ("An image that will not pull", "mkf status", lambda: status_of(image_not_pulled)),
    ("A MultiKueueCluster is not Active", "mkf status", lambda: status_of(worker_refused)),
    (
        "A workload stays pending",
        EXPLAIN,
        lambda: explain_of(FULL, train(cpu="4", reserved=False)),
    ),
    (
        "A workload stays pending",
        EXPLAIN,
        lambda: explain_of(FULL, train(cpu="3", memory="8Gi")),
    ),
    (
        "The dispatcher is not leading",
        EXPLAIN,
        lambda: explain_of(
            {"worker1": "2", "worker2": "6"}, train(cpu="4", memory="8Gi"), leader=None
        ),
    ),
    (
        "The dispatcher is not leading",
        "mkf status",
        lambda: status_of(lambda _: None, Installs(dispatcher="local")),
    ),
]


def _norm(line: str) -> str:
    return " ".join(line.split())


def missing_lines(shown: list[str], printed: str) -> list[str]:
    """The page's lines that are not among the printed ones in order (`...` skips)."""
    out = [_norm(line) for line in printed.splitlines()]
    at, missing = 0, []
    for line in shown:
        if line.strip() == "...":
            continue
        want = _norm(line)
        try:
            at = out.index(want, at) + 1
        except ValueError:
            missing.append(line)
    return missing


def test_every_example_has_its_situation() -> None:
    on_page = [(heading, command) for heading, command, _ in examples()]
    assert on_page == [(heading, command) for heading, command, _ in SITUATIONS], (
        "docs/troubleshooting.md's run-time examples and SITUATIONS here differ: give each "
        "example its situation, in the page's order"
    )
    for _, command, _ in examples():
        build_parser().parse_args(shlex.split(command)[1:])  # a real command line


@pytest.mark.parametrize(
    "index", range(len(SITUATIONS)), ids=[f"{h}: {c}" for h, c, _ in SITUATIONS]
)
def test_the_page_shows_what_the_code_prints(index: int) -> None:
    heading, command, shown = examples()[index]
    assert (heading, command) == SITUATIONS[index][:2]
    assert shown, f"{heading}: an example with no output"
    printed = asyncio.run(SITUATIONS[index][2]())
    missing = missing_lines(shown, printed)
    assert not missing, (
        f"docs/troubleshooting.md, {heading}, `{command}`: these lines are not what the code "
        "prints:\n" + "\n".join(missing) + "\n--- it prints:\n" + printed
    )


def test_a_line_the_code_does_not_print_is_caught() -> None:
    printed = "a  b\nc d\ne"
    assert missing_lines(["a b", "...", "e"], printed) == []
    assert missing_lines(["e", "a b"], printed) == ["a b"]  # out of order
    assert missing_lines(["c  x"], printed) == ["c  x"]


if __name__ == "__main__":
    for heading, command, make in SITUATIONS:
        print(f"### {heading}\n$ {command}\n{asyncio.run(make())}\n")
