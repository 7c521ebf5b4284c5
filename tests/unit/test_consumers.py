"""Values right for the stack file but wrong for their consumer (components/checks/
kubeconfigs.py and the other rule modules): each refused by `validate`, with a must-accept
case beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from components.checks.kubeconfigs import (
    credential_command_problem,
    existing_worker_servers,
    kubeconfig_problems,
)
from controller.api import is_loopback_host, kueue_trusts_server, server_host
from tests.helpers.fleet_config import base, load, only, problems_of


def _errors(config: dict[str, Any], path: str) -> list[str]:
    return [p.message for p in problems_of(config) if p.path == path and p.severity == "error"]


def _kubeconfig(tmp_path: Path, server: str, context: str = "w1") -> str:
    path = tmp_path / f"{context}.kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": context, "context": {"cluster": "c", "user": "u"}}],
                "current-context": context,
            }
        )
    )
    return str(path)


def _existing_worker(config: dict[str, Any], **existing: Any) -> dict[str, Any]:
    config["workers"][0] = {**config["workers"][0], "provider": "existing", "existing": existing}
    return config


@pytest.mark.parametrize(
    ("server", "trusted"),
    [
        ("https://10.0.0.1:6443", True),
        ("https://[fd00::1]:6443", True),
        ("https://API.Example.com:6443", True),  # Kueue lower-cases the host first
        ("https://w1-control-plane:6443", True),
        ("https://[fd00::1]", False),  # brackets without a port: not an IP to Go
        ("https://my_cluster:6443", False),  # '_' is not in a DNS name
        ("https://a..b:6443", False),
        ("https://[fe80::1%25eth0]:6443", False),  # a zone: net.ParseIP refuses it
        ("https://user@w1:6443", True),  # url.Parse keeps the user out of u.Host
        (" https://w1:6443", False),  # url.Parse: no scheme after a space, so no host
        ("https://w1:6443 ", False),  # url.Parse: a port that is not digits
        ("https://w1:abc", False),
        ("https://w1\t:6443", False),  # a control character: url.Parse refuses the URL
    ],
)
def test_kueue_trusted_hosts_as_is_valid_hostname_decides(server: str, trusted: bool) -> None:
    assert kueue_trusts_server(server) is trusted


@pytest.mark.parametrize(
    ("server", "loopback"),
    [
        ("https://127.0.0.1:6443", True),
        ("https://127.1.2.3:6443", True),
        ("https://localhost:6443", True),
        ("https://[::1]:6443", True),
        ("https://0.0.0.0:6443", True),
        ("https://[::ffff:127.0.0.1]:6443", True),  # IPv4-mapped loopback
        ("https://localhost.:6443", True),  # the same name, fully qualified
        ("https://LOCALHOST:6443", True),
        ("https://10.0.0.1:6443", False),
        ("https://kind-w1-control-plane:6443", False),
    ],
)
def test_loopback_hosts(server: str, loopback: bool) -> None:
    assert is_loopback_host(server_host(server)) is loopback


def test_a_loopback_worker_server_is_refused_where_a_pod_would_use_it() -> None:
    config = _existing_worker(base(), context="w1", server="https://127.0.0.1:41234")
    (message,) = _errors(config, "workers[0].existing.server")
    assert "loopback address" in message and "Kueue (MultiKueue) and the dispatcher" in message


def test_a_loopback_server_from_the_kubeconfig_is_refused_too(tmp_path: Path) -> None:
    """What `kind get kubeconfig` writes: the server is the kubeconfig's own."""
    path = _kubeconfig(tmp_path, "https://127.0.0.1:39211")
    config = _existing_worker(base(), context="w1", kubeconfigPath=path)
    (message,) = _errors(config, "workers[0].existing.context")
    assert "https://127.0.0.1:39211 is a loopback address" in message


def test_a_loopback_server_is_fine_when_nothing_in_a_pod_uses_it(tmp_path: Path) -> None:
    """The loopback fleet: Kueue runs as a process on this machine, the dispatcher too."""
    path = _kubeconfig(tmp_path, "https://127.0.0.1:39211")
    config = _existing_worker(base(), context="w1", kubeconfigPath=path)
    config["kueue"]["install"] = "existing"
    config["dispatcher"] = {"run": "local"}
    assert _errors(config, "workers[0].existing.context") == []
    # And a routable server the manager's pods reach is fine with pods.
    config = _existing_worker(base(), context="w1", server="https://w1.k8s.internal:6443")
    assert _errors(config, "workers[0].existing.server") == []


