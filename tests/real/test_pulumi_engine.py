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

from components.model import stack_yaml
from components.model.versions import PULUMI_CLI_VERSION
from components.upstream import toolchain
from tests.helpers.real_fleet import pulumi_env

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


# Plain scalars YAML 1.1 and gopkg.in/yaml.v3 read differently, as keys of the project's
# config and inside an object value (components/model/yaml_v3.py).
SCALARS = ["no", "yes", "On", "y", "012", "0o17", "1:30", "1e3", "08", "2001-12-14", "~", "1_000"]


@needs_go
def test_the_real_cli_reads_stack_files_as_the_project_does(
    project: tuple[Path, dict[str, str]],
) -> None:
    """What `pulumi config` hands the program for each scalar is what `validate` reads."""
    folder, env = project
    assert pulumi(["stack", "init", "dev"], folder, env).returncode == 0
    stack_file = folder / "Pulumi.dev.yaml"
    salt = stack_file.read_text() if stack_file.exists() else ""
    lines = [f"  engine-check:k{i}: {s}" for i, s in enumerate(SCALARS)]
    lines += ["  engine-check:object:"] + [f"    k{i}: {s}" for i, s in enumerate(SCALARS)]
    text = salt + "config:\n" + "\n".join(lines) + "\n"
    stack_file.write_text(text)
    shown = pulumi(["config", "--json", "--stack", "dev"], folder, env)
    assert shown.returncode == 0, shown.stderr
    config = json.loads(shown.stdout)
    ours = stack_yaml.load(text).data["config"]
    for i, scalar in enumerate(SCALARS):
        key = f"engine-check:k{i}"
        value = config[key]["value"]
        # A key with no value reaches the program as "" (what read_stack_text gives too).
        expected = "" if ours[key] is None else ours[key]
        # A scalar config value reaches the program as text: JSON for a bool or number.
        if isinstance(expected, str):
            assert value == expected, (scalar, value, expected)
        else:
            assert json.loads(value) == expected, (scalar, value, expected)
        inside = config["engine-check:object"]["objectValue"][f"k{i}"]
        assert inside == ours["engine-check:object"][f"k{i}"], (scalar, inside)
