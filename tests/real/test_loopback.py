"""The loopback launcher's own parts, without the real binaries: what it changes in Kueue's
Configuration (only what a process outside a pod needs), the egress proxy, `down` stopping
exactly what was recorded, and its command-line errors."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from components.model.frameworks import FRAMEWORKS
from components.model.versions import PINNED_SHA256, kueue_bundle
from components.objects.kueue_install import kueue_objects
from components.upstream import toolchain
from loopback import egress, fleet, processes
from loopback.controlplane import ControlPlane
from loopback.kueue import CONTAINER_PORTS, process_args, process_config, split_install
from loopback.operators import OPERATORS, OperatorProcess, install_manifest
from loopback.processes import free_port, is_ours, start, stop_all
from tests.helpers.real_fleet import go_missing, spec_of
from tests.helpers.upstream_data import real_kueue_manifest, why_missing

ROOT = Path(__file__).resolve().parents[2]


def _rendered(stack: str = "dev") -> tuple[dict, list[str]]:
    text = real_kueue_manifest()
    if text is None:
        pytest.skip(why_missing())
    spec = spec_of(stack)
    config, args, rest = split_install(kueue_objects(text, spec, spec.manager))
    assert not [o for o in rest if o["kind"] == "Deployment"]
    return config, args


def test_only_the_fields_a_process_needs_change(tmp_path: Path) -> None:
    rendered, args = _rendered()
    ports = {name: 40000 + i for i, name in enumerate(CONTAINER_PORTS)}
    config, changes = process_config(rendered, ports, tmp_path / "certs")
    changed = {line.split(":")[0] for line in changes}
    assert changed == {
        "webhook.port",
        "webhook.host",
        "webhook.certDir",
        "metrics.bindAddress",
        "health.healthProbeBindAddress",
        "visibilityServer.bindAddress",
        "visibilityServer.bindPort",
        "leaderElection.resourceNamespace",
    }
    # Every other field exactly as rendered: the gates, integrations, MultiKueue settings.
    for key in rendered:
        if key not in ("webhook", "metrics", "health", "leaderElection"):
            assert config[key] == rendered[key], key
    assert (
        config["metrics"]["enableClusterQueueResources"]
        == rendered["metrics"]["enableClusterQueueResources"]
    )
    assert config["leaderElection"]["leaderElect"] is True
    assert config["internalCertManagement"] == rendered["internalCertManagement"]
    assert rendered["webhook"]["port"] == 9443  # the rendered one is left untouched
    out = process_args(args, tmp_path / "c.yaml", tmp_path / "k")
    assert f"--config={tmp_path / 'c.yaml'}" in out and out[-1] == f"--kubeconfig={tmp_path / 'k'}"
    assert [a for a in out if a.startswith("--feature-gates")] == [
        a for a in args if a.startswith("--feature-gates")
    ]


def test_the_egress_proxy_joins_a_cluster_ip_to_its_local_port(tmp_path: Path) -> None:
    async def scenario() -> tuple[bytes, bytes]:
        async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(b"echo:" + await reader.read(100))
            await writer.drain()
            writer.close()

        backend = await asyncio.start_server(echo, "127.0.0.1", 0)
        port = backend.sockets[0].getsockname()[1]
        routes = tmp_path / "routes.json"
        routes.write_text(json.dumps({"10.96.0.10:443": port}))
        sock = tmp_path / "egress.sock"
        proxy = asyncio.create_task(egress.serve(routes, sock))
        for _ in range(50):
            if sock.exists():
                break
            await asyncio.sleep(0.05)
        reader, writer = await asyncio.open_unix_connection(str(sock))
        writer.write(b"CONNECT 10.96.0.10:443 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        status = await reader.readuntil(b"\r\n\r\n")
        writer.write(b"hello")
        await writer.drain()
        body = await reader.read(100)
        # An address with no route is refused, not sent anywhere.
        r2, w2 = await asyncio.open_unix_connection(str(sock))
        w2.write(b"CONNECT 10.96.0.99:443 HTTP/1.1\r\n\r\n")
        refused = await r2.read(100)
        proxy.cancel()
        backend.close()
        assert refused.startswith(b"HTTP/1.1 502")
        return status, body

    status, body = asyncio.run(scenario())
    assert status.startswith(b"HTTP/1.1 200") and body == b"echo:hello"


def test_listening_ports_never_come_from_the_range_of_outgoing_connections(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A port the kernel's ephemeral range gave out can be taken by a client connection before
    the component binds it (a CI run lost Kueue that way); ports are drawn below that range,
    never the same twice in one launcher, never one something is bound to."""
    ephemeral = processes.ephemeral_range()
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    assert all(processes.LOWEST_PORT <= p < ephemeral.start for p in ports)

    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        busy = taken.getsockname()[1]
        # The first draw is a bound port, the second one handed out already, the third free.
        again = ports[0]
        fresh = next(p for p in range(processes.LOWEST_PORT, ephemeral.start) if p not in ports)
        draws = iter([busy, again, fresh])
        monkeypatch.setattr(processes.random, "choice", lambda _candidates: next(draws))
        assert free_port() == fresh

    # With no room below the ephemeral range, the kernel's choice as before.
    narrow = tmp_path / "range"
    narrow.write_text("10100 60999\n")
    read = processes.ephemeral_range
    monkeypatch.setattr(processes, "ephemeral_range", lambda: read(narrow))
    assert free_port() >= 10100


