"""This host's settings for a stack (stacks/local/STACK.yaml): what `kindnode build
--for-stack` writes, every reader of the stack applies to each kind cluster with a note, and
a wrong file is one line naming it, before anything reaches a cluster."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from components.checks import kind_host
from components.checks.load import load_stack
from components.model import host_local
from components.model.problems import FleetConfigError
from loopback.pki import Authority
from tests.helpers.stack_texts import ROOT

NODE = "127.0.0.1:5001/kindest/node:v1.36.4@sha256:" + "e4" * 32
MIRRORS = {"registry.k8s.io": "http://mkf-registry:5000", "docker.io": "http://mkf-registry:5000"}
STACK = """config:
  multikueue-fleet:manager: {name: manager}
  multikueue-fleet:workers:
    - {name: worker1}
    - name: far
      provider: existing
      existing: {context: far}
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder the commands find upward from the current directory, with this
    host's settings read (the test session switches them off)."""
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    (tmp_path / "stacks").mkdir()
    shutil.copy(ROOT / "stacks" / "Pulumi.dev.yaml", tmp_path / "stacks" / "Pulumi.dev.yaml")
    (tmp_path / "stacks" / "Pulumi.mixed.yaml").write_text(STACK)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(host_local.SWITCH, raising=False)
    return tmp_path


def _images(spec) -> dict[str, tuple[str | None, dict]]:
    return {
        c.name: (c.kind.node_image, dict(c.kind.registry_mirrors)) if c.kind else (None, {})
        for c in spec.clusters
    }


def test_without_the_file_the_stack_is_read_as_committed(project: Path) -> None:
    spec, problems = load_stack("stacks/Pulumi.dev.yaml")
    assert all(image != NODE for image, _ in _images(spec).values())
    assert not [p for p in problems if "this host's" in p.message]


def test_every_kind_cluster_takes_the_hosts_node_image_and_mirrors(project: Path) -> None:
    written = host_local.write_host_settings("dev", NODE, MIRRORS)
    assert written == project / "stacks" / "local" / "dev.yaml"
    before = (project / "stacks" / "Pulumi.dev.yaml").read_text()
    spec, problems = load_stack("stacks/Pulumi.dev.yaml")
    assert _images(spec) == {c: (NODE, MIRRORS) for c in ("manager", "worker1", "worker2")}
    (note,) = [p for p in problems if "this host's" in p.message]
    assert note.severity == "note"
    assert "manager, worker1, worker2" in note.message
    assert "stacks/local/dev.yaml" in note.message and "delete" in note.hint
    # The stack file itself is never written.
    assert (project / "stacks" / "Pulumi.dev.yaml").read_text() == before


def test_a_hosts_mirror_may_carry_containerds_host_options(project: Path, tmp_path: Path) -> None:
    """A mirror of this host's with a private CA: the options form, as a stack's own, goes to
    each kind cluster whole (components/objects/kind_config.py writes its hosts.toml)."""
    path = project / "stacks" / "local" / "dev.yaml"
    path.parent.mkdir()
    pem = Authority(tmp_path, "mirror-ca", "mirror-ca").pem().decode()
    quay = {"url": "https://mirror.example:5443/v2/quay", "ca": pem, "overridePath": True}
    path.write_text(yaml.safe_dump({"kind": {"nodeImage": NODE, "registryMirrors": {
        **MIRRORS, "quay.io": quay}}}))  # fmt: skip
    spec, _ = load_stack("stacks/Pulumi.dev.yaml")
    for cluster in spec.clusters:
        assert cluster.kind is not None
        mirror = cluster.kind.registry_mirrors["quay.io"]
        assert not isinstance(mirror, str)
        assert (mirror.url, mirror.ca, mirror.override_path) == (quay["url"], pem, True)
        assert cluster.kind.registry_mirrors["docker.io"] == MIRRORS["docker.io"]
    # What containerd refuses to do as meant is refused here too, naming the file.
    path.write_text(yaml.safe_dump({"kind": {"nodeImage": NODE, "registryMirrors": {
        "quay.io": {"url": "http://mirror.example:5000", "ca": pem}}}}))  # fmt: skip
    with pytest.raises(FleetConfigError) as caught:
        load_stack("stacks/Pulumi.dev.yaml")
    message = str(caught.value)
    assert "stacks/local/dev.yaml" in message
    assert "error: kind.registryMirrors.quay.io.ca: is for an https mirror" in message
    assert "fix: remove it, or give the mirror's https:// URL" in message


def test_clusters_that_are_not_kind_are_left_alone(project: Path) -> None:
    host_local.write_host_settings("mixed", NODE, MIRRORS)
    spec, problems = load_stack("stacks/Pulumi.mixed.yaml")
    images = _images(spec)
    assert images["manager"] == (NODE, MIRRORS) and images["worker1"] == (NODE, MIRRORS)
    assert images["far"] == (None, {})
    (note,) = [p for p in problems if "this host's" in p.message]
    assert "manager, worker1 " in note.message + " " and "far" not in note.message


def test_a_stack_without_workers_gets_them_on_its_default_workers(project: Path) -> None:
    config, notes = host_local.with_host_settings({}, "dev")
    assert config == {}
    assert notes == []
    host_local.write_host_settings("dev", NODE, MIRRORS)
    config, notes = host_local.with_host_settings({}, "dev")
    assert [w["name"] for w in config["workers"]] == ["worker1", "worker2"]
    assert config["manager"]["kind"]["nodeImage"] == NODE
    assert len(notes) == 1


