"""`python -m controller` run as a user runs it, with bad arguments: one line on stderr
naming what is wrong and the fix, a non-zero exit, never a traceback. And the ways it finds
the manager: --kubeconfig, then KUBECONFIG, then in-cluster, then ~/.kube/config."""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers.fleet_harness import NS, workload
from tests.helpers.kube_emulator import Emulator

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = "kueue.x-k8s.io/workloads"


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kubeconfig(server: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "m", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "m", "user": "u"}}],
        "current-context": "c",
    }


def environment(home: Path, **extra: str) -> dict[str, str]:
    """The caller's environment without any way to a cluster (no KUBECONFIG, not in a
    pod, an empty home), plus `extra`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")
    }
    return {**env, "HOME": str(home), "PYTHONPATH": str(ROOT), **extra}


def controller(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller", *args],
        cwd=ROOT,
        env=environment(home, **env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if "fix: " in line]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


def test_explain_against_a_closed_port_says_it_cannot_reach_the_manager(
    tmp_path: Path, home: Path
) -> None:
    port = closed_port()
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig(f"https://127.0.0.1:{port}")))
    line = one_line_error(controller(home, "--kubeconfig", str(path), "explain", "ns/wl"))
    assert line.startswith(f"cannot reach the manager at https://127.0.0.1:{port}: "), line
    assert f"found through --kubeconfig {path}" in line


def test_a_manager_that_never_answers_is_given_up_on(tmp_path: Path, home: Path) -> None:
    """A listener that accepts connections and says nothing (a firewall, a hung server):
    the bounded first request gives up instead of waiting for every watch to time out."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        path = tmp_path / "kubeconfig"
        path.write_text(yaml.safe_dump(kubeconfig(f"https://127.0.0.1:{port}")))
        result = controller(
            home, "--kubeconfig", str(path), "explain", "ns/wl", "--connect-timeout", "1"
        )
    line = one_line_error(result)
    assert line.startswith(f"cannot reach the manager at https://127.0.0.1:{port}: "), line
    assert "no answer within 1s" in line


def test_kubeconfig_in_the_environment_is_honoured(tmp_path: Path, home: Path) -> None:
    port = closed_port()
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig(f"https://127.0.0.1:{port}")))
    line = one_line_error(controller(home, "run", KUBECONFIG=str(path)))
    assert line.startswith(f"cannot reach the manager at https://127.0.0.1:{port}: "), line
    assert f"found through KUBECONFIG={path}" in line


def test_the_default_kubeconfig_is_the_last_resort(home: Path) -> None:
    port = closed_port()
    (home / ".kube").mkdir()
    (home / ".kube" / "config").write_text(yaml.safe_dump(kubeconfig(f"https://127.0.0.1:{port}")))
    line = one_line_error(controller(home, "explain", "ns/wl"))
    assert "found through ~/.kube/config" in line, line


def test_no_way_to_the_manager_says_what_was_tried(home: Path) -> None:
    line = one_line_error(controller(home, "explain", "ns/wl"))
    assert line.startswith("no way to reach the manager: tried --kubeconfig (not given), "), line
    assert "KUBECONFIG (not set)" in line and "in-cluster config" in line


TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


@pytest.mark.skipif(TOKEN.exists(), reason="this machine is a pod: it has a service account")
def test_in_cluster_without_a_service_account_token(home: Path) -> None:
    line = one_line_error(
        controller(home, "run", KUBERNETES_SERVICE_HOST="10.0.0.1", KUBERNETES_SERVICE_PORT="443")
    )
    assert line.startswith("in-cluster config: "), line


@pytest.mark.parametrize(
    ("text", "what"),
    [
        (None, "no such file"),
        ("clusters: [\n", "not valid YAML at line 2"),
        ("- a\n- b\n", "not a kubeconfig"),
        ("apiVersion: v1\nkind: Config\n", "current-context"),
    ],
)
def test_a_missing_or_garbled_kubeconfig_is_one_line(
    tmp_path: Path, home: Path, text: str | None, what: str
) -> None:
    path = tmp_path / "kubeconfig"
    if text is not None:
        path.write_text(text)
    line = one_line_error(controller(home, "--kubeconfig", str(path), "run"))
    assert line.startswith(f"kubeconfig {path} (from --kubeconfig): "), line
    assert what in line, line


