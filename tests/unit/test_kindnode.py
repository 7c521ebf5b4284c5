"""The kind tier's pure parts: host findings read from fake /proc and /sys files, the mirror's
repository paths, the kind config's mirror and cgroup v1 settings, the from-host context."""

from __future__ import annotations

import datetime
import os
import shutil
from pathlib import Path

import pytest
import yaml

from components.checks.load import load_checked
from components.model.problems import FleetConfigError
from components.model.spec import FleetSpec
from components.objects.kind_config import (
    CGROUP_V1_KUBELET_PATCH,
    CONTAINERD_MIRRORS_PATCH,
    hosts_toml,
    kind_config,
    mirror_props,
)
from components.objects.kubeconfig import FROM_HOST_CONTEXT, with_host_context, worker_kubeconfig
from controller.kube import host_context
from kindnode import host, registry


def _status(tmp_path: Path, capbnd: str) -> Path:
    path = tmp_path / "status"
    path.write_text(f"Name:\tx\nCapBnd:\t{capbnd}\n")
    return path


def test_cap_sys_resource_is_read_from_the_bounding_set(tmp_path: Path) -> None:
    assert host.lacks_sys_resource(_status(tmp_path, "000001fffeffffff"))  # bit 24 clear
    assert not host.lacks_sys_resource(_status(tmp_path, "000001ffffffffff"))


def test_unmounted_cgroup_v1_controllers_are_found(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "cgroup.procs").write_text("")
    (root / "perf_event").mkdir()
    (root / "perf_event" / "cgroup.procs").write_text("")
    proc = tmp_path / "cgroups"
    proc.write_text(
        "#subsys_name\thierarchy\tnum_cgroups\tenabled\n"
        "memory\t4\t1\t1\nhugetlb\t0\t1\t1\nperf_event\t9\t1\t1\n"
        "net_cls\t0\t1\t1\nnet_prio\t0\t1\t1\n"
    )
    assert host.missing_cgroup_controllers(root, proc) == ["hugetlb", "net_cls,net_prio"]
    # A controller the kernel does not enable is not asked for.
    proc.write_text("#subsys_name\thierarchy\tnum_cgroups\tenabled\nhugetlb\t0\t1\t0\n")
    assert host.missing_cgroup_controllers(root, proc) == []
    # cgroup v2 (the unified hierarchy at the root): nothing to mount.
    (root / "cgroup.controllers").write_text("cpu memory")
    assert host.missing_cgroup_controllers(root, proc) == []


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("registry.k8s.io/kueue/kueue:v0.19.2", "kueue/kueue:v0.19.2"),
        ("registry.k8s.io/pause:3.10", "pause:3.10"),
        ("busybox:1.36", "library/busybox:1.36"),
        ("kindest/node:v1.36.4", "kindest/node:v1.36.4"),
        ("localhost:5001/team/app:1", "team/app:1"),
    ],
)
def test_mirror_paths_are_what_containerd_asks_a_mirror_for(name: str, path: str) -> None:
    assert registry.repository(name) == path


def _spec(**kind: object) -> FleetSpec:
    return FleetSpec.model_validate(
        {
            "fleetName": "t",
            "manager": {"provider": "kind", "kind": {"workerNodes": 0, **kind}},
            "workers": [{"name": "worker1", "kind": {"workerNodes": 0, **kind}}],
        }
    )


def test_registry_mirrors_set_containerds_config_path() -> None:
    spec = _spec(
        nodeImage="127.0.0.1:5001/kindest/node:v1.36.4@sha256:" + "a" * 64,
        registryMirrors={"registry.k8s.io": "http://mkf-registry:5000"},
    )
    config = kind_config(spec, spec.manager)
    assert config["containerdConfigPatches"] == [CONTAINERD_MIRRORS_PATCH]
    assert 'config_path = "/etc/containerd/certs.d"' in CONTAINERD_MIRRORS_PATCH
    # Without mirrors too: mirrors added later are hosts.toml files, not a new cluster.
    plain = _spec()
    assert kind_config(plain, plain.manager)["containerdConfigPatches"] == [
        CONTAINERD_MIRRORS_PATCH
    ]


def _pem() -> str:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "mirror-ca")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    return cert.public_bytes(serialization.Encoding.PEM).decode()


PEM = _pem()


def test_mirror_options_go_into_hosts_toml_as_containerd_reads_them() -> None:
    """A mirror with options: its CA file on the node named by `ca`, `skip_verify`,
    `override_path` (containerd v2.3.4 docs/hosts.md); a plain URL stays a plain URL in the
    provider's data, so a stack without options sees no change."""
    spec = _spec(
        registryMirrors={
            "registry.k8s.io": "http://mkf-registry:5000",
            "docker.io": {"url": "https://mirror.example/v2/hub", "ca": PEM, "overridePath": True},
            "quay.io": {"url": "https://quay-mirror.example", "skipVerify": True},
        }
    )
    props = mirror_props(spec.manager.kind.registry_mirrors)  # type: ignore[union-attr]
    assert props["registry.k8s.io"] == "http://mkf-registry:5000"
    assert props["docker.io"] == {
        "url": "https://mirror.example/v2/hub", "ca": PEM.strip() + "\n", "overridePath": True
    }  # fmt: skip
    assert hosts_toml("docker.io", props["docker.io"]) == (
        'server = "https://registry-1.docker.io"\n\n'
        '[host."https://mirror.example/v2/hub"]\n'
        '  capabilities = ["pull", "resolve"]\n'
        '  ca = "/etc/containerd/certs.d/docker.io/mirror-ca.crt"\n'
        "  override_path = true\n"
    )
    assert "  skip_verify = true\n" in hosts_toml("quay.io", props["quay.io"])
    assert hosts_toml("registry.k8s.io", props["registry.k8s.io"]) == hosts_toml(
        "registry.k8s.io", "http://mkf-registry:5000"
    )


