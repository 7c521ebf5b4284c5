"""Ephemeral fleets for CI, driven through Pulumi's Automation API.

`up` makes a uniquely named stack from a base stack file (its config copied, the fleet
named after the stack so kind clusters never collide), on the local file backend,
brings it up, waits until the fleet is ready, and writes each cluster's kubeconfig and a
JSON summary to a directory. `down` destroys and removes it, and is safe to run twice.
`run` does up, runs a command with KUBECONFIG set to the manager's, and always does down,
returning the command's exit code.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.config_source import load_stack, parse_stack_text, stack_path
from components.spec import PROJECT

ROOT = Path(__file__).resolve().parent.parent
Log = Callable[[str], Any]


class DriverError(Exception):
    """A failure the driver explains; the CLI prints it and exits non-zero."""


@dataclass
class Options:
    base: str = "ci"
    name: str | None = None
    out: Path = ROOT / ".fleet"
    backend: Path = ROOT / ".pulumi-state"
    up_timeout: float = 3600
    ready_timeout: float = 900
    passphrase: str | None = None


def run_suffix() -> str:
    """Unique per CI run: the workflow run and attempt on GitHub, random elsewhere."""
    run, attempt = os.environ.get("GITHUB_RUN_ID"), os.environ.get("GITHUB_RUN_ATTEMPT", "1")
    return f"{run}-{attempt}" if run else uuid.uuid4().hex[:6]


def stack_name(base: str, suffix: str) -> str:
    # kind names its node containers <fleet>-<cluster>-control-plane: keep it short.
    return f"{base}-{suffix}"[:24].rstrip("-")


def require_tools(
    kind_stack: bool,
    which: Callable[[str], str | None] = shutil.which,
    docker_running: Callable[[], bool] | None = None,
) -> None:
    missing = []
    if which("pulumi") is None:
        missing.append(
            "the Pulumi CLI (scripts/up.sh installs it into .tools/bin; put that on PATH)"
        )
    if kind_stack:
        if which("kind") is None:
            missing.append("kind (scripts/up.sh installs it into .tools/bin)")
        if which("docker") is None:
            missing.append("docker")
        elif not (docker_running or _docker_running)():
            missing.append("a running Docker engine (docker info failed)")
    if missing:
        raise DriverError("cannot create the fleet: missing " + "; ".join(missing))


def _docker_running() -> bool:
    return subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0


class Driver:
    def __init__(
        self,
        options: Options,
        automation: Any = None,
        log: Log = print,
        tools: Callable[[bool], None] = require_tools,
    ) -> None:
        if automation is None:
            from pulumi import automation
        self.auto = automation
        self.options = options
        self.log = log
        self.tools = tools

    def _passphrase(self) -> str:
        if self.options.passphrase:
            return self.options.passphrase
        value = os.environ.get("PULUMI_CONFIG_PASSPHRASE")
        if value is None:
            raise DriverError(
                "set PULUMI_CONFIG_PASSPHRASE: it encrypts this stack's secrets "
                "(the kubeconfigs) in the local backend"
            )
        return value

    def _workspace_options(self) -> Any:
        self.options.backend.mkdir(parents=True, exist_ok=True)
        return self.auto.LocalWorkspaceOptions(
            work_dir=str(ROOT),
            env_vars={
                "PULUMI_BACKEND_URL": f"file://{self.options.backend}",
                "PULUMI_CONFIG_PASSPHRASE": self._passphrase(),
                "PULUMI_SKIP_UPDATE_CHECK": "1",
            },
        )

    def _stack(self, name: str, create: bool) -> Any:
        opts = self._workspace_options()
        if create:
            return self.auto.create_or_select_stack(stack_name=name, work_dir=str(ROOT), opts=opts)
        return self.auto.select_stack(stack_name=name, work_dir=str(ROOT), opts=opts)

    def _with_timeout(
        self, stack: Any, seconds: float, action: Callable[[], Any], what: str
    ) -> Any:
        """Cancels the operation when it outlives its time limit."""
        timer = threading.Timer(seconds, stack.cancel)
        timer.start()
        try:
            return action()
        except Exception as exc:
            if not timer.is_alive():
                raise DriverError(
                    f"{what} did not finish in {seconds:.0f}s and was cancelled"
                ) from exc
            raise
        finally:
            timer.cancel()

    def up(self) -> dict[str, Any]:
        o = self.options
        base_file = stack_path(o.base)
        spec, _ = load_stack(str(base_file))  # validated before anything is created
        self.tools(any(c.provider == "kind" for c in spec.clusters))
        config, secret = parse_stack_text(base_file.read_text())
        if secret:
            raise DriverError(
                f"{base_file} has encrypted values ({', '.join(sorted(secret))}); "
                "an ephemeral stack cannot decrypt another stack's secrets"
            )
        name = o.name or stack_name(o.base, run_suffix())
        self.log(f"creating stack {name} from {base_file.name}")
        stack = self._stack(name, create=True)
        values = {**config, "fleetName": name}
        stack.set_all_config(
            {
                f"{PROJECT}:{key}": self.auto.ConfigValue(
                    value=value if isinstance(value, str) else json.dumps(value)
                )
                for key, value in values.items()
            }
        )
        self.log(f"pulumi up {name} (time limit {o.up_timeout:.0f}s)")
        self._with_timeout(
            stack, o.up_timeout, lambda: stack.up(on_output=self.log), f"pulumi up of {name}"
        )
        outputs = {k: v.value for k, v in stack.outputs().items()}
        summary = self._write(name, outputs)
        self.log(f"waiting until the fleet is ready (time limit {o.ready_timeout:.0f}s)")
        status = asyncio.run(self._wait_ready(summary))
        summary["ready"] = status.ready
        summary["status"] = json.loads(status.as_json())["checks"]
        (o.out / "summary.json").write_text(json.dumps(summary, indent=2))
        self.log(status.table())
        if not status.ready:
            raise DriverError(
                f"fleet {name} is up but not ready after {o.ready_timeout:.0f}s "
                f"(see {o.out / 'summary.json'})"
            )
        return summary

    async def _wait_ready(self, summary: dict[str, Any]) -> Any:
        from components.status import wait_ready

        kubeconfigs = {
            c["name"]: yaml.safe_load((self.options.out / c["kubeconfig"]).read_text())
            for c in summary["clusters"]
        }
        roles = {c["name"]: c["role"] for c in summary["clusters"]}
        return await wait_ready(kubeconfigs, roles, self.options.ready_timeout)

    def _write(self, name: str, outputs: dict[str, Any]) -> dict[str, Any]:
        out = self.options.out
        (out / "kubeconfigs").mkdir(parents=True, exist_ok=True)
        clusters = []
        for cluster in outputs.get("clusters") or []:
            path = out / "kubeconfigs" / f"{cluster['name']}.yaml"
            path.write_text(outputs["kubeconfigs"][cluster["name"]])
            path.chmod(0o600)  # credentials
            clusters.append({**cluster, "kubeconfig": str(path.relative_to(out))})
        summary = {
            "stack": name,
            "fleet": outputs.get("fleet"),
            "clusters": clusters,
            "checks": outputs.get("checks") or [],
        }
        (out / "summary.json").write_text(json.dumps(summary, indent=2))
        return summary

    def down(self, name: str) -> None:
        try:
            stack = self._stack(name, create=False)
        except self.auto.StackNotFoundError:
            self.log(f"stack {name} does not exist: nothing to tear down")
            return
        self.log(f"pulumi destroy {name}")
        self._with_timeout(
            stack,
            self.options.up_timeout,
            lambda: stack.destroy(on_output=self.log),
            f"destroy of {name}",
        )
        stack.workspace.remove_stack(name)
        self.log(f"stack {name} removed")

    def preview(self, name: str) -> str:
        stack = self._stack(name, create=False)
        return stack.preview(diff=True, on_output=self.log).stdout

    def run(self, command: Sequence[str]) -> int:
        """up, the command with the manager's KUBECONFIG, then down whatever happened."""
        name = self.options.name or stack_name(self.options.base, run_suffix())
        self.options.name = name
        try:
            summary = self.up()
            manager = next(c for c in summary["clusters"] if c["role"] == "manager")
            env = {
                **os.environ,
                "KUBECONFIG": str(self.options.out / manager["kubeconfig"]),
                "FLEET_SUMMARY": str(self.options.out / "summary.json"),
            }
            self.log(f"running: {' '.join(command)}")
            return subprocess.run(list(command), env=env, check=False).returncode
        finally:
            self.down(name)