@pytest.mark.parametrize("command", [["run"], ["explain", "default/job"]])
def test_a_kubeconfig_whose_ca_data_is_no_certificate_is_one_line(
    tmp_path: Path, home: Path, command: list[str]
) -> None:
    """It used to reach the first request and fail with an SSLError naming neither the
    file nor the cluster."""
    path = tmp_path / "kubeconfig"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "m",
        "contexts": [{"name": "m", "context": {"cluster": "m", "user": "m"}}],
        "clusters": [
            {
                "name": "m",
                "cluster": {
                    "server": "https://127.0.0.1:1",
                    "certificate-authority-data": base64.b64encode(b"not a cert").decode(),
                },
            }
        ],
        "users": [{"name": "m", "user": {"token": "t"}}],
    }
    path.write_text(yaml.safe_dump(config))
    result = controller(home, "--kubeconfig", str(path), *command)
    line = one_line_error(result)
    assert result.returncode != 0
    assert line.startswith(f"kubeconfig {path} (from --kubeconfig): the certificate authority")
    assert "certificate-authority-data" in line and "SSLError" not in line, line


def test_a_bad_settings_file_is_refused_before_anything_else(tmp_path: Path, home: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("resyncSeconds: 0\n")
    result = controller(home, "--config", str(path), "run")
    assert result.returncode == 2
    assert one_line_error(result).startswith(f"{path}: resyncSeconds: 0 is refused: ")


def test_a_workload_name_without_its_namespace(home: Path) -> None:
    result = controller(home, "explain", "just-a-name")
    assert result.returncode == 2
    assert "'just-a-name' is not <namespace>/<name>" in one_line_error(result)


@pytest.mark.parametrize("name", ["", "/", "ns/", "/wl", "NS/wl", "ns/wl/x", "ns/wl\n"])
def test_an_empty_or_malformed_workload_name_is_refused_before_connecting(
    home: Path, name: str
) -> None:
    """It used to reach the manager with an empty name and blame the manager's address."""
    result = controller(home, "explain", name)
    assert result.returncode == 2
    assert "is not <namespace>/<name> of a Workload" in one_line_error(result)


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "soon"])
def test_explain_timeouts_are_finite_seconds(home: Path, value: str) -> None:
    result = controller(home, "explain", "ns/wl", "--timeout", value)
    assert result.returncode == 2 and "number of seconds" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_debug_shows_the_traceback(home: Path) -> None:
    result = controller(home, "--debug", "explain", "ns/wl")
    assert result.returncode != 0 and "Traceback" in result.stderr


def test_explain_reads_the_manager_the_kubeconfig_names(tmp_path: Path, home: Path) -> None:
    """The whole path works: the kubeconfig found in the environment, the manager reached,
    the caches listed and the workload explained."""

    async def main() -> tuple[int, str, str]:
        manager = Emulator("manager")
        await manager.start()
        try:
            manager.put(WORKLOADS, workload("job", cpu="1"))
            path = tmp_path / "kubeconfig"
            path.write_text(yaml.safe_dump(manager.kubeconfig()))
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                *("-m", "controller", "explain", f"{NS}/job", "--timeout", "20"),
                cwd=ROOT,
                env=environment(home, KUBECONFIG=str(path)),
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await asyncio.wait_for(process.communicate(), 120)
            return process.returncode or 0, out.decode(), err.decode()
        finally:
            await manager.stop()

    code, out, err = asyncio.run(main())
    assert code == 0, err
    assert out.splitlines()[0].startswith("Dispatcher: none running"), out
    assert out.splitlines()[2].startswith(f"Workload {NS}/job"), out
