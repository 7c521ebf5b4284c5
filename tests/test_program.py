"""`__main__.py` under Pulumi's mock engine: config read through the SDK exactly as
`pulumi up` passes it, the stack's exports, and a bad config stopped before any
registration."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from components.problems import FleetConfigError
from tests.pulumi_harness import ROOT, STACKS, engine_config, prepare_environment, run_program
from tests.test_validate import KUBECONFIG


@pytest.fixture(autouse=True)
def environment(tmp_path: Path) -> None:
    prepare_environment(tmp_path)


@pytest.mark.parametrize("stack", STACKS)
def test_program_exports_every_stack(stack: str) -> None:
    config, secret = engine_config(ROOT / "stacks" / f"Pulumi.{stack}.yaml")
    run = run_program(stack, config, secret)
    doc = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]
    workers = json.loads(config["multikueue-fleet:workers"])
    clusters, _ = run.resolve(run.exports["clusters"])
    assert run.exports["fleet"] == doc.get("multikueue-fleet:fleetName", stack)
    assert [c["role"] for c in clusters] == ["manager"] + ["worker"] * len(workers)
    assert [c["name"] for c in clusters[1:]] == [w["name"] for w in workers]
    assert all(c["context"] for c in clusters)
    checks, _ = run.resolve(run.exports["checks"])
    assert checks[0].startswith(f"kubectl --context {clusters[0]['context']} get ")


def test_program_stops_before_registering_anything_on_bad_config() -> None:
    config, secret = engine_config(ROOT / "stacks" / "Pulumi.dev.yaml")
    config["multikueue-fleet:kueue"] = json.dumps({"featureGates": {"Bogus": True}})
    config["multikueue-fleet:workers"] = json.dumps([{"name": "w1", "frameworks": ["batch"]}])
    with pytest.raises(FleetConfigError) as info:
        run_program("dev", config, secret)
    text = str(info.value)
    assert "stack 'dev': 3 error(s)" in text
    assert "kueue.featureGates.Bogus: unknown feature gate 'Bogus'" in text
    assert "workers[0].frameworks: 'jobset' is enabled on the manager" in text
    assert "Nothing was changed on any cluster" in text


def test_program_reads_secret_kubeconfigs_through_the_sdk() -> None:
    config, _ = engine_config(ROOT / "stacks" / "Pulumi.dev.yaml")
    # Decrypted by the engine, flagged secret: accepted without the plain-text error.
    with_exec = copy.deepcopy(KUBECONFIG)
    with_exec["users"][0]["user"] = {"exec": {"command": "aws"}}
    config["multikueue-fleet:workerKubeconfigs"] = json.dumps(
        {"worker1": yaml.safe_dump(with_exec)}
    )
    with pytest.raises(FleetConfigError) as info:
        run_program("dev", config, ["multikueue-fleet:workerKubeconfigs"])
    assert (
        "workerKubeconfigs.worker1: Kueue would reject this kubeconfig: user 'u' runs an "
        "exec credential plugin" in str(info.value)
    )
    assert "plain text" not in str(info.value)


def test_a_kubeconfig_the_user_supplies_is_the_one_registered() -> None:
    from tests.test_components import secret_value

    good = yaml.safe_dump(KUBECONFIG)
    config, _ = engine_config(ROOT / "stacks" / "Pulumi.dev.yaml")
    config["multikueue-fleet:workerKubeconfigs"] = json.dumps({"worker2": good})
    run = run_program("dev", config, ["multikueue-fleet:workerKubeconfigs"])
    secret = run.monitor.named("manager:Secret:kueue-system/worker2-kubeconfig")
    assert secret_value(secret.inputs["stringData"]["kubeconfig"]) == good
