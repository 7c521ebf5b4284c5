"""The dynamic providers, called directly with the CLI or the API faked (the edits made to
Kueue's release manifest are in test_upstream.py)."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from pulumi.dynamic.dynamic import serialize_provider

from components.resources.drain import QueueDrainProvider
from components.resources.providers import (
    CommandFailed,
    ControllerImageProvider,
    ServiceAccountTokenProvider,
    read_token,
    source_hash,
)
from tests.helpers.pulumi_harness import ROOT, UNKNOWN

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


DOCKER_INFO = ("docker", "info", "--format", "{{.Architecture}}")


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
        # Docker on an amd64 machine unless a test says otherwise.
        fake = FakeCli({**answers, DOCKER_INFO: answers.get(DOCKER_INFO, (0, "x86_64\n", ""))})
        monkeypatch.setattr(subprocess, "run", fake)
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
    assert fake.calls.pop(0) == list(DOCKER_INFO)
    assert fake.calls == [
        [
            "docker",
            "build",
            "--platform",
            "linux/amd64",
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


def test_image_builds_from_the_stacks_base_image(cli: Any) -> None:
    """dispatcher.baseImage goes in as controller/Dockerfile's BASE build argument, and a
    change of it builds again."""
    fake = cli({})
    base = "localhost/multikueue-fleet/stand-in/docker.io/library/python:3.11-slim-bookworm"
    props = {**IMAGE, "registry": None, "kind_clusters": ["dev-manager"], "base": base}
    ControllerImageProvider().create(props)
    build = fake.calls[1]
    assert build[:2] == ["docker", "build"]
    assert build[build.index("--build-arg") + 1] == f"BASE={base}"
    assert ControllerImageProvider().diff("x", {**props, "base": None}, props).changes
    assert not ControllerImageProvider().diff("x", props, dict(props)).changes
    dockerfile = (ROOT / "controller" / "Dockerfile").read_text()
    assert "ARG BASE=python:3.11-slim-bookworm\nFROM ${BASE}\n" in dockerfile


def test_kind_load_falls_back_to_an_archive_with_the_containerd_image_store(cli: Any) -> None:
    """Docker's containerd image store makes `kind load docker-image` fail with "content
    digest ... not found" (kubernetes-sigs/kind issue 3795); kind's documented workaround is
    a single-platform `docker image save` loaded with `kind load image-archive`."""
    fake = cli(
        {("kind", "load", "docker-image"): (1, "", "ctr: content digest sha256:82: not found")}
    )
    ControllerImageProvider().create({**IMAGE, "registry": None, "kind_clusters": ["dev-manager"]})
    save, load = fake.calls[3], fake.calls[4]  # after docker info, build, kind load
    assert save[:6] == ["docker", "image", "save", "--platform", "linux/amd64", "-o"]
    assert save[-1] == "multikueue-fleet-dispatcher:abc123"
    assert load[:3] == ["kind", "load", "image-archive"] and load[3] == save[6]
    assert load[4:] == ["--name", "dev-manager"]


def test_kind_load_without_a_way_round_says_how_to_fix_docker(cli: Any) -> None:
    cli(
        {
            ("kind", "load", "docker-image"): (1, "", "ctr: content digest sha256:82: not found"),
            ("docker", "image", "save"): (1, "", "unknown flag: --platform"),
        }
    )
    with pytest.raises(CommandFailed, match="containerd-snapshotter"):
        ControllerImageProvider().create(
            {**IMAGE, "registry": None, "kind_clusters": ["dev-manager"]}
        )


def test_other_kind_load_failures_are_not_retried(cli: Any) -> None:
    fake = cli({("kind", "load", "docker-image"): (1, "", "no nodes found for cluster")})
    with pytest.raises(CommandFailed, match="no nodes found"):
        ControllerImageProvider().create(
            {**IMAGE, "registry": None, "kind_clusters": ["dev-manager"]}
        )
    assert len(fake.calls) == 3  # docker info, docker build, kind load


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


@pytest.mark.parametrize(
    ("arch", "platform"), [("aarch64", "linux/arm64"), ("x86_64", "linux/amd64")]
)
def test_a_kind_image_is_built_for_the_docker_engines_machine(
    cli: Any, arch: str, platform: str
) -> None:
    """kind's nodes are containers of the Docker engine that builds the image: on an arm64
    laptop they are arm64, and an amd64 image would not start there."""
    fake = cli({DOCKER_INFO: (0, f"{arch}\n", "")})
    ControllerImageProvider().create({**IMAGE, "registry": None, "kind_clusters": ["m"]})
    assert fake.calls[1][:4] == ["docker", "build", "--platform", platform]


def test_an_engine_on_another_architecture_is_a_clear_error(cli: Any) -> None:
    cli({DOCKER_INFO: (0, "s390x\n", "")})
    with pytest.raises(CommandFailed, match=r"set dispatcher\.platform"):
        ControllerImageProvider().create({**IMAGE, "registry": None, "kind_clusters": ["m"]})


def test_a_pushed_image_defaults_to_amd64_without_asking_docker(cli: Any) -> None:
    fake = cli({("docker", "image", "inspect"): (0, "r.example/x@sha256:1\n", "")})
    ControllerImageProvider().create({**IMAGE, "registry": "r.example", "kind_clusters": []})
    assert fake.calls[0][:4] == ["docker", "build", "--platform", "linux/amd64"]


def test_image_is_built_for_the_platform_the_stack_names(cli: Any) -> None:
    fake = cli({})
    ControllerImageProvider().create(
        {**IMAGE, "registry": None, "kind_clusters": [], "platform": "linux/arm64"}
    )
    assert fake.calls[0][:4] == ["docker", "build", "--platform", "linux/arm64"]


def test_image_is_loaded_again_into_a_replaced_kind_cluster() -> None:
    """Same cluster name, new cluster: the identity input changes (or is unknown while the
    preview replaces the cluster), and the image is built and loaded again."""
    provider = ControllerImageProvider()
    old = {**IMAGE, "kind_clusters": ["dev-manager"], "kind_cluster_ids": ["aaaa"]}
    assert not provider.diff("x", old, dict(old)).changes
    assert provider.diff("x", old, {**old, "kind_cluster_ids": ["bbbb"]}).changes
    assert provider.diff("x", old, {**old, "kind_cluster_ids": [UNKNOWN]}).changes
    assert provider.diff("x", old, {**old, "platform": "linux/arm64"}).changes


def test_providers_unpickle_in_a_fresh_interpreter_from_the_project_directory() -> None:
    """The engine runs a dynamic provider in a new Python process started in the project
    directory, from the dill pickle the program wrote (pulumi/pulumi v3.272.0,
    sdk/python/lib/pulumi/dynamic/dynamic.py serialize_provider and dynamic/__main__.py
    get_provider): everything a provider refers to must import there."""
    script = (
        "import base64, json, sys\n"
        "import dill\n"
        "provider = dill.loads(base64.b64decode(sys.stdin.read()))\n"
        "old = json.loads(sys.argv[1])\n"
        "print(json.dumps(provider.diff('x', old, {**old, 'tag': 'new'}).changes))\n"
    )
    for provider in (
        ControllerImageProvider(),
        ServiceAccountTokenProvider(),
        QueueDrainProvider(),
    ):
        result = subprocess.run(
            [sys.executable, "-c", script, json.dumps({**IMAGE, "secret": "s"})],
            input=serialize_provider(provider),
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
            check=False,
        )
        assert result.returncode == 0, result.stderr
        changed = type(provider) is ControllerImageProvider
        assert json.loads(result.stdout) is changed


def test_fetch_uses_the_cache_and_explains_network_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from components.upstream import releases as upstream

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


def test_a_token_is_read_again_only_for_another_cluster() -> None:
    """Same cluster identity with a new kubeconfig (an in-place update of a cloud cluster,
    new credentials): no change. Another identity, or one unknown in a preview: replaced.
    Without identities (a stack deployed before they existed): the kubeconfig decides."""
    provider = ServiceAccountTokenProvider()
    old = {"kubeconfig": "a", "namespace": "kueue-system", "secret": "s", "cluster": "gke/p/l/c"}
    assert not provider.diff("x", old, {**old, "kubeconfig": "b"}).changes
    assert provider.diff("x", old, {**old, "cluster": "gke/p/l/d"}).replaces == ["cluster"]
    assert provider.diff("x", old, {**old, "cluster": UNKNOWN}).changes
    bare = {k: v for k, v in old.items() if k != "cluster"}
    assert provider.diff("x", bare, {**bare, "kubeconfig": "b"}).replaces == ["kubeconfig"]