def test_an_untrusted_server_host_is_refused(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path, "https://lab_a.internal:6443")
    config = _existing_worker(base(), context="w1", kubeconfigPath=path)
    (message,) = _errors(config, "workers[0].existing.context")
    assert "untrusted server endpoint" in message
    path = _kubeconfig(tmp_path, "https://lab-a.internal:6443")
    config = _existing_worker(base(), context="w1", kubeconfigPath=path)
    assert _errors(config, "workers[0].existing.context") == []


def test_a_context_the_kubeconfig_lacks_is_refused_by_validate(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path, "https://10.1.2.3:6443", context="w1")
    config = _existing_worker(base(), context="w2", kubeconfigPath=path)
    problem = only(problems_of(config), "workers[0].existing.context")
    assert "has no context 'w2' (it has: w1)" in problem.message
    config = _existing_worker(base(), context="w1", kubeconfigPath=path)
    assert _errors(config, "workers[0].existing.context") == []
    # A file whose contexts list holds no usable entry.
    (tmp_path / "empty-contexts").write_text("contexts:\n- \nclusters:\n")
    config = _existing_worker(base(), context="w1", kubeconfigPath=str(tmp_path / "empty-contexts"))
    assert (
        "has no context 'w1' (it has: none)"
        in only(problems_of(config), "workers[0].existing.context").message
    )
    # A file that is not there yet is up's to report (the loopback launcher writes it).
    config = _existing_worker(base(), context="w1", kubeconfigPath=str(tmp_path / "later"))
    assert _errors(config, "workers[0].existing.context") == []


def test_a_worker_kubeconfig_at_a_loopback_address_is_refused() -> None:
    text = yaml.safe_dump(
        {
            "apiVersion": "v1",
            "clusters": [
                {
                    "name": "c",
                    "cluster": {
                        "server": "https://localhost:6443",
                        "certificate-authority-data": "eA==",
                    },
                }
            ],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "w", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "w",
        }
    )
    config = base()
    config["workerKubeconfigs"] = {"worker1": text}
    secret = frozenset({"workerKubeconfigs"})
    (message,) = [p.message for p in problems_of(config, secret_keys=secret)]
    assert "its server https://localhost:6443 is a loopback address" in message
    config["workerKubeconfigs"] = {"worker1": text.replace("localhost", "10.0.0.9")}
    assert problems_of(config, secret_keys=secret) == []


def test_a_framework_listed_twice_is_refused() -> None:
    config = base()
    config["frameworks"] = ["batch", "jobset", "leaderworkerset", "jobset"]
    assert (
        "'jobset' is listed twice (also at frameworks[1])"
        in only(problems_of(config), "frameworks[3]").message
    )
    config["workers"][1]["frameworks"] = ["jobset", "leaderworkerset", "leaderworkerset"]
    assert _errors(config, "workers[1].frameworks[2]")
    assert _errors(base(), "frameworks[1]") == []


@pytest.mark.parametrize(
    ("framework", "namespace"),
    [("jobset", "jobset-system"), ("training-operator", "kubeflow"), ("mpi", "mpi-operator")],
)
def test_a_local_queue_in_a_namespace_a_framework_creates_is_refused(
    framework: str, namespace: str
) -> None:
    config = base()
    config["frameworks"] = sorted({*config["frameworks"], framework})
    config["queues"]["localQueues"] = [{"name": "lq", "namespace": namespace, "clusterQueue": "cq"}]
    (message,) = _errors(config, "queues.localQueues[0].namespace")
    assert f"namespace '{namespace}' is created by the '{framework}' framework" in message


def test_a_framework_namespace_is_free_when_that_framework_is_not_installed() -> None:
    config = base()
    config["queues"]["localQueues"] = [
        {"name": "lq", "namespace": "kubeflow", "clusterQueue": "cq"}
    ]
    assert _errors(config, "queues.localQueues[0].namespace") == []