def test_down_stops_what_was_recorded_and_nothing_else(tmp_path: Path) -> None:
    ours = start("t/sleep", ["/bin/sleep", "60"], tmp_path / "a.log")
    other = subprocess.Popen(["/bin/sleep", "60"])
    try:
        # A record whose pid now runs another program (a reused pid) is left alone.
        stranger = {"name": "t/x", "pid": other.pid, "argv0": "/usr/bin/not-sleep", "log": ""}
        state = tmp_path / "state"
        state.mkdir()
        (state / fleet.MARK).touch()  # as `up` marks it: down removes only a folder so marked
        (state / fleet.RECORD).write_text(
            json.dumps({"stack": "t", "clusters": {}, "processes": [ours.as_dict(), stranger]})
        )
        for _ in range(50):
            if is_ours(ours.as_dict()):
                break
            time.sleep(0.05)
        assert fleet.down(state, log=lambda _line: None)
        assert ours.process is not None and ours.process.wait(10) is not None
        assert other.poll() is None  # not ours: still running
        assert not state.exists()
        assert fleet.down(state, log=lambda _line: None) is False  # twice is fine
    finally:
        other.kill()
        stop_all([ours.as_dict()])


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopback", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=60,
        check=False,
    )


def test_a_second_up_in_the_same_state_is_refused(tmp_path: Path) -> None:
    (tmp_path / fleet.RECORD).write_text(json.dumps({"clusters": {}, "processes": []}))
    result = _cli("up", "--stack", "dev", "--state", str(tmp_path))
    assert result.returncode == 2 and "already up" in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    result = _cli("up", "--stack", "no-such-stack", "--state", str(tmp_path / "s"))
    assert result.returncode == 2 and "no such stack file" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "s").exists()
    result = _cli("kubeconfig", "manager", "--state", str(tmp_path / "none"))
    assert result.returncode == 2 and "run up first" in result.stderr
    result = _cli("down", "--state", str(tmp_path / "none"))
    assert result.returncode == 0 and "nothing to stop" in result.stderr


def test_without_go_the_build_says_what_to_install(tmp_path: Path) -> None:
    result = _cli("build", env={"PATH": str(tmp_path)})
    assert result.returncode == 2
    assert "go is not on PATH" in result.stderr and "install Go" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_toolchain_pins_what_kueue_is_tested_with() -> None:
    versions = toolchain.module_versions()
    assert versions["sigs.k8s.io/kueue"] == "v0.19.2"
    # hack/make/test.mk at v0.19.2: E2E_K8S_VERSION ?= 1.36
    assert versions["k8s.io/kubernetes"].startswith("v1.36.")
    minor = versions["k8s.io/kubernetes"].split(".")[1]
    assert versions["k8s.io/api"] == f"v0.{minor}.{versions['k8s.io/kubernetes'].split('.')[2]}"
    assert kueue_bundle("v0.19.2").url in PINNED_SHA256


def test_each_framework_controller_is_built_at_the_version_the_project_installs() -> None:
    versions = toolchain.module_versions()
    assert set(toolchain.FRAMEWORK_CONTROLLERS) == {o.tool for o in OPERATORS.values()}
    for key, operator in OPERATORS.items():
        tool = toolchain.TOOLS[operator.tool]
        go_mod = (tool.module_dir / "go.mod").read_text()
        assert tool.package in go_mod[go_mod.index("tool (") :].split(")")[0].split()
        assert tool.module == operator.module
        assert versions[tool.module] == FRAMEWORKS[key].bundles[0].version == operator.version


def test_a_framework_controller_runs_with_only_the_fields_a_process_needs_changed(
    tmp_path: Path,
) -> None:
    if why := go_missing():
        pytest.skip(why)
    operator = OPERATORS["leaderworkerset"]
    process = OperatorProcess(ControlPlane("t", tmp_path, {}), operator, install_manifest(operator))
    assert {line.split(":")[0] for line in process.changes} == {
        "webhook.port",
        "webhook.host",
        "webhook.certDir",
        "metrics.bindAddress",
        "health.healthProbeBindAddress",
        "leaderElection.resourceNamespace",
    }
    assert process.config["internalCertManagement"] == process.rendered["internalCertManagement"]
    assert process.config["leaderElection"]["leaderElect"] is True
    assert process.config["leaderElection"]["resourceNamespace"] == operator.namespace
    # Everything of its install is applied as it is, but the Deployment that runs it here.
    assert {o["kind"] for o in process.install} >= {
        "CustomResourceDefinition",
        "ClusterRole",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "Service",
    }
    assert not [o for o in process.install if o["kind"] == "Deployment"]
    assert process.service_account == "lws-controller-manager"
