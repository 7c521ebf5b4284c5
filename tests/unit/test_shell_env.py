"""`mkf env`: a fresh shell gets what the fleet's tools need (tests/kind/test_kind_tier.py
runs what up.sh prints through it against a real fleet)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.helpers.stack_texts import ROOT

MKF = Path(sys.executable).parent / "mkf"


def _kubeconfig(context: str, server: str, user: str | None = None) -> str:
    user = user or context
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": context, "cluster": {"server": server}}],
        "users": [{"name": user, "user": {"token": f"t-{context}"}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": user}}],
    })  # fmt: skip


def _project(tmp_path: Path, stack: str = "dev", users: tuple[str, str] | None = None) -> Path:
    """A clone with a fleet that scripts/up.sh wrote: .fleet/summary.json, the kubeconfigs
    (worker first in the summary, as nothing promises the manager comes first), the tools."""
    project = tmp_path / "clone"
    (project / ".fleet" / "kubeconfigs").mkdir(parents=True)
    (project / ".tools" / "bin").mkdir(parents=True)
    shutil.copy(ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    names = ("worker1", "manager")
    for name, user in zip(names, users or (None, None), strict=True):
        path = project / ".fleet" / "kubeconfigs" / f"{name}.yaml"
        path.write_text(_kubeconfig(f"kind-{stack}-{name}", f"https://127.0.0.1:{len(name)}", user))
    clusters = [
        {"name": n, "role": "manager" if n == "manager" else "worker",
         "kubeconfig": f"kubeconfigs/{n}.yaml"}
        for n in names
    ]  # fmt: skip
    (project / ".fleet" / "summary.json").write_text(
        json.dumps({"stack": stack, "fleet": stack, "clusters": clusters})
    )
    return project


def _fresh_shell(cwd: Path, script: str) -> subprocess.CompletedProcess[str]:
    """bash with none of the fleet's settings, as a new terminal has it."""
    fleet_settings = ("KUBECONFIG", "PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE")
    env = {k: v for k, v in os.environ.items() if k not in (*fleet_settings, "MKF_TOOLS_DIR")}
    env["PATH"] = f"{MKF.parent}:/usr/bin:/bin"
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True)


def test_eval_sets_kubeconfig_backend_tools_and_the_dev_passphrase(tmp_path: Path) -> None:
    project = _project(tmp_path)
    shown = _fresh_shell(
        project / ".fleet",  # from a subfolder: the project is found upward
        'eval "$(mkf env dev)" && echo "$KUBECONFIG" && echo "$PULUMI_BACKEND_URL" '
        '&& echo "$PULUMI_CONFIG_PASSPHRASE" && command -v mkf && echo "$PATH"',
    )
    assert shown.returncode == 0, shown.stderr
    kubeconfig, backend, passphrase, _mkf, path = shown.stdout.splitlines()
    fleet = project / ".fleet" / "kubeconfigs"
    # The manager's first: a KUBECONFIG list's first current-context is the one used.
    assert kubeconfig == f"{fleet / 'manager.yaml'}:{fleet / 'worker1.yaml'}"
    assert backend == f"file://{project / '.pulumi-state'}"
    assert passphrase == "multikueue-fleet-dev"
    assert path.startswith(f"{project / '.tools' / 'bin'}:")


def test_the_tools_folder_is_the_one_up_sh_used(tmp_path: Path) -> None:
    """A user who keeps the pinned tools in one folder for several clones (MKF_TOOLS_DIR, as
    up.sh and `mkf up` take it) gets that folder on PATH, not the clone's empty one."""
    project = _project(tmp_path)
    shared = tmp_path / "shared-tools"
    shared.mkdir()
    shown = _fresh_shell(
        project, f'export MKF_TOOLS_DIR={shared}; eval "$(mkf env dev)" && echo "$PATH"'
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"{shared}:"), shown.stdout
    assert str(project / ".tools") not in shown.stdout


def test_another_stack_names_the_passphrase_variable_and_sets_none(tmp_path: Path) -> None:
    project = _project(tmp_path, stack="mine")
    result = subprocess.run([MKF, "env"], cwd=project, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "PULUMI_CONFIG_PASSPHRASE=" not in result.stdout
    assert "# stack 'mine': set PULUMI_CONFIG_PASSPHRASE" in result.stdout


def test_the_wrong_stack_or_no_fleet_is_one_line_with_the_fix(tmp_path: Path) -> None:
    project = _project(tmp_path, stack="mine")
    wrong = subprocess.run([MKF, "env", "dev"], cwd=project, capture_output=True, text=True)
    assert wrong.returncode == 2 and wrong.stdout == ""
    assert "holds the fleet of stack 'mine', not 'dev'" in wrong.stderr
    assert "scripts/up.sh dev" in wrong.stderr and len(wrong.stderr.splitlines()) == 1
    shutil.rmtree(project / ".fleet")
    none = subprocess.run([MKF, "env", "dev"], cwd=project, capture_output=True, text=True)
    assert none.returncode == 2 and "bring one up with scripts/up.sh" in none.stderr


def test_a_name_two_kubeconfigs_use_differently_is_refused(tmp_path: Path) -> None:
    """KUBECONFIG lists merge first-wins by name: a shared user `admin` with two tokens
    would give the worker's context the manager's token."""
    project = _project(tmp_path, users=("admin", "admin"))
    result = subprocess.run([MKF, "env", "dev"], cwd=project, capture_output=True, text=True)
    assert result.returncode == 2
    assert "both name a user 'admin' differently" in result.stderr


def test_explain_asks_the_manager_of_the_fleet_up_wrote(tmp_path: Path) -> None:
    project = _project(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env["HOME"] = str(tmp_path)  # no ~/.kube/config
    result = subprocess.run(
        [MKF, "controller", "explain", "default/job-1", "--connect-timeout", "1"],
        cwd=project, env=env, capture_output=True, text=True,
    )  # fmt: skip
    manager = project / ".fleet" / "kubeconfigs" / "manager.yaml"
    assert f"note: asking the manager of the fleet up wrote ({manager})" in result.stderr
    assert f"--kubeconfig {manager}" in result.stderr  # where it says it could not reach
    assert result.returncode != 0


def test_the_controller_takes_a_kubeconfig_lists_first_current_context(tmp_path: Path) -> None:
    """As kubectl does (client-go's first file wins); kubernetes_asyncio alone takes the
    last file's, which sent `mkf env`'s list (manager first) to the last worker."""
    import asyncio

    from controller import cli

    manager, worker = tmp_path / "manager.yaml", tmp_path / "worker.yaml"
    manager.write_text(_kubeconfig("kind-dev-manager", "https://127.0.0.1:1111"))
    worker.write_text(_kubeconfig("kind-dev-worker1", "https://127.0.0.1:2222"))

    async def host(paths: str) -> str:
        kube = await cli._from_kubeconfig(paths, "KUBECONFIG")
        try:
            return kube.api.configuration.host
        finally:
            await kube.close()

    assert asyncio.run(host(f"{manager}{os.pathsep}{worker}")) == "https://127.0.0.1:1111"
    assert asyncio.run(host(f"{tmp_path / 'gone.yaml'}{os.pathsep}{worker}")).endswith(":2222")