def test_a_worker_lost_timeout_the_dispatcher_refuses_is_refused() -> None:
    config = base()
    config["kueue"]["multiKueue"] = {"workerLostTimeout": "25h"}
    (message,) = _errors(config, "kueue.multiKueue.workerLostTimeout")
    assert "the dispatcher would not start" in message
    config["kueue"]["multiKueue"] = {"workerLostTimeout": "24h"}
    assert _errors(config, "kueue.multiKueue.workerLostTimeout") == []
    config["kueue"]["multiKueue"] = {"workerLostTimeout": "25h"}
    config["dispatcher"] = {"enabled": False}  # then only Kueue reads it
    assert _errors(config, "kueue.multiKueue.workerLostTimeout") == []


def test_the_default_kubeconfig_is_read_by_up_not_by_validate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without kubeconfigPath the file is KUBECONFIG's: the reviewing machine's for
    `validate`, so only `mkf up`'s pre-flight (this_machine) judges its server."""
    monkeypatch.setenv("KUBECONFIG", _kubeconfig(tmp_path, "https://127.0.0.1:39211"))
    spec, problems = load(_existing_worker(base(), context="w1"))
    assert not [p for p in problems if p.path.startswith("workers[0]")]
    assert list(existing_worker_servers(spec)) == []
    (problem,) = existing_worker_servers(spec, this_machine=True)
    assert problem.path == "workers[0].existing.context"
    assert "https://127.0.0.1:39211 is a loopback address" in problem.message


