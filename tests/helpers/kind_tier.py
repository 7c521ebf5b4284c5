"""What the kind-tier tests share: the project copied as a user's clone would be, its stack
files pointed at the node image and registry mirror `python -m kindnode build` made (the
stack setting a user behind a firewall writes), and the tools on PATH as a user has them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.upstream import toolchain
from kindnode import build, host
from tests.helpers.ambient import as_a_user

ROOT = Path(__file__).resolve().parents[2]


def require_kind_tier() -> dict[str, Any]:
    """The build's manifest, or a skip that says what is missing and how to get it."""
    if not host.docker_answers():
        pytest.skip(
            "no Docker engine answers: `python -m kindnode host --prepare` installs and starts "
            "Debian's docker.io (CI runs it)"
        )
    manifest = build.read_manifest()
    if manifest is None:
        pytest.skip(f"the kind tier is not built ({build.MANIFEST}): run python -m kindnode build")
    return manifest


def copy_project(target: Path) -> Path:
    shutil.copytree(
        ROOT,
        target,
        ignore=shutil.ignore_patterns(
            ".git", ".venv*", ".tools", ".pulumi-state", ".render", ".fleet", ".cache",
            "__pycache__", "local",  # stacks/local: this host's settings, as a clone has none
        ),
    )  # fmt: skip
    return target


def set_stack_keys(stack_file: Path, **keys: Any) -> None:
    """Top-level keys of the project set in a copy's stack file (a test's own fleet name)."""
    data = yaml.safe_load(stack_file.read_text())
    for key, value in keys.items():
        data["config"][f"multikueue-fleet:{key}"] = value
    stack_file.write_text(yaml.safe_dump(data, sort_keys=False))


def use_kind_tier(stack_file: Path, manifest: dict[str, Any], **extra: Any) -> None:
    """Every kind cluster of the stack on the built node image, pulling through the mirror,
    and the dispatcher built FROM the built base."""
    data = yaml.safe_load(stack_file.read_text())
    config = data["config"]
    settings = {
        "nodeImage": manifest["nodeImage"],
        "registryMirrors": manifest["registryMirrors"],
    }
    manager = config.setdefault("multikueue-fleet:manager", {})
    manager.setdefault("kind", {}).update(settings)
    workers = config.get("multikueue-fleet:workers") or [{"name": "worker1"}, {"name": "worker2"}]
    for worker in workers:
        worker.setdefault("kind", {}).update(settings)
    config["multikueue-fleet:workers"] = workers
    # The dispatcher image built FROM the stand-in base the build made (nothing is pulled).
    dispatcher = config.setdefault("multikueue-fleet:dispatcher", {})
    if not dispatcher.get("image") and dispatcher.get("run", "cluster") == "cluster":
        dispatcher["baseImage"] = manifest["dispatcherBase"]
    for key, value in extra.items():
        config[f"multikueue-fleet:{key}"] = value
    stack_file.write_text(yaml.safe_dump(data, sort_keys=False))


def tool_env(project: Path, passphrase: str | None = None) -> dict[str, str]:
    """PATH with the pinned kind, Pulumi CLI and plugins and kubectl the build made (what
    scripts/up.sh finds on PATH and uses), the local backend of the copy."""
    toolchain.build(list(toolchain.PULUMI_ENGINE), log=lambda _line: None)
    # A TMPDIR of the copy's own, which engine_leftovers reads after the fleet's commands.
    tmp = project.parent / f"{project.name}-tmp"
    tmp.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(toolchain.BIN_DIR), os.environ["PATH"]]),
        "PULUMI_SKIP_UPDATE_CHECK": "1",
        "PULUMI_BACKEND_URL": f"file://{project}/.pulumi-state",
        "TMPDIR": str(tmp),
    }
    env = as_a_user(env)
    if passphrase:
        env["PULUMI_CONFIG_PASSPHRASE"] = passphrase
    else:
        env.pop("PULUMI_CONFIG_PASSPHRASE", None)
    return env


def engine_leftovers(project: Path, env: dict[str, str]) -> list[Path]:
    """What the Pulumi engine left after mkf or up.sh/down.sh: a kubeconfig in the caller's
    TMPDIR (pulumi-kubernetes writes one per provider and never removes it; those commands
    give it a folder of their own: components/cli/engine_tmp.py), or that folder itself."""
    engine = project / ".pulumi-state" / "tmp"
    return [
        *Path(env["TMPDIR"]).glob("kubeconfig*"),
        *(engine.iterdir() if engine.exists() else ()),
    ]


def run(
    args: list[str], project: Path, env: dict[str, str], timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=project, env=env, capture_output=True, text=True, check=False, timeout=timeout
    )


def user_project(target: Path, stack: str, passphrase: str) -> tuple[Path, dict[str, str]]:
    """A copy of the project with STACK's clusters on the kind tier, the tools' environment,
    and its own virtualenv installed as the README says."""
    manifest = require_kind_tier()
    project = copy_project(target)
    use_kind_tier(project / "stacks" / f"Pulumi.{stack}.yaml", manifest)
    env = tool_env(project, passphrase)
    venv = run(["bash", "-c", "python3 -m venv .venv && .venv/bin/pip install -q --no-compile "
                "-r requirements.txt && .venv/bin/pip install -q --no-deps -e ."],
               project, env, timeout=900)  # fmt: skip
    assert venv.returncode == 0, venv.stderr
    return project, env


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    result = subprocess.run(
        [str(toolchain.BIN_DIR / "kubectl"), "--kubeconfig", str(kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
    return result.stdout


def kubectl_json(kubeconfig: Path, *args: str) -> dict[str, Any]:
    return json.loads(kubectl(kubeconfig, *args, "-o", "json"))


def wait(check: Callable[[], Any], what: str, timeout: float = 600, every: float = 3) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(every)


def fleet_containers(prefix: str) -> list[str]:
    """Containers of kind clusters whose names start with `prefix` (kind names a node
    container <cluster>-control-plane, <cluster>-worker...)."""
    result = subprocess.run(
        ["docker", "ps", "-a", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return [n for n in result.stdout.split() if n.startswith(prefix)]


def kind_clusters() -> list[str]:
    result = subprocess.run(
        [str(toolchain.BIN_DIR / "kind"), "get", "clusters"],
        capture_output=True,
        text=True,
        check=False,
    )
    return result.stdout.split()


def remove_leftover_fleet(fleet: str, stack: str) -> list[str]:
    """Kind clusters `<fleet>-*` a test run of this project's stack `stack` left when it was
    killed before its own teardown (a clone's stack refuses to adopt them, rightly: they are
    another checkout's). Only clusters the project labelled for that stack, or whose node
    cannot be read (half made), are deleted; what was deleted is returned."""
    from components.model.spec import PROJECT
    from components.resources.clusters import node_owner, owner_label

    kind = str(toolchain.BIN_DIR / "kind")
    removed = []
    for name in kind_clusters():
        if name.startswith(f"{fleet}-") and node_owner(kind, name) in (
            None,
            owner_label(PROJECT, stack),
        ):
            subprocess.run([kind, "delete", "cluster", "--name", name], check=True, timeout=300)
            removed.append(name)
    return removed
