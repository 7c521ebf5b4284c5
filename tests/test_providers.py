"""The dynamic providers, called directly with the CLI or the API faked, and the edits made
to Kueue's release manifests."""

from __future__ import annotations

import base64
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from components import providers
from components.providers import (
    CommandFailed,
    ControllerImageProvider,
    read_token,
    source_hash,
)
from components.upstream import kueue_objects, plugin_mount
from tests.conftest import base, load
from tests.pulumi_harness import FAKE_KUEUE

KUBECONFIG = yaml.safe_dump(
    {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "kind-dev-w1",
        "clusters": [
            {
                "name": "kind-dev-w1",
                "cluster": {
                    "server": "https://127.0.0.1:41000",
                    "certificate-authority-data": "Q0E=",
                },
            }
        ],
        "users": [],
        "contexts": [],
    }
)


class FakeCli:
    """Stands in for subprocess.run: records calls, answers from a script."""

    def __init__(self, answers: dict[tuple[str, ...], tuple[int, str, str]]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []
        self.stdin: list[str | None] = []

    def __call__(self, args: list[str], input: str | None = None, **_: Any) -> Any:
        self.calls.append(list(args))
        self.stdin.append(input)
        for prefix, (code, out, err) in self.answers.items():
            if tuple(args[: len(prefix)]) == prefix:
                return subprocess.CompletedProcess(args, code, out, err)
        return subprocess.CompletedProcess(args, 0, "", "")


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(answers: dict[tuple[str, ...], tuple[int, str, str]]) -> FakeCli:
        fake = FakeCli(answers)
        monkeypatch.setattr(providers.subprocess, "run", fake)
        return fake

    return install


def test_token_is_awaited_until_the_worker_fills_it_in() -> None:
    answers = [
        SimpleNamespace(data=None),
        SimpleNamespace(data={}),
        SimpleNamespace(data={"token": base64.b64encode(b"s3cret").decode(), "ca.crt": "Q0E="}),
    ]
    reads: list[tuple[str, str]] = []

    class Api:
        def read_namespaced_secret(self, name: str, namespace: str) -> Any:
            reads.append((namespace, name))
            return answers[len(reads) - 1]

    token, ca = read_token("", None, "kueue-system", "multikueue-token", 5, 0.01, Api())
    assert (token, ca) == ("s3cret", "Q0E=")
    assert reads == [("kueue-system", "multikueue-token")] * 3


def test_token_that_never_comes_is_a_clear_error() -> None:
    class Api:
        def read_namespaced_secret(self, name: str, namespace: str) -> Any:
            return SimpleNamespace(data={})

    with pytest.raises(CommandFailed, match="got no token in 0s: is the token controller"):
        read_token("", None, "kueue-system", "multikueue-token", 0, 0.01, Api())


IMAGE = {
    "repository": "multikueue-fleet-dispatcher",
    "tag": "abc123",
    "context": ".",
    "dockerfile": "controller/Dockerfile",
    "kind_binary": "kind",
}


def test_image_is_built_and_loaded_into_kind(cli: Any) -> None:
    fake = cli({})
    result = ControllerImageProvider().create(
        {**IMAGE, "registry": None, "kind_clusters": ["dev-manager"]}
    )
    assert result.outs["image"] == "multikueue-fleet-dispatcher:abc123"
    assert fake.calls == [
        [
            "docker",
            "build",
            "-f",
            "controller/Dockerfile",
            "-t",
            "multikueue-fleet-dispatcher:abc123",
            ".",
        ],
        [
            "kind",
            "load",
            "docker-image",
            "multikueue-fleet-dispatcher:abc123",
            "--name",
            "dev-manager",
        ],
    ]


def test_image_is_pushed_and_pinned_by_digest(cli: Any) -> None:
    digest = "reg.example/team/multikueue-fleet-dispatcher@sha256:" + "1" * 64
    fake = cli({("docker", "image", "inspect"): (0, digest + "\n", "")})
    result = ControllerImageProvider().create(
        {**IMAGE, "registry": "reg.example/team/", "kind_clusters": []}
    )
    assert result.outs["image"] == digest
    assert ["docker", "push", "reg.example/team/multikueue-fleet-dispatcher:abc123"] in fake.calls


def test_image_rebuilds_when_the_sources_change(tmp_path: Path) -> None:
    (tmp_path / "controller").mkdir()
    (tmp_path / "controller" / "a.py").write_text("one")
    first = source_hash(tmp_path)
    (tmp_path / "controller" / "a.py").write_text("two")
    assert source_hash(tmp_path) != first
    provider = ControllerImageProvider()
    assert provider.diff("x", {**IMAGE, "tag": first}, {**IMAGE, "tag": "other"}).changes
    assert not provider.diff("x", dict(IMAGE), dict(IMAGE)).changes


# --- Kueue's manifests, edited ----------------------------------------------------------------


def _manager_pod(objects: list[dict[str, Any]]) -> dict[str, Any]:
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    return deployment["spec"]["template"]["spec"]


def _profile_spec(mount: str, version: str = "1.34", image: str | None = None) -> Any:
    config = base()
    config["credentials"] = {
        "mode": "clusterProfile",
        "clusterProfile": {"pluginMount": mount, **({"kueueImage": image} if image else {})},
    }
    config["manager"]["kubernetesVersion"] = version
    spec, problems = load(config)
    assert not [p for p in problems if p.severity == "error"], problems
    return spec


def test_kueue_gets_our_configuration() -> None:
    spec, _ = load(base())
    objects = kueue_objects(yaml.safe_dump_all(FAKE_KUEUE), spec, spec.manager)
    config = next(o for o in objects if o["kind"] == "ConfigMap")
    text = config["data"]["controller_manager_config.yaml"]
    assert "dispatcherName: multikueue-fleet/dispatcher" in text
    assert len(objects) == len(FAKE_KUEUE)
    assert _manager_pod(objects)["containers"][0]["args"] == [
        "--config=/controller_manager_config.yaml",
        "--zap-log-level=2",
    ]


def test_feature_gates_as_flags_reach_the_container() -> None:
    config = base()
    config["kueue"] = {"featureGateFlags": {"PartialAdmission": False}}
    spec, _ = load(config)
    pod = _manager_pod(kueue_objects(yaml.safe_dump_all(FAKE_KUEUE), spec, spec.manager))
    assert (
        pod["containers"][0]["args"][-1]
        == "--feature-gates=PartialAdmission=false,WorkloadRequestUseMergePatch=true"
    )


def test_plugin_by_init_container_on_older_kubernetes() -> None:
    spec = _profile_spec("auto", "1.34")
    assert plugin_mount(spec, spec.manager) == "initContainer"
    pod = _manager_pod(kueue_objects(yaml.safe_dump_all(FAKE_KUEUE), spec, spec.manager))
    (init,) = pod["initContainers"]
    assert init["image"] == "registry.k8s.io/cluster-inventory-api/secretreader:v0.1.3"
    assert (
        init["command"][-1] == "mkdir -p /plugins/bin && cp /bin/secretreader-plugin /plugins/bin/"
    )
    assert pod["volumes"] == [{"name": "access-provider-plugins", "emptyDir": {}}]
    assert pod["containers"][0]["volumeMounts"] == [
        {"name": "access-provider-plugins", "mountPath": "/plugins", "readOnly": True}
    ]


def test_plugin_by_image_volume_and_by_custom_image() -> None:
    spec = _profile_spec("auto", "1.35")
    assert plugin_mount(spec, spec.manager) == "imageVolume"
    assert plugin_mount(spec, spec.workers[0]) is None  # workers need no plugin
    custom = _profile_spec("customImage", "1.34", "example.com/kueue-with-plugin:v0.19.2")
    pod = _manager_pod(kueue_objects(yaml.safe_dump_all(FAKE_KUEUE), custom, custom.manager))
    assert pod["containers"][0]["image"] == "example.com/kueue-with-plugin:v0.19.2"
    assert "volumes" not in pod


def test_unexpected_kueue_manifests_are_refused() -> None:
    spec, _ = load(base())
    without = [o for o in FAKE_KUEUE if o["kind"] != "Deployment"]
    with pytest.raises(RuntimeError, match="no kueue-controller-manager Deployment"):
        kueue_objects(yaml.safe_dump_all(without), spec, spec.manager)


def test_fetch_uses_the_cache_and_explains_network_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from components import upstream

    monkeypatch.setenv("MKF_UPSTREAM_CACHE", str(tmp_path))
    cached = tmp_path / upstream.cache_key("https://example.com/a.yaml")
    cached.write_text("kind: Cached\n")
    cached.with_suffix(".sha256").write_text(upstream.hashlib.sha256(b"kind: Cached\n").hexdigest())
    assert upstream.fetch("https://example.com/a.yaml") == "kind: Cached\n"

    def offline(*_: Any, **__: Any) -> Any:
        raise OSError("network unreachable")

    monkeypatch.setattr(upstream.urllib.request, "urlopen", offline)
    with pytest.raises(RuntimeError, match=re.escape("cannot download https://example.com/b.yaml")):
        upstream.fetch("https://example.com/b.yaml")
