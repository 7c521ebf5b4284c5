"""The real-fleet comparison's small version (issue 30), on the kind tier: the bench fleet
(stacks/Pulumi.bench.yaml: a manager and three workers of different sizes) brought up by
`mkf up`, one minute of the stream replayed through our dispatcher and through Kueue's
AllAtOnce (bench/fleet_compare.py --check), then torn down by `mkf down`. Every job must
finish, no admission may be lost and no workload left pending; the fleet is put back to
our dispatcher after the runs."""

from __future__ import annotations

import csv
import uuid
from pathlib import Path

import pytest
import yaml

from tests.helpers.kind_tier import (
    fleet_containers,
    kubectl,
    run,
    user_project,
)

PASSPHRASE = "kind-tier-bench"


def test_the_stream_finishes_through_ours_and_all_at_once(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    project, env = user_project(
        tmp_path_factory.mktemp("kind-bench") / "project", "bench", PASSPHRASE
    )
    name = f"ktb{uuid.uuid4().hex[:6]}"
    out = project / ".fleet" / name
    up = run([".venv/bin/mkf", "up", "--base", "bench", "--name", name, "--out", str(out)],
             project, env, timeout=2400)  # fmt: skip
    try:
        assert up.returncode == 0, up.stdout[-6000:] + up.stderr[-6000:]
        runs = project / "runs.csv"
        compared = run(
            [".venv/bin/python", "bench/fleet_compare.py", "--fleet", str(out),
             "--dispatchers", "policy,AllAtOnce", "--minutes", "1", "--check",
             "--csv", str(runs)],
            project, env, timeout=2400,
        )  # fmt: skip
        assert compared.returncode == 0, compared.stdout[-6000:] + compared.stderr[-6000:]
        rows = {
            (r["dispatcher"], r["run"]): r for r in csv.DictReader(runs.read_text().splitlines())
        }
        for dispatcher in ("policy", "AllAtOnce"):
            real = rows[(dispatcher, "real")]
            assert float(real["unfinished"]) == float(real["lost"]) == float(real["pending"]) == 0
        # Ours nominates one worker per workload; AllAtOnce copies each to all three.
        assert float(rows[("policy", "real")]["copies"]) <= 1.3
        assert float(rows[("AllAtOnce", "real")]["copies"]) > 2
        assert float(rows[("policy", "real")]["cpu_s"]) > 0
        # The fleet is back to the stack's dispatcher.
        config = yaml.safe_load(
            kubectl(out / "kubeconfigs" / "manager.yaml", "get", "configmap",
                    "kueue-manager-config", "-n", "kueue-system",
                    "-o", "jsonpath={.data.controller_manager_config\\.yaml}")
        )  # fmt: skip
        assert config["multiKueue"]["dispatcherName"] == "multikueue-fleet/dispatcher"
    finally:
        down = run([".venv/bin/mkf", "down", "--name", name], project, env, timeout=1800)
    assert down.returncode == 0, down.stdout[-4000:] + down.stderr[-4000:]
    assert not fleet_containers(f"{name}-"), "node containers left"
    assert not list(Path(project / "stacks").glob(f"Pulumi.{name}.yaml"))
