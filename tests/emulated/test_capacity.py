"""The capacity summary at the top of `render --diff`: each cluster's nominal quota before
and after per ClusterQueue, flavor and resource, the manager's total, the change in percent,
and (with --fleet) a quota the change would leave below what admitted work holds now."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
import yaml

from components.checks.load import load_stack
from components.cli.capacity import below_use_warnings, capacity_lines, capacity_rows
from tests.helpers.fleet_harness import K, cluster_queue
from tests.helpers.kube_emulator import Emulator
from tests.helpers.stack_texts import DEV as DEV_TEXT
from tests.helpers.stack_texts import cli

ROOT = Path(__file__).resolve().parents[2]
# The dev stack's text as a file, in a folder of pytest's (the module fixture below makes it):
# a temporary folder made at import was never removed.
DEV = Path()


@pytest.fixture(scope="module", autouse=True)
def _dev_stack_file(tmp_path_factory: pytest.TempPathFactory) -> None:
    global DEV
    DEV = tmp_path_factory.mktemp("capacity") / "Pulumi.dev.yaml"
    DEV.write_text(DEV_TEXT)


SLOT = ("cluster-queue", "default-flavor", "cpu")


def variant(tmp_path: Path, old: str, new: str) -> Path:
    text = DEV.read_text()
    assert old in text
    path = tmp_path / "changed" / "Pulumi.dev.yaml"  # another folder, the same stack name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text.replace(old, new))
    return path


def specs(tmp_path: Path, old: str, new: str) -> tuple[object, object]:
    return load_stack(str(DEV))[0], load_stack(str(variant(tmp_path, old, new)))[0]


def test_a_quota_change_shows_every_cluster_and_the_managers_total(tmp_path: Path) -> None:
    rows = capacity_rows(*specs(tmp_path, "cpu: 4", "cpu: 6"))
    assert [(r.cluster, r.before, r.after, r.change) for r in rows] == [
        ("worker1", "4", "6", "+50%"),
        ("worker2", "4", "6", "+50%"),
        ("manager", "8", "12", "+50%"),
    ]
    assert all((r.cluster_queue, r.flavor, r.resource) == SLOT for r in rows)  # memory: same


def test_the_summary_opens_the_diff(tmp_path: Path) -> None:
    new = variant(tmp_path, "memory: 8Gi", "memory: 6Gi")
    result = cli("render", "--diff", "--old", str(DEV), "--new", str(new))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("Capacity (nominal quota per ClusterQueue")
    assert lines[1].split() == [
        *("CLUSTERQUEUE", "FLAVOR", "RESOURCE", "CLUSTER", "BEFORE", "AFTER", "CHANGE")
    ]
    assert lines[2].split() == [*SLOT[:2], "memory", "worker1", "8Gi", "6Gi", "-25%"]
    assert lines[4].split() == ["manager", "(total)", "16Gi", "12Gi", "-25%"]
    assert "usage not read: add --fleet DIR" in result.stdout
    assert lines.index("Summary:") > 4
    document = json.loads(
        cli("render", "--diff", "--old", str(DEV), "--new", str(new), "-o", "json").stdout
    )
    manager = document["capacity"][-1]
    assert (manager["role"], manager["before"], manager["after"]) == ("manager", "16Gi", "12Gi")
    assert manager["change"] == "-25%" and manager["belowUse"] is False


def test_a_change_without_quota_changes_says_so(tmp_path: Path) -> None:
    old, new = specs(tmp_path, "region: local-b", "region: local-c")
    assert capacity_rows(old, new) == []
    assert capacity_lines([], usage_read=False) == ["Capacity: no nominal quota changes."]


def test_an_added_worker_and_a_new_stack(tmp_path: Path) -> None:
    old, new = specs(
        tmp_path,
        "  multikueue-fleet:frameworks:",
        "    - name: worker3\n  multikueue-fleet:frameworks:",
    )
    cpu = [r for r in capacity_rows(old, new) if r.resource == "cpu"]
    assert [(r.cluster, r.before, r.after, r.change) for r in cpu] == [
        ("worker1", "4", "4", "0%"),
        ("worker2", "4", "4", "0%"),
        ("worker3", None, "4", "new"),
        ("manager", "8", "12", "+50%"),
    ]
    added = capacity_rows(None, new)
    assert {r.change for r in added} == {"new"}


def test_a_cut_below_what_admitted_work_holds_is_flagged(tmp_path: Path) -> None:
    old, new = specs(tmp_path, "cpu: 4", "cpu: 2")
    in_use = {("worker1", SLOT): "3", ("worker2", SLOT): "2", ("manager", SLOT): "5"}
    rows = capacity_rows(old, new, in_use)
    flagged = {r.cluster for r in rows if r.below_use}
    assert flagged == {"worker1", "manager"}  # worker2 holds exactly its new quota: fine
    (first, second) = below_use_warnings(rows)
    assert first.startswith("warning: ClusterQueue cluster-queue on worker1, flavor")
    assert "the new quota 2 is below the 3 its admitted work holds now" in first
    assert "manager" in second
    text = "\n".join(capacity_lines(rows, usage_read=True))
    assert text.count("! below what its admitted work holds now") == 2
    assert "IN USE" in text


def test_an_unchanged_quota_already_below_use_is_still_shown(tmp_path: Path) -> None:
    old, new = specs(tmp_path, "region: local-b", "region: local-c")
    rows = capacity_rows(old, new, {("worker2", SLOT): "5"})
    assert [(r.cluster, r.below_use) for r in rows] == [
        ("worker1", False),
        ("worker2", True),
        ("manager", False),
    ]


def test_fleet_usage_read_from_the_clusters(tmp_path: Path) -> None:
    """--fleet DIR: each cluster's ClusterQueue status.flavorsReservation is read; a cluster
    that does not answer is one warning line, not a failure."""
    new = variant(tmp_path, "cpu: 4", "cpu: 2")

    async def main() -> tuple[int, str, str]:
        emulators = {n: Emulator(n) for n in ("manager", "worker1", "worker2")}
        reserved = {"manager": "3", "worker1": "3", "worker2": "1"}
        fleet = tmp_path / "fleet"
        (fleet / "kubeconfigs").mkdir(parents=True)
        clusters = []
        try:
            for name, e in emulators.items():
                await e.start()
                e.put(f"{K}/clusterqueues", cluster_queue("4", "8Gi", reserved[name], "1Gi"))
                (fleet / "kubeconfigs" / f"{name}.yaml").write_text(yaml.safe_dump(e.kubeconfig()))
                role = "manager" if name == "manager" else "worker"
                clusters.append(
                    {"name": name, "role": role, "kubeconfig": f"kubeconfigs/{name}.yaml"}
                )
            (fleet / "summary.json").write_text(json.dumps({"clusters": clusters}))
            emulators["worker2"].down = True
            process = await asyncio.create_subprocess_exec(
                *(sys.executable, "-m", "components", "render", "--diff"),
                *("--old", str(DEV), "--new", str(new), "--fleet", str(fleet)),
                cwd=ROOT,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await process.communicate()
            return process.returncode or 0, out.decode(), err.decode()
        finally:
            for e in emulators.values():
                await e.stop()

    code, out, err = asyncio.run(main())
    assert code == 0, err
    worker1 = next(line for line in out.splitlines() if " worker1 " in line)
    cells = worker1.split()
    assert cells[cells.index("worker1") :][:6] == ["worker1", "4", "2", "-50%", "3", "!"]
    assert "warning: usage of worker2 not read" in err
    assert "ClusterQueue cluster-queue on worker1" in err
    assert "on manager" not in err  # 3 in use, 4 left


def test_fleet_dir_that_cannot_be_read_is_one_line(tmp_path: Path) -> None:
    new = variant(tmp_path, "cpu: 4", "cpu: 2")
    result = cli("render", "--diff", "--old", str(DEV), "--new", str(new), "--fleet", str(tmp_path))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().count("\n") == 0
    assert "summary.json not found" in result.stderr and "--fleet" in result.stderr
    wrong = cli("render", "--stack", str(DEV), "--fleet", str(tmp_path))
    assert wrong.returncode == 2 and "--fleet and --fleet-stack go with --diff" in wrong.stderr


def test_fleet_stack_without_the_pulumi_cli_is_one_line(tmp_path: Path) -> None:
    new = variant(tmp_path, "cpu: 4", "cpu: 2")
    args = ("render", "--diff", "--old", str(DEV), "--new", str(new), "--fleet-stack", "mine")
    result = cli(*args, env={"PATH": str(tmp_path)})
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "--stack mine reads the stack's outputs with the Pulumi CLI" in result.stderr
    assert "give --fleet" in result.stderr