def test_hosts_toml_tries_the_mirror_then_the_registry() -> None:
    text = hosts_toml("registry.k8s.io", "http://mkf-registry:5000")
    assert text.startswith('server = "https://registry.k8s.io"')
    assert '[host."http://mkf-registry:5000"]' in text
    assert 'server = "https://registry-1.docker.io"' in hosts_toml("docker.io", "http://m:5000")


def test_a_cgroup_v1_host_gets_failcgroupv1_false_from_kubernetes_1_35() -> None:
    spec = _spec()
    assert kind_config(spec, spec.manager, cgroup_v1=True)["kubeadmConfigPatches"] == [
        CGROUP_V1_KUBELET_PATCH
    ]
    assert yaml.safe_load(CGROUP_V1_KUBELET_PATCH) == {
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,
    }
    assert "kubeadmConfigPatches" not in kind_config(spec, spec.manager, cgroup_v1=False)
    old = FleetSpec.model_validate(
        {"fleetName": "t", "manager": {"provider": "kind"}}
        | {"workers": [{"name": "w", "kubernetesVersion": "1.34"}]}
    )
    assert "kubeadmConfigPatches" not in kind_config(old, old.workers[0], cgroup_v1=True)


@pytest.mark.parametrize(
    ("mirrors", "message"),
    [
        ({"registry.k8s.io/kueue": "http://m:5000"}, "is not a registry host"),
        ({"registry.k8s.io": "mkf-registry:5000"}, "is not a registry mirror URL"),
        ({"registry.k8s.io": "ftp://m"}, "is not a registry mirror URL"),
        # The options containerd gives a host, where it would take them and not do as meant.
        ({"docker.io": {"url": "ftp://m"}}, "docker.io.url: 'ftp://m' is not a registry mirror"),
        (
            {"docker.io": {"url": "http://m:5000", "skipVerify": True}},
            "docker.io.skipVerify: is for an https mirror",
        ),
        (
            {"docker.io": {"url": "https://m", "ca": PEM, "skipVerify": True}},
            "docker.io.skipVerify: takes any certificate",
        ),
        (
            {"docker.io": {"url": "https://m", "ca": "MIIB...base64"}},
            "docker.io.ca: holds no PEM certificate",
        ),
        (
            {"docker.io": {"url": "https://m", "ca": PEM.replace("M", "#", 3)}},
            "docker.io.ca: certificate 1 of 1 cannot be read",
        ),
        (
            {"docker.io": {"url": "https://m", "overridePath": True}},
            "docker.io.overridePath: uses the URL's path",
        ),
        ({"docker.io": {"url": "https://m", "skipverify": True}}, "did you mean 'skipVerify'"),
    ],
)
def test_bad_registry_mirrors_are_refused_with_the_fix(
    mirrors: dict[str, str], message: str
) -> None:
    config = {"manager": {"provider": "kind", "kind": {"registryMirrors": mirrors}}}
    with pytest.raises(FleetConfigError) as raised:
        load_checked(config, "t", "stacks/Pulumi.t.yaml")
    text = str(raised.value)
    assert message in text and "manager.kind.registryMirrors" in text, text


def test_the_from_host_context_is_chosen_outside_a_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    config = with_host_context(
        worker_kubeconfig("worker1", "https://w1-control-plane:6443", "Q0E=", "t"),
        "https://127.0.0.1:40123",
    )
    assert config["current-context"] == "worker1"
    servers = {c["name"]: c["cluster"]["server"] for c in config["clusters"]}
    assert servers[FROM_HOST_CONTEXT] == "https://127.0.0.1:40123"
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert host_context(config) == FROM_HOST_CONTEXT
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    assert host_context(config) is None
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    plain = worker_kubeconfig("worker1", "https://w1:6443", "Q0E=", "t")
    assert host_context(plain) is None


