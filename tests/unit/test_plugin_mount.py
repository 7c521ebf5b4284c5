"""The ClusterProfile access provider's plugin as Kueue's pod gets it: its path checked
where Kueue will look for it, and the init container that copies it able to start in
Kueue's pod whatever user its image names."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from components.objects.kueue_install import KUEUE_USER, kueue_objects
from tests.helpers.fleet_config import KUEUE_SKELETON, base, checked_spec, load, only

WHERE = "credentials.clusterProfile.pluginPath"


def _config(mount: str, path: str | None = None, **settings: str) -> dict[str, Any]:
    config = base()
    config["manager"]["kubernetesVersion"] = "1.35"
    profile = {"pluginMount": mount, **settings}
    if path is not None:
        profile["pluginPath"] = path
    config["credentials"] = {"mode": "clusterProfile", "clusterProfile": profile}
    return config


@pytest.mark.parametrize("mount", ["imageVolume", "initContainer"])
@pytest.mark.parametrize(
    "path", ["/bin/secretreader-plugin", "/plugins", "/plugins/", "/pluginsx/p"]
)
def test_a_path_outside_the_mounted_folder_is_refused(mount: str, path: str) -> None:
    problem = only(load(_config(mount, path, pluginImage="example.com/plugin:v1"))[1], WHERE)
    assert problem.severity == "error"
    assert "/plugins" in problem.message or "plainly" in problem.message
    assert "/plugins/bin/secretreader-plugin" in problem.hint


@pytest.mark.parametrize(
    "path", ["/plugins/bin/", "/plugins//bin/p", "/plugins/./p", "/plugins/../bin/p"]
)
def test_a_path_that_does_not_plainly_name_a_file_is_refused(path: str) -> None:
    problem = only(load(_config("imageVolume", path))[1], WHERE)
    assert "does not name a file plainly" in problem.message


@pytest.mark.parametrize(
    ("mount", "path"),
    [
        ("imageVolume", "/plugins/bin/secretreader-plugin"),
        ("imageVolume", "/plugins/my-plugin"),
        ("initContainer", "/plugins/bin/secretreader-plugin"),
        # customImage: the plugin is in Kueue's own image, wherever it was put.
        ("customImage", "/usr/local/bin/my-plugin"),
    ],
)
def test_a_path_where_kueue_finds_the_plugin_is_accepted(mount: str, path: str) -> None:
    settings = {"pluginImage": "example.com/plugin:v1", "kueueImage": "example.com/kueue:v1"}
    if mount != "customImage":
        settings.pop("kueueImage")
    problems = load(_config(mount, path, **settings))[1]
    assert not [p for p in problems if p.path == WHERE], problems


def test_the_init_container_runs_as_kueues_user_whatever_its_image_says() -> None:
    """Kueue's pod is runAsNonRoot: an image whose user is root (busybox, alpine) would be
    refused by the kubelet ("container has runAsNonRoot and image will run as root")."""
    spec = checked_spec(_config("initContainer", pluginImage="example.com/alpine-plugin:v1"))
    deployment = next(o for o in kueue_objects(KUEUE_SKELETON, spec, spec.manager)
                      if o["kind"] == "Deployment")  # fmt: skip
    (init,) = deployment["spec"]["template"]["spec"]["initContainers"]
    context = init["securityContext"]
    assert context["runAsNonRoot"] is True
    assert context["runAsUser"] == context["runAsGroup"] == KUEUE_USER == 65532
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}


def test_a_plugin_path_with_shell_characters_is_only_a_file_name(tmp_path: Path) -> None:
    """The init container's `sh -c` gets the paths as arguments, not in its script: a path
    such as `/plugins/bin/x;id>pwned` copies a file of that name and runs nothing."""
    path = "/plugins/bin/x;id>pwned"
    spec = checked_spec(_config("initContainer", path, pluginImage="example.com/alpine-plugin:v1"))
    deployment = next(o for o in kueue_objects(KUEUE_SKELETON, spec, spec.manager)
                      if o["kind"] == "Deployment")  # fmt: skip
    (init,) = deployment["spec"]["template"]["spec"]["initContainers"]
    shell, flag, script, name, target, source = init["command"]
    assert (shell, flag, target, source) == ("sh", "-c", "/plugins/bin", "/bin/x;id>pwned")
    assert "pwned" not in script
    # The script as the container runs it, on folders of this test's own.
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "x;id>pwned").write_text("plugin")
    subprocess.run(
        [shell, flag, script, name, f"{tmp_path}{target}", f"{tmp_path}{source}"],
        cwd=tmp_path, check=True, timeout=30,
    )  # fmt: skip
    assert (tmp_path / "plugins" / "bin" / "x;id>pwned").read_text() == "plugin"
    assert not (tmp_path / "pwned").exists()
