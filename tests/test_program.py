"""`__main__.py` under Pulumi's mock engine, for every stack: config is read through the
SDK exactly as `pulumi up` passes it, and a bad config stops before any registration."""

from __future__ import annotations

import asyncio
import json
import runpy
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml
from pulumi.runtime.mocks import MockMonitor

from components.problems import FleetConfigError

ROOT = Path(__file__).resolve().parent.parent
STACKS = sorted(
    p.name[len("Pulumi.") : -len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml")
)


class Mocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.registered: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.registered.append(args)
        return f"{args.name}_id", args.inputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
        return {}


class Monitor(MockMonitor):
    """Records every registration with its parent, and fails on a duplicate URN (the mock
    monitor itself accepts duplicates that the real engine rejects)."""

    def __init__(self, mocks: Mocks) -> None:
        super().__init__(mocks)
        self.urns: set[str] = set()

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)
        assert response.urn not in self.urns, f"duplicate URN {response.urn}"
        self.urns.add(response.urn)
        return response


def _engine_config(stack_file: Path) -> tuple[dict[str, str], list[str]]:
    """Config as the engine hands it to the program: one string per key, objects as JSON."""
    doc = yaml.safe_load(stack_file.read_text())
    config, secret = {}, []
    for key, value in (doc.get("config") or {}).items():
        config[key] = value if isinstance(value, str) else json.dumps(value)
        if "secure" in json.dumps(value):
            secret.append(key)
    return config, secret


def run_program(
    stack: str, config: dict[str, str], secret: list[str], mocks: Mocks | None = None
) -> tuple[Mocks, dict]:
    mocks = mocks or Mocks()
    # Pulumi's test decorator runs on the current event loop; asyncio.run() in other tests
    # leaves none behind, so each program gets a fresh one.
    asyncio.set_event_loop(asyncio.new_event_loop())
    pulumi.runtime.set_all_config(config, secret)
    pulumi.runtime.set_mocks(mocks, project="multikueue-fleet", stack=stack, monitor=Monitor(mocks))
    exports: dict[str, Any] = {}

    @pulumi.runtime.test
    def program() -> Any:
        runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")
        outputs = pulumi.runtime.get_root_resource().outputs  # type: ignore[union-attr]
        return pulumi.Output.all(**outputs).apply(exports.update)

    program()
    return mocks, exports


@pytest.mark.parametrize("stack", STACKS)
def test_program_runs_every_stack(stack: str) -> None:
    config, secret = _engine_config(ROOT / "stacks" / f"Pulumi.{stack}.yaml")
    mocks, exports = run_program(stack, config, secret)
    doc = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]
    workers = json.loads(config["multikueue-fleet:workers"])
    assert exports["fleet"] == doc.get("multikueue-fleet:fleetName", stack)
    assert [c["role"] for c in exports["clusters"]] == ["manager"] + ["worker"] * len(workers)
    assert [c["name"] for c in exports["clusters"][1:]] == [w["name"] for w in workers]
    # This version plans and validates the fleet; it registers no cluster resources yet.
    assert [r.typ for r in mocks.registered] == []


def test_program_stops_before_registering_anything_on_bad_config() -> None:
    config, secret = _engine_config(ROOT / "stacks" / "Pulumi.dev.yaml")
    config["multikueue-fleet:kueue"] = json.dumps({"featureGates": {"Bogus": True}})
    config["multikueue-fleet:workers"] = json.dumps([{"name": "w1", "frameworks": ["batch"]}])
    mocks = Mocks()
    with pytest.raises(FleetConfigError) as info:
        run_program("dev", config, secret, mocks)
    assert mocks.registered == []
    text = str(info.value)
    assert "stack 'dev': 3 error(s)" in text
    assert "kueue.featureGates.Bogus: unknown feature gate 'Bogus'" in text
    assert "workers[0].frameworks: 'jobset' is enabled on the manager" in text
    assert "Nothing was changed on any cluster" in text


def test_program_reads_secret_kubeconfigs_through_the_sdk() -> None:
    config, _ = _engine_config(ROOT / "stacks" / "Pulumi.dev.yaml")
    # Decrypted by the engine, flagged secret: accepted without the plain-text error.
    config["multikueue-fleet:workerKubeconfigs"] = json.dumps(
        {
            "worker1": yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "w",
                    "clusters": [
                        {
                            "name": "w",
                            "cluster": {
                                "server": "https://w.example:6443",
                                "certificate-authority-data": "Q0E=",
                            },
                        }
                    ],
                    "users": [{"name": "u", "user": {"exec": {"command": "aws"}}}],
                    "contexts": [{"name": "w", "context": {"cluster": "w", "user": "u"}}],
                }
            )
        }
    )
    with pytest.raises(FleetConfigError) as info:
        run_program("dev", config, ["multikueue-fleet:workerKubeconfigs"])
    assert (
        "workerKubeconfigs.worker1: Kueue would reject this kubeconfig: user 'u' runs an "
        "exec credential plugin" in str(info.value)
    )
    assert "plain text" not in str(info.value)