def test_upstream_controllers_fit_a_kind_node() -> None:
    from components.objects.kind_config import fit_kind_node

    lws = {
        "kind": "Deployment",
        "spec": {
            "replicas": 2,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "m",
                            "resources": {
                                "requests": {"cpu": "1", "memory": "1Gi"},
                                "limits": {"cpu": "2"},
                            },
                        },
                        {"name": "s", "resources": {"requests": {"cpu": "50m"}}},
                        {"name": "n"},
                    ]
                }
            },
        },
    }
    fitted = fit_kind_node(lws)
    assert fitted["spec"]["replicas"] == 1
    main, small, bare = fitted["spec"]["template"]["spec"]["containers"]
    assert main["resources"] == {
        "requests": {"cpu": "100m", "memory": "1Gi"},
        "limits": {"cpu": "2"},
    }
    assert small["resources"]["requests"]["cpu"] == "50m"
    assert bare == {"name": "n"}
    assert lws["spec"]["replicas"] == 2  # the input is left alone
    service = {"kind": "Service", "spec": {"replicas": 3}}
    assert fit_kind_node(service) is service


def test_preparing_the_host_as_another_user_is_one_line_and_changes_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kindnode.__main__ import main

    monkeypatch.setattr(host.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(host, "_apt_install", _never)
    monkeypatch.setattr(host, "_start_dockerd", _never)
    assert main(["host", "--prepare"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: preparing the host installs packages") and "as root" in line


def test_build_under_a_python_without_the_projects_packages_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python3 -m kindnode host --prepare` runs on a bare python3 (the docs show it so);
    `build` under the same python is one line naming the missing package and the python to
    use, not a traceback from deep in the stack model."""
    import sys

    import kindnode
    from kindnode.__main__ import main

    # What a python without `kubernetes` meets: the first import that needs it fails (an
    # earlier test may have imported it: the package's attribute goes too).
    monkeypatch.setitem(sys.modules, "kindnode.build", None)
    monkeypatch.delattr(kindnode, "build", raising=False)
    assert main(["build"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: python -m kindnode build needs the project's Python")
    assert "kindnode.build is not installed" in line and ".venv/bin/python" in line


def _never(*_args: object) -> None:
    raise AssertionError("the host was changed")


def test_a_docker_a_service_manager_owns_is_started_by_it_never_beside_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    systemd = tmp_path / "run-systemd-system"
    systemd.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text("#!/bin/sh\necho 'docker.service disabled enabled'\n")
    (bin_dir / "systemctl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setattr(host, "SYSTEMD_RUNNING", systemd)
    assert host.managed_docker() == "systemctl start docker"
    monkeypatch.setattr(host.os, "geteuid", lambda: 0)
    monkeypatch.setattr(host, "BUILD_PACKAGES", {})
    monkeypatch.setattr(host, "docker_answers", lambda: False)
    monkeypatch.setattr(host.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(host, "_start_dockerd", _never)
    with pytest.raises(host.HostError) as info:
        host.prepare()
    assert "start it (`systemctl start docker`) and run again" in str(info.value)
    # Without systemd as init, nothing owns it: the project starts its own.
    monkeypatch.setattr(host, "SYSTEMD_RUNNING", tmp_path / "absent")
    assert host.managed_docker() is None


def test_low_inotify_limits_are_a_warning_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    from components.checks import kind_host

    monkeypatch.setattr(kind_host, "docker_answers", lambda: True)
    monkeypatch.setattr(kind_host, "docker_info", lambda: {"ServerVersion": "20", "MemTotal": 0})
    monkeypatch.setattr(kind_host, "lacks_sys_resource", lambda: False)
    monkeypatch.setattr(kind_host, "missing_cgroup_controllers", lambda: [])
    monkeypatch.setattr(
        kind_host,
        "low_inotify",
        lambda: {"fs.inotify.max_user_watches": 8192, "fs.inotify.max_user_instances": 128},
    )
    (inotify,) = [f for f in kind_host.checks(8) if f.name == "inotify"]
    assert inotify.ok and inotify.warning
    assert "too many open files" in inotify.detail
    assert "sysctl -w fs.inotify.max_user_watches=524288" in inotify.detail


@pytest.mark.parametrize(("free_gib", "ok"), [(31, False), (32, True)])
def test_the_disk_a_fleet_needs_is_what_a_running_node_takes(
    monkeypatch: pytest.MonkeyPatch, free_gib: int, ok: bool
) -> None:
    """8 nodes want 32 GiB free: a running node's volume measured up to 4.6 GB."""
    from components.checks import kind_host

    monkeypatch.setattr(kind_host, "docker_answers", lambda: True)
    monkeypatch.setattr(kind_host, "docker_info", lambda: {"ServerVersion": "20", "MemTotal": 0})
    monkeypatch.setattr(kind_host, "lacks_sys_resource", lambda: False)
    monkeypatch.setattr(kind_host, "missing_cgroup_controllers", lambda: [])
    monkeypatch.setattr(kind_host, "low_inotify", lambda: {})
    usage = shutil._ntuple_diskusage(100 << 30, (100 - free_gib) << 30, free_gib << 30)  # type: ignore[attr-defined]
    monkeypatch.setattr(kind_host.shutil, "disk_usage", lambda _path: usage)
    (disk,) = [f for f in kind_host.checks(8) if f.name == "disk"]
    assert disk.ok is ok
    assert f"{free_gib} GiB free under" in disk.detail and "(about 4 GiB each)" in disk.detail
    assert disk.detail.endswith(": free disk space or use fewer nodes") is not ok