BASE = "localhost/multikueue-fleet/stand-in/docker.io/library/python:3.11-slim-bookworm"


def test_the_dispatcher_image_builds_from_the_hosts_base(project: Path) -> None:
    """The stand-in python base goes to the dispatcher's build (controller/Dockerfile's BASE)
    where the stack builds that image, said in the same note; a stack that runs a given
    image, or runs the dispatcher locally, is left as it is (a base there would be refused)."""
    host_local.write_host_settings("dev", NODE, MIRRORS, dispatcher_base=BASE)
    text = (project / "stacks" / "local" / "dev.yaml").read_text()
    assert f"dispatcher:\n  baseImage: {BASE}\n" in text
    spec, problems = load_stack("stacks/Pulumi.dev.yaml")
    assert spec.dispatcher.base_image == BASE
    (note,) = [p for p in problems if "this host's" in p.message]
    assert "and the dispatcher image's base are this host's" in note.message
    for dispatcher in ({"image": "team/dispatcher:1"}, {"run": "local"}, {"enabled": False}):
        config, notes = host_local.with_host_settings({"dispatcher": dispatcher}, "dev")
        assert config["dispatcher"] == dispatcher
        assert "dispatcher" not in notes[0].message
    # Written without one (an older build), nothing is added to the dispatcher.
    host_local.write_host_settings("dev", NODE, MIRRORS)
    spec, _ = load_stack("stacks/Pulumi.dev.yaml")
    assert spec.dispatcher.base_image is None


def test_the_switch_reads_the_stack_as_committed(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host_local.write_host_settings("dev", NODE, MIRRORS)
    monkeypatch.setenv(host_local.SWITCH, "off")
    assert host_local.read_host_settings("dev") is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("kind: {nodeImage: " + NODE + ", workerNodes: 3}\n", "kind.workerNodes"),
        ("kind: {nodeImage: 'not an image!'}\n", "kind.nodeImage"),
        ("kind: {nodeImage: " + NODE + ", registryMirrors: {docker.io: ftp://x}}\n",
         "kind.registryMirrors"),
        ("kueue: {}\n", "kind"),
        ("kind: [\n", "cannot read it"),
    ],
)  # fmt: skip
def test_a_wrong_file_is_one_line_naming_it(project: Path, text: str, says: str) -> None:
    path = project / "stacks" / "local" / "dev.yaml"
    path.parent.mkdir()
    path.write_text(text)
    with pytest.raises(FleetConfigError) as caught:
        load_stack("stacks/Pulumi.dev.yaml")
    message = str(caught.value)
    assert "stacks/local/dev.yaml" in message
    assert says in message
    assert "kindnode build --for-stack dev" in message


def test_the_file_is_ignored_by_git(project: Path) -> None:
    path = host_local.write_host_settings("dev", NODE, MIRRORS)
    assert path.read_text().startswith("# This host's kind settings for stack dev")
    ignored = subprocess.run(
        ["git", "-C", str(ROOT), "check-ignore", "-q", "stacks/local/dev.yaml"], check=False
    )
    assert ignored.returncode == 0


def test_the_preflight_asks_for_a_build_only_where_the_node_image_is_all_it_lacks(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    unavailable = kind_host.NodeImageUnavailable(
        "Docker cannot pull the kind node image X (no such host)", "where nothing can be pulled"
    )
    monkeypatch.setattr(kind_host, "preflight_warnings", lambda spec: [])
    monkeypatch.setattr(kind_host, "preflight", lambda spec: [unavailable])
    assert kind_host.main(["stacks/Pulumi.dev.yaml", "--can-build"]) == kind_host.BUILD_NODE_IMAGE
    assert capsys.readouterr().err.startswith("note: Docker cannot pull")
    # Without Go (no --can-build) it is an error with the fix.
    assert kind_host.main(["stacks/Pulumi.dev.yaml"]) == 1
    assert "error: Docker cannot pull" in capsys.readouterr().err
    # Any other lack stops it whatever the caller can build.
    monkeypatch.setattr(kind_host, "preflight", lambda spec: [unavailable, "disk: 1 GiB free"])
    assert kind_host.main(["stacks/Pulumi.dev.yaml", "--can-build"]) == 1


def test_a_file_of_the_users_in_its_place_is_never_overwritten(project: Path) -> None:
    path = project / "stacks" / "local" / "dev.yaml"
    path.parent.mkdir()
    path.write_text("# my notes\nkind: {nodeImage: mine}\n")
    with pytest.raises(FileExistsError, match="move it away"):
        host_local.write_host_settings("dev", NODE, MIRRORS)
    assert path.read_text() == "# my notes\nkind: {nodeImage: mine}\n"
    # What it wrote itself it writes again.
    path.unlink()
    host_local.write_host_settings("dev", NODE, MIRRORS)
    host_local.write_host_settings("dev", NODE.replace("e4", "e5"), MIRRORS)
    assert "e5e5" in path.read_text()


def test_kindnode_refuses_before_building_over_a_users_file(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kindnode import __main__ as kindnode_main
    from kindnode import build

    path = project / "stacks" / "local" / "dev.yaml"
    path.parent.mkdir()
    path.write_text("kind: {nodeImage: mine}\n")
    monkeypatch.setattr(build, "build_all", lambda: pytest.fail("built anyway"))
    assert kindnode_main.main(["build", "--for-stack", "dev"]) == 1
    assert "stacks/local/dev.yaml is there and was not written by" in capsys.readouterr().err
    assert kindnode_main.main(["build", "--for-stack", "nope"]) == 2