def test_an_exec_credential_plugin_missing_here_is_named_by_ups_preflight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An existing cluster whose kubeconfig runs kubelogin (or gke-gcloud-auth-plugin, or
    aws) on a machine without it: every call of `up` would fail on it."""
    path = Path(_kubeconfig(tmp_path, "https://10.1.2.3:6443"))
    doc = yaml.safe_load(path.read_text())
    doc["users"][0]["user"] = {
        "exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "kubelogin"}
    }
    path.write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("KUBECONFIG", str(path))
    spec, _ = load(_existing_worker(base(), context="w1"))
    (worker,) = [c for c in spec.clusters if c.existing is not None]
    problem = credential_command_problem(worker, which=lambda _cmd: None)
    assert problem is not None and problem.path == "workers[0].existing.context"
    assert "by running 'kubelogin'" in problem.message and "install 'kubelogin'" in problem.hint
    assert credential_command_problem(worker, which=lambda cmd: f"/usr/bin/{cmd}") is None
    # A token user runs nothing.
    monkeypatch.setenv("KUBECONFIG", _kubeconfig(tmp_path, "https://10.1.2.3:6443", "w9"))
    spec, _ = load(_existing_worker(base(), context="w9"))
    (worker,) = [c for c in spec.clusters if c.existing is not None]
    assert credential_command_problem(worker, which=lambda _cmd: None) is None


def _with(tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any] | None = None) -> str:
    """A kubeconfig whose context w1 has this cluster body and user body."""
    path = Path(_kubeconfig(tmp_path, "https://10.1.2.3:6443"))
    config = yaml.safe_load(path.read_text())
    config["clusters"][0]["cluster"] = cluster
    if user is not None:
        config["users"][0]["user"] = user
    path.write_text(yaml.safe_dump(config))
    return str(path)


SERVER = {"server": "https://10.1.2.3:6443"}
EXEC_V1 = "client.authentication.k8s.io/v1"
EXEC_V1BETA1 = "client.authentication.k8s.io/v1beta1"


@pytest.mark.parametrize(
    ("cluster", "user", "says"),
    [
        ({}, None, "cluster 'c' has no server"),
        ({**SERVER, "proxy-url": "ftp://proxy:21"}, None, "whose scheme client-go refuses"),
        (
            {**SERVER, "certificate-authority": "/nowhere/ca.crt"},
            None,
            "reads its CA from /nowhere/ca.crt, which cannot be read",
        ),
        (
            {**SERVER, "insecure-skip-tls-verify": True, "certificate-authority-data": "Q0E="},
            None,
            "sets insecure-skip-tls-verify beside a CA",
        ),
        (
            {**SERVER, "certificate-authority": "ca.crt", "certificate-authority-data": "Q0E="},
            None,
            "has both certificate-authority and certificate-authority-data",
        ),
        (SERVER, {"token": "t", "username": "u", "password": "p"}, "more than one authentication"),
        (SERVER, {"client-certificate-data": "Q0U="}, "has a client certificate and no key"),
        (SERVER, {"exec": {"command": "kubelogin"}}, "exec plugin without apiVersion"),
        (
            {**SERVER, "proxy-url": "http://[::1"},
            None,
            "has proxy-url 'http://[::1', which does not parse as a URL",
        ),
        ({**SERVER, "proxy-url": "http://proxy:abc"}, None, "which does not parse as a URL"),
        (SERVER, {"exec": {"apiVersion": EXEC_V1BETA1}}, "exec plugin without command"),
        (
            SERVER,
            {"exec": {"command": "kubelogin", "apiVersion": EXEC_V1}},
            f"exec plugin of apiVersion {EXEC_V1} without interactiveMode",
        ),
        (
            SERVER,
            {"exec": {"command": "kubelogin", "apiVersion": EXEC_V1, "interactiveMode": "Maybe"}},
            "interactiveMode 'Maybe', which client-go refuses",
        ),
        (
            {**SERVER, "certificate-authority-data": "-----BEGIN CERTIFICATE-----\nMIIB\n"},
            None,
            "has certificate-authority-data that is not base64",
        ),
        (
            SERVER,
            {"client-certificate-data": "Q0U", "client-key-data": "S0VZ"},  # no padding
            "has client-certificate-data that is not base64",
        ),
    ],
)
def test_a_kubeconfig_client_go_would_refuse_is_refused_by_validate(
    tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any] | None, says: str
) -> None:
    """client-go v0.36.4 tools/clientcmd/validation.go and transport/transport.go."""
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    config = _existing_worker(base(), context="w1", kubeconfigPath=_with(tmp_path, cluster, user))
    problem = only(problems_of(config), "workers[0].existing.kubeconfigPath")
    assert problem.severity == "error" and says in problem.message, problem.message


@pytest.mark.parametrize(
    ("cluster", "user"),
    [
        # A CA file beside the kubeconfig, named relatively as client-go resolves it.
        ({**SERVER, "certificate-authority": "ca.crt", "proxy-url": "socks5://p:1080"}, None),
        # Base64 broken over lines: Go's StdEncoding ignores the line breaks.
        ({**SERVER, "certificate-authority-data": "Q0Ex\nQ0Ey\n"}, None),
        # v1beta1 plugins get interactiveMode IfAvailable by default (api/v1/defaults.go).
        (SERVER, {"exec": {"command": "kubelogin", "apiVersion": EXEC_V1BETA1}}),
        (
            SERVER,
            {"exec": {"command": "kubelogin", "apiVersion": EXEC_V1, "interactiveMode": "Never"}},
        ),
    ],
)
def test_a_kubeconfig_client_go_takes_is_taken(
    tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any] | None
) -> None:
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    config = _existing_worker(base(), context="w1", kubeconfigPath=_with(tmp_path, cluster, user))
    assert _errors(config, "workers[0].existing.kubeconfigPath") == []


def test_a_folder_given_as_the_kubeconfig_is_refused(tmp_path: Path) -> None:
    config = _existing_worker(base(), context="w1", kubeconfigPath=str(tmp_path))
    problem = only(problems_of(config), "workers[0].existing.kubeconfigPath")
    assert "it is a directory, not a kubeconfig file" in problem.message


def test_the_default_kubeconfig_is_checked_by_ups_preflight_not_by_validate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = {**SERVER, "certificate-authority": "missing-ca.crt"}
    monkeypatch.setenv("KUBECONFIG", _with(tmp_path, cluster))
    spec, problems = load(_existing_worker(base(), context="w1"))
    assert not [p for p in problems if p.path.startswith("workers[0]")]
    (worker,) = [c for c in spec.clusters if c.existing is not None]
    (problem,) = kubeconfig_problems(worker)
    assert problem.path == "workers[0].existing" and "missing-ca.crt" in problem.message
