"""What each cluster's Kueue reads at start: waitForPodsReady per role.

MultiKueue mirrors no status of LeaderWorkerSets and StatefulSets back to the manager
(kueue v0.19.2 pkg/controller/jobs/leaderworkerset/leaderworkerset_multikueue_adapter.go,
statefulset/statefulset_multikueue_adapter.go), and the workload controller evicts admitted
work without PodsReady with no MultiKueue exemption (pkg/controller/core/
workload_controller.go, admittedNotReadyWorkload). v1beta2 defaults waitForPodsReady whether
or not it is written (apis/config/v1beta2/defaults.go); only DisableWaitForPodsReady turns it
off (pkg/util/waitforpodsready/waitforpodsready.go).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from components.checks.load import load_stack
from components.model.spec import FleetSpec
from components.objects.kueue_config import configuration
from tests.helpers.fleet_config import base, load, only, problems_of

STACKS = Path(__file__).resolve().parents[2] / "stacks"


def _waits(spec: FleetSpec) -> dict[str, bool]:
    """Per cluster: whether its Kueue, as configured, evicts work without PodsReady."""
    found = {}
    for cluster in spec.clusters:
        config = configuration(spec, cluster)
        gate_off = config.get("featureGates", {}).get("DisableWaitForPodsReady", False)
        # Kueue defaults the block when absent, so only the gate turns it off.
        found[cluster.name] = not gate_off
        assert ("waitForPodsReady" in config) == (not gate_off), cluster.name
    return found


def _config(**kueue: Any) -> dict[str, Any]:
    config = base()
    config["kueue"] = kueue
    return config


def test_dev_stack_manager_cannot_evict_a_leaderworkerset_for_want_of_pods_ready() -> None:
    spec, problems = load_stack(str(STACKS / "Pulumi.dev.yaml"))
    assert "leaderworkerset" in spec.manager.frameworks
    assert _waits(spec) == {"manager": False, "worker1": True, "worker2": True}
    assert configuration(spec, spec.workers[0])["waitForPodsReady"]["timeout"] == "30m"
    note = only(problems, "kueue.waitForPodsReady")
    assert note.severity == "note"  # needs no action: shown once per run
    assert "leaderworkerset" in note.message and "never get PodsReady" in note.message


def test_asking_for_pods_ready_on_such_a_manager_is_refused() -> None:
    problems = problems_of(_config(waitForPodsReady={"onManager": True}))
    problem = only(problems, "kueue.waitForPodsReady.onManager")
    assert problem.severity == "error"
    assert "mirrors no status of leaderworkerset" in problem.message


def test_turning_the_opt_out_gate_off_on_such_a_manager_is_refused() -> None:
    problems = problems_of(_config(featureGates={"DisableWaitForPodsReady": False}))
    problem = only(problems, "kueue.featureGates.DisableWaitForPodsReady")
    assert problem.severity == "error"


def test_statefulsets_count_too() -> None:
    config = _config(integrations=["statefulset"])
    config["frameworks"] = ["batch", "jobset"]
    spec, problems = load(config)
    assert _waits(spec)["manager"] is False
    assert "statefulset" in only(problems, "kueue.waitForPodsReady").message


def test_manager_without_such_frameworks_waits_like_the_workers() -> None:
    config = _config()
    config["frameworks"] = ["batch", "jobset"]
    spec, problems = load(config)
    assert _waits(spec) == {"manager": True, "worker1": True, "worker2": True}
    assert problems == []


def test_acknowledged_off_on_the_manager_has_no_warning_and_workers_keep_theirs() -> None:
    spec, problems = load(_config(waitForPodsReady={"onManager": False, "timeout": "10m"}))
    assert problems == []
    assert _waits(spec) == {"manager": False, "worker1": True, "worker2": True}
    assert configuration(spec, spec.workers[1])["waitForPodsReady"]["timeout"] == "10m"


def test_off_everywhere_needs_no_note() -> None:
    spec, problems = load(_config(waitForPodsReady={"enabled": False}))
    assert problems == []
    assert set(_waits(spec).values()) == {False}


def test_render_of_the_dev_stack_carries_the_note(tmp_path: Path) -> None:
    out = tmp_path / "render"
    result = subprocess.run(
        [sys.executable, "-m", "components", "render", "--stack", "dev", "--out", str(out)],
        cwd=STACKS.parent, capture_output=True, text=True, check=False,
        env={"PYTHONPATH": str(STACKS.parent), "PATH": "/usr/bin:/bin",
             "MKF_UPSTREAM_CACHE": str(tmp_path / "cache")},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (note,) = yaml.safe_load((out / "fleet.yaml").read_text())["warnings"]
    assert note.startswith("note: kueue.waitForPodsReady: waitForPodsReady is off on the manager")
    # Kept in the render's fleet.yaml; said on stderr by `validate` only, not on every render.
    assert "waitForPodsReady" not in result.stderr
    assert "waitForPodsReady" not in result.stdout
    manager = list(yaml.safe_load_all((out / "manager" / "objects.yaml").read_text()))
    (config_map,) = [o for o in manager if o["metadata"]["name"] == "kueue-manager-config"]
    kueue = yaml.safe_load(config_map["data"]["controller_manager_config.yaml"])
    assert "waitForPodsReady" not in kueue
    assert kueue["featureGates"]["DisableWaitForPodsReady"] is True
