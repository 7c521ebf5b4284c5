"""The real Pulumi engine, built from the pinned Go modules (components/upstream/toolchain.py:
the CLI and the kubernetes provider from tools/pulumi, the Python language host from
tools/pulumi-language-python, the SDK's launchers from the SDK's Go module): its version, and a
Python program with a dynamic provider and a kubernetes Provider brought up and destroyed on a
local file backend, every plugin found on PATH and none downloaded. Skips without Go."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.model.versions import PULUMI_CLI_VERSION
from components.upstream import toolchain
from tests.real_fleet import pulumi_env

needs_go = pytest.mark.skipif(
    shutil.which("go") is None, reason="go is not on PATH: the Pulumi CLI is built from Go modules"
)


def _tool_block(module_dir: Path) -> set[str]:
    """The packages a tools module's go.mod lists under `tool` (a block or single lines)."""
    text = (module_dir / "go.mod").read_text()
    found = set(re.findall(r"^tool ([^\s(]+)$", text, re.M))
    for block in re.findall(r"^tool \((.*?)^\)", text, re.M | re.S):
        found |= {line.strip() for line in block.splitlines() if line.strip()}
    return found


def test_every_tool_is_pinned_where_it_is_built() -> None:
    for tool in toolchain.TOOLS.values():
        assert tool.package in _tool_block(tool.module_dir), (tool.name, tool.module_dir)
        assert tool.module in toolchain.module_versions(tool.module_dir), tool.name
    # The SDK's launchers match the Python SDK the program runs with.
    assert (
        f"pulumi=={toolchain.python_sdk_version()}"
        in (toolchain.ROOT / "requirements.txt").read_text()
    )


PROGRAM = """
import pulumi
import pulumi_kubernetes as k8s
from pulumi.dynamic import CreateResult, Resource, ResourceProvider


class Upper(ResourceProvider):
    def create(self, props):
        return CreateResult(id_="upper", outs={**props, "upper": props["text"].upper()})


class UpperText(Resource):
    upper: pulumi.Output[str]

    def __init__(self, name, text):
        super().__init__(Upper(), name, {"text": text, "upper": None})


# Configured but never used: the engine starts the kubernetes plugin to create it, and the
# provider leaves an unreachable cluster alone until an object needs it.
k8s.Provider("k8s", kubeconfig=open("kubeconfig").read())
pulumi.export("upper", UpperText("text", "from the real engine").upper)
"""

KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "current-context": "nowhere",
    "clusters": [{"name": "nowhere", "cluster": {"server": "https://127.0.0.1:9"}}],
    "users": [{"name": "nobody", "user": {"token": "none"}}],
    "contexts": [{"name": "nowhere", "context": {"cluster": "nowhere", "user": "nobody"}}],
}


@pytest.fixture(scope="module")
def engine() -> dict[str, Path]:
    return toolchain.build(list(toolchain.PULUMI_ENGINE), log=lambda _line: None)


@pytest.fixture
def project(tmp_path: Path, engine: dict[str, Path]) -> Iterator[tuple[Path, dict[str, str]]]:
    """A Python project on a file backend, with an environment that reaches no network:
    the built engine first on PATH, then this interpreter's environment (which has the
    pinned SDKs; the language host runs the first python3 on PATH), a fresh PULUMI_HOME."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "Pulumi.yaml").write_text("name: engine-check\nruntime: python\n")
    (folder / "__main__.py").write_text(PROGRAM)
    (folder / "kubeconfig").write_text(json.dumps(KUBECONFIG))
    env = pulumi_env(tmp_path, "engine-check")
    yield folder, env


def pulumi(args: list[str], folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(toolchain.path_of("pulumi")), *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@needs_go
def test_the_cli_is_the_pinned_release(project: tuple[Path, dict[str, str]]) -> None:
    folder, env = project
    result = pulumi(["version"], folder, env)
    assert result.returncode == 0, result.stderr
    pinned = toolchain.module_versions(toolchain.PULUMI_MODULE)["github.com/pulumi/pulumi/pkg/v3"]
    assert result.stdout.strip() == pinned
    # The CLI a user's scripts/up.sh installs is the one tested here.
    assert pinned == f"v{PULUMI_CLI_VERSION}"
    env_sh = (toolchain.ROOT / "scripts" / "env.sh").read_text()
    assert f'PULUMI_VERSION="{PULUMI_CLI_VERSION}"' in env_sh
    # Pulumi.yaml's requiredPulumiVersion (>=3.260.0): the CLI refuses below it.
    assert tuple(map(int, pinned.lstrip("v").split("."))) >= (3, 260, 0)


@needs_go
def test_a_python_program_goes_up_and_down_with_plugins_from_path_only(
    project: tuple[Path, dict[str, str]],
) -> None:
    folder, env = project
    home = Path(env["PULUMI_HOME"])
    assert pulumi(["stack", "init", "dev"], folder, env).returncode == 0
    # -v=6 makes the engine say where it found each plugin (a JSON log line per message).
    # Without automatic acquisition a missing plugin is an error, never a download (this
    # environment's cloud SDKs make the engine ask for their plugins too).
    up = pulumi(
        ["up", "--yes", "--skip-preview", "--logtostderr", "-v=6", "--non-interactive"],
        folder,
        env,
    )
    assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
    found = re.findall(
        r"GetPluginPath\((\w+), ([^,]+), ([^,]*), [^)]*\): found on \$PATH ([^\s\"]+)",
        up.stderr,
    )
    by_name = {(kind, name): (asked, Path(path)) for kind, name, asked, path in found}
    assert by_name[("language", "python")][1] == toolchain.path_of("pulumi-language-python")
    assert by_name[("resource", "pulumi-python")][1] == toolchain.path_of(
        "pulumi-resource-pulumi-python"
    )
    asked, path = by_name[("resource", "kubernetes")]
    assert path == toolchain.path_of("pulumi-resource-kubernetes")
    # The SDK asks for the plugin of its own release; the one on PATH answers whatever it is.
    assert asked == "4.34.2"
    # Nothing was downloaded into the plugin cache.
    plugins = home / "plugins"
    assert not plugins.exists() or not any(plugins.iterdir()), list(plugins.iterdir())
    output = pulumi(["stack", "output", "upper"], folder, env)
    assert output.stdout.strip() == "FROM THE REAL ENGINE"
    listed = pulumi(["plugin", "ls"], folder, env)
    assert listed.returncode == 0 and "TOTAL plugin cache size: 0 B" in listed.stdout
    down = pulumi(["destroy", "--yes", "--non-interactive"], folder, env)
    assert down.returncode == 0, down.stdout[-3000:] + down.stderr[-3000:]
    state = json.loads(pulumi(["stack", "export"], folder, env).stdout)
    assert not state["deployment"].get("resources")
