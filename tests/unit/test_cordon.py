"""Cordoning a worker: the stack setting, what it renders, what validate says about it, the
commands that write it (nothing else of the file touched), and what status shows."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path

import pytest

from components.checks.load import load_checked, load_stack
from components.cli.cordon import CordonError, edit, set_cordon
from components.cli.status import MULTIKUEUE_CLUSTERS, FleetStatus, _conditions
from components.model.problems import FleetConfigError
from components.objects.fleet import cluster_objects
from controller.model import CORDONED_LABEL
from tests.helpers.fleet_config import base
from tests.helpers.stack_texts import ROOT, cli

DEV = (ROOT / "stacks" / "Pulumi.dev.yaml").read_text()


def _stack(tmp_path: Path, text: str = DEV) -> Path:
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(text)
    return path


def test_a_cordoned_worker_s_multikueue_cluster_carries_the_label_and_nothing_else_changes() -> (
    None
):
    config = base()
    plain, _ = load_checked(config, "dev", "test")
    config["workers"][0]["cordoned"] = True
    cordoned, _ = load_checked(config, "dev", "test")
    assert cordoned.workers[0].cordoned and not cordoned.workers[1].cordoned

    def objects(spec):  # type: ignore[no-untyped-def]
        return {
            (o["kind"], o["metadata"]["name"]): o
            for o in cluster_objects(spec, spec.manager).objects
        }

    before, after = objects(plain), objects(cordoned)
    changed = [k for k in before if before[k] != after[k]]
    assert changed == [("MultiKueueCluster", "worker1")]
    labels = after[("MultiKueueCluster", "worker1")]["metadata"]["labels"]
    assert labels[CORDONED_LABEL] == "true" and labels["region"] == "a"
    assert CORDONED_LABEL not in after[("MultiKueueCluster", "worker2")]["metadata"]["labels"]


@pytest.mark.parametrize(
    ("change", "path", "says"),
    [
        (
            lambda c: c["workers"][1].update(labels={CORDONED_LABEL: "true"}),
            f"workers[1].labels.{CORDONED_LABEL}",
            "set workers[1].cordoned: true",
        ),
        (
            lambda c: c.setdefault("dispatcher", {}).update(
                policy={"clusterSelector": {CORDONED_LABEL: "true"}}
            ),
            f"dispatcher.policy.clusterSelector.{CORDONED_LABEL}",
            "a cordoned worker is never nominated",
        ),
        (
            lambda c: c["workers"][0].update(cordoned="yes"),
            "workers[0].cordoned",
            "expected true or false",
        ),
    ],
)
def test_validate_refuses_a_cordon_written_any_other_way(change, path: str, says: str) -> None:  # type: ignore[no-untyped-def]
    config = copy.deepcopy(base())
    change(config)
    with pytest.raises(FleetConfigError) as refused:
        load_checked(config, "dev", "test")
    text = str(refused.value)
    assert path in text and says in text, text


def test_every_worker_cordoned_is_a_warning() -> None:
    config = base()
    for w in config["workers"]:
        w["cordoned"] = True
    _, problems = load_checked(config, "dev", "test")
    assert any(
        p.severity == "warning" and "every worker is cordoned" in p.message for p in problems
    ), problems


def test_cordon_then_uncordon_gives_the_file_back_byte_for_byte(tmp_path: Path) -> None:
    path = _stack(tmp_path)
    said = set_cordon(path, "worker2", True).said
    assert said == f"cordoned worker2 in {path} (workers[1].cordoned: true)"
    text = path.read_text()
    # One line added, under the worker's name, at its indentation; the rest as it was.
    assert (
        text.replace("    - name: worker2\n      cordoned: true\n", "    - name: worker2\n") == DEV
    )
    spec, _ = load_stack(str(path))
    assert [w.cordoned for w in spec.workers] == [False, True]
    assert "already cordoned" in set_cordon(path, "worker2", True).said
    assert path.read_text() == text
    set_cordon(path, "worker2", False)
    assert path.read_text() == DEV
    assert "already not cordoned" in set_cordon(path, "worker2", False).said


def test_a_cordoned_line_the_user_wrote_keeps_its_comment(tmp_path: Path) -> None:
    text = DEV.replace(
        "    - name: worker1\n",
        "    - name: worker1\n      cordoned: false  # until the disks are replaced\n",
    )
    path = _stack(tmp_path, text)
    set_cordon(path, "worker1", True)
    assert "      cordoned: true  # until the disks are replaced\n" in path.read_text()
    set_cordon(path, "worker1", False)
    assert path.read_text() == text


def test_what_cannot_be_written_is_refused_and_the_file_left_alone(tmp_path: Path) -> None:
    with pytest.raises(CordonError, match=r"no worker named 'worker3'.*worker1, worker2"):
        edit(DEV, "dev.yaml", "worker3", True)
    flow = DEV.replace(
        "    - name: worker2\n      labels:\n        region: local-b\n",
        "    - {name: worker2, labels: {region: local-b}}\n",
    )
    with pytest.raises(CordonError, match=r"workers\[1\] is written on one line.*by hand"):
        edit(flow, "dev.yaml", "worker2", True)
    # A file with an error of its own: the edit would not read back valid, so nothing is
    # written (the user fixes the file first).
    broken = DEV.replace("cpu: 4", "cpu: four")
    path = _stack(tmp_path, broken)
    with pytest.raises(CordonError, match=r"would not be valid.*left as it was"):
        set_cordon(path, "worker1", True)
    assert path.read_text() == broken


def test_the_commands_say_what_they_did_and_what_comes_next(tmp_path: Path) -> None:
    path = _stack(tmp_path)
    done = cli("cordon", "worker1", "--stack", str(path))
    assert done.returncode == 0, done.stderr
    assert "cordoned worker1" in done.stdout
    assert "next: `pulumi up --stack dev` applies it" in done.stdout
    undone = cli("uncordon", "worker1", "--stack", str(path))
    assert undone.returncode == 0 and path.read_text() == DEV, undone.stderr
    wrong = cli("cordon", "nobody", "--stack", str(path))
    assert wrong.returncode == 2 and "Traceback" not in wrong.stderr
    assert wrong.stderr.count("\n") == 1 and "no worker named 'nobody'" in wrong.stderr
    missing = cli("cordon", "worker1")
    assert missing.returncode == 2 and "--stack" in missing.stderr


class _Manager:
    """What `mkf status` lists on the manager: two MultiKueueClusters, one cordoned."""

    async def list(self, kind, namespace=None):  # type: ignore[no-untyped-def]
        active = {"conditions": [{"type": "Active", "status": "True", "reason": "Active"}]}

        def mkc(name: str, labels: dict[str, str]) -> dict[str, object]:
            return {"metadata": {"name": name, "labels": labels}, "status": active}

        return [mkc("worker1", {CORDONED_LABEL: "true"}), mkc("worker2", {})], ""


def test_status_shows_a_cordoned_worker() -> None:
    checks = asyncio.run(
        _conditions(_Manager(), "manager", MULTIKUEUE_CLUSTERS, "MultiKueueCluster")  # type: ignore[arg-type]
    )
    assert [(c.name, c.ready, c.cordoned) for c in checks] == [
        ("worker1", True, True),
        ("worker2", True, False),
    ]
    table = FleetStatus(checks).table().splitlines()
    assert "Cordoned: nothing new is dispatched here; Active" in table[1]
    assert "Cordoned" not in table[2]
    assert '"cordoned": true' in FleetStatus(checks).as_json()


def test_the_operations_page_shows_what_the_command_prints(tmp_path: Path) -> None:
    """docs/operations.md, "Take a worker out of service": the console block's command, run
    in a project of its own with the dev stack, prints what the page shows."""
    page = (ROOT / "docs" / "operations.md").read_text()
    section = page.split("### Take a worker out of service", 1)[1]
    block = section.split("```console\n", 1)[1].split("```", 1)[0].splitlines()
    command, shown = block[0].removeprefix("$ ").split(), block[1:]
    (tmp_path / "stacks").mkdir()
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "stacks" / "Pulumi.dev.yaml").write_text(DEV)
    assert command[0] == "mkf"
    done = cli(*command[1:], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == shown
    undone = cli("uncordon", *command[2:], cwd=tmp_path)
    assert undone.returncode == 0 and (tmp_path / "stacks" / "Pulumi.dev.yaml").read_text() == DEV
