"""The CI driver with Pulumi's Automation API faked (no CLI here): the calls it makes, the
stack it names, the config it copies, that `run` always tears down, and exit codes."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import automation as driver_module
from components.automation import Driver, DriverError, Options, require_tools, stack_name
from components.status import Check, FleetStatus


class FakeOutput:
    def __init__(self, value: Any) -> None:
        self.value = value


class FakeStack:
    def __init__(self, auto: FakeAutomation, name: str) -> None:
        self.auto, self.name = auto, name
        self.workspace = self
        self.config: dict[str, Any] = {}

    def set_all_config(self, values: dict[str, Any]) -> None:
        self.auto.calls.append(("set_all_config", self.name))
        self.config = {k: v.value for k, v in values.items()}

    def up(self, on_output: Any = None) -> None:
        self.auto.calls.append(("up", self.name))
        if self.auto.fail_up:
            raise RuntimeError("pulumi up failed: kind create cluster: exit status 1")

    def outputs(self) -> dict[str, FakeOutput]:
        kubeconfig = yaml.safe_dump({"apiVersion": "v1", "kind": "Config"})
        return {
            "fleet": FakeOutput(self.name),
            "clusters": FakeOutput(
                [{"name": "manager", "role": "manager"}, {"name": "worker1", "role": "worker"}]
            ),
            "kubeconfigs": FakeOutput({"manager": kubeconfig, "worker1": kubeconfig}),
            "checks": FakeOutput(["kubectl ..."]),
        }

    def destroy(self, on_output: Any = None) -> None:
        self.auto.calls.append(("destroy", self.name))

    def remove_stack(self, name: str) -> None:
        self.auto.calls.append(("remove_stack", name))
        self.auto.existing.discard(name)

    def preview(self, diff: bool = False, on_output: Any = None) -> Any:
        self.auto.calls.append(("preview", self.name))
        return type("Result", (), {"stdout": "no changes"})()

    def cancel(self) -> None:
        self.auto.calls.append(("cancel", self.name))


class FakeAutomation:
    class StackNotFoundError(Exception):
        pass

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.existing: set[str] = set()
        self.fail_up = False
        self.env: dict[str, str] = {}

    def LocalWorkspaceOptions(self, work_dir: str, env_vars: dict[str, str]) -> Any:
        self.env = env_vars
        return env_vars

    def ConfigValue(self, value: str, secret: bool = False) -> Any:
        return FakeOutput(value)

    def create_or_select_stack(self, stack_name: str, work_dir: str, opts: Any) -> FakeStack:
        self.calls.append(("create_or_select_stack", stack_name))
        self.existing.add(stack_name)  # like the real one: the stack exists from here on
        return FakeStack(self, stack_name)

    def select_stack(self, stack_name: str, work_dir: str, opts: Any) -> FakeStack:
        self.calls.append(("select_stack", stack_name))
        if stack_name not in self.existing:
            raise self.StackNotFoundError(stack_name)
        return FakeStack(self, stack_name)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    auto = FakeAutomation()
    ready = FleetStatus([Check("manager", "ClusterQueue", "cq", True, "Ready")])

    async def wait(self: Driver, summary: dict[str, Any]) -> FleetStatus:
        auto.calls.append(("wait_ready", summary["stack"]))
        return auto.status if hasattr(auto, "status") else ready

    monkeypatch.setattr(Driver, "_wait_ready", wait)
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "ci-secret")
    monkeypatch.delenv("GITHUB_RUN_ID", raising=False)

    def make(name: str | None = "ci-test", **kw: Any) -> Driver:
        options = Options(
            base="ci", name=name, out=tmp_path / "out", backend=tmp_path / "state", **kw
        )
        return Driver(options, automation=auto, log=lambda _: None, tools=lambda _: None)

    auto.make = make
    return auto


def test_up_copies_the_base_stack_and_names_the_fleet_after_the_stack(
    fake: Any, tmp_path: Path
) -> None:
    summary = fake.make().up()
    assert [c[0] for c in fake.calls] == [
        "create_or_select_stack",
        "set_all_config",
        "up",
        "wait_ready",
    ]
    assert fake.env["PULUMI_BACKEND_URL"] == f"file://{tmp_path / 'state'}"
    assert fake.env["PULUMI_CONFIG_PASSPHRASE"] == "ci-secret"
    out = tmp_path / "out"
    written = json.loads((out / "summary.json").read_text())
    assert written["stack"] == "ci-test" and written["ready"] is True
    assert summary["clusters"][0]["kubeconfig"] == "kubeconfigs/manager.yaml"
    assert (out / "kubeconfigs" / "worker1.yaml").stat().st_mode & 0o777 == 0o600


def test_copied_config(fake: Any) -> None:
    driver = fake.make()
    stacks: list[FakeStack] = []
    original = fake.create_or_select_stack

    def record(**kw: Any) -> FakeStack:
        stacks.append(original(**kw))
        return stacks[-1]

    fake.create_or_select_stack = record
    driver.up()
    config = stacks[0].config
    assert config["multikueue-fleet:fleetName"] == "ci-test"
    assert json.loads(config["multikueue-fleet:workers"])[0]["name"] == "worker1"


def test_run_returns_the_command_exit_code_and_always_tears_down(fake: Any) -> None:
    code = fake.make().run(
        [
            sys.executable,
            "-c",
            "import os, sys; "
            "sys.exit(0 if os.environ['KUBECONFIG'].endswith('manager.yaml') "
            "else 9)",
        ]
    )
    assert code == 0
    assert [c[0] for c in fake.calls][-3:] == ["select_stack", "destroy", "remove_stack"]
    failing = fake.make(name="ci-fails").run([sys.executable, "-c", "raise SystemExit(7)"])
    assert failing == 7
    assert ("destroy", "ci-fails") in fake.calls


def test_run_tears_down_when_up_fails(fake: Any) -> None:
    fake.fail_up = True
    with pytest.raises(RuntimeError, match="kind create cluster"):
        fake.make(name="ci-broken").run(["true"])
    # up never finished, yet the stack may hold clusters: down ran all the same.
    assert ("destroy", "ci-broken") in fake.calls
    assert ("remove_stack", "ci-broken") in fake.calls


def test_run_tears_down_when_the_fleet_never_gets_ready(fake: Any) -> None:
    fake.status = FleetStatus([Check("worker1", "ClusterQueue", "cq", False, "Inactive")])
    with pytest.raises(DriverError, match="up but not ready"):
        fake.make(name="ci-unready").run(["true"])
    assert ("destroy", "ci-unready") in fake.calls
    assert ("remove_stack", "ci-unready") in fake.calls


def test_down_is_safe_twice(fake: Any) -> None:
    driver = fake.make(name="ci-twice")
    driver.up()
    driver.down("ci-twice")
    driver.down("ci-twice")
    assert fake.calls.count(("destroy", "ci-twice")) == 1


def test_a_passphrase_is_required(fake: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE")
    with pytest.raises(DriverError, match="set PULUMI_CONFIG_PASSPHRASE"):
        fake.make().up()
    assert not any(c[0] == "up" for c in fake.calls)


def test_unique_names() -> None:
    assert stack_name("ci", "123456789-2") == "ci-123456789-2"
    assert len(stack_name("a-long-base-name", "deadbeef" * 3)) <= 24


def test_missing_tools_are_named() -> None:
    with pytest.raises(DriverError) as info:
        require_tools(True, which=lambda _: None)
    assert "the Pulumi CLI" in str(info.value) and "kind" in str(info.value)
    with pytest.raises(DriverError, match="a running Docker engine"):
        require_tools(True, which=lambda n: f"/usr/bin/{n}", docker_running=lambda: False)
    require_tools(False, which=lambda n: "/x" if n == "pulumi" else None)


def test_cli_exit_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    from components.__main__ import main

    def refuse(*_: Any, **__: Any) -> None:
        raise DriverError("missing the Pulumi CLI")

    monkeypatch.setattr(driver_module.Driver, "up", refuse)
    monkeypatch.setattr(driver_module.Driver, "__init__", lambda self, *a, **k: None)
    assert main(["up"]) == 1
    assert main(["down"]) == 2  # needs --name
    assert main(["run"]) == 2  # needs a command
