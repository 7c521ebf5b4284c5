"""Pulumi's environment for the program (components/resources/program_env.py): where
Pulumi.yaml puts it, which cloud SDK modules a stack needs there, and how their absence is
found."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

from components.resources.program_env import (
    CLOUD_SDKS,
    cloud_modules,
    missing_cloud_sdks,
    missing_message,
    program_env,
    unneeded_cloud_sdks,
)

ROOT = Path(__file__).resolve().parents[2]


def _project(tmp_path: Path, python_body: str | None) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    if python_body is not None:
        python = project / ".venv" / "bin" / "python"
        python.parent.mkdir(parents=True)
        python.write_text("#!/usr/bin/env bash\n" + python_body)
        python.chmod(0o755)
    return project


def test_the_environment_is_the_one_pulumi_yaml_names() -> None:
    assert program_env(ROOT) == ROOT / ".venv"


def test_the_cloud_modules_are_the_packages_of_requirements_cloud() -> None:
    pins = re.findall(r"^([a-z0-9-]+)==", (ROOT / "requirements-cloud.txt").read_text(), re.M)
    assert sorted(p.replace("-", "_") for p in pins) == cloud_modules(CLOUD_SDKS)


def test_kind_and_existing_need_nothing_and_run_nothing(tmp_path: Path) -> None:
    project = _project(tmp_path, "exit 99\n")  # would fail if it were asked
    assert missing_cloud_sdks(project, ["kind", "existing"]) == []


def test_a_missing_environment_lacks_every_module(tmp_path: Path) -> None:
    assert missing_cloud_sdks(_project(tmp_path, None), ["gke", "eks"]) == [
        "pulumi_aws",
        "pulumi_eks",
        "pulumi_gcp",
    ]


@pytest.mark.parametrize(
    ("flags", "missing"),
    [("", []), ("-S", ["pulumi_gcp"])],  # -S: no site-packages, so none of the SDKs
    ids=["installed", "absent"],
)
def test_modules_are_looked_up_in_that_environment(
    tmp_path: Path, flags: str, missing: list[str]
) -> None:
    project = _project(tmp_path, f'exec {sys.executable} {flags} "$@"\n')
    assert missing_cloud_sdks(project, ["gke", "kind"]) == missing


def test_an_environment_that_cannot_answer_counts_as_lacking(tmp_path: Path) -> None:
    assert missing_cloud_sdks(_project(tmp_path, "exit 1\n"), ["eks"]) == [
        "pulumi_aws",
        "pulumi_eks",
    ]


def test_the_message_names_stack_clusters_modules_and_fix() -> None:
    text = missing_message("prod", ["eks", "kind", "gke"], ["pulumi_gcp", "pulumi_aws"])
    assert text == (
        "stack 'prod' has eks/gke clusters, and Pulumi's environment for this program (.venv) "
        "lacks pulumi_aws, pulumi_gcp; install them with "
        "`.venv/bin/python -m pip install -r requirements-cloud.txt`"
    )


def test_no_script_or_workflow_puts_dev_or_cloud_packages_there_for_kind() -> None:
    """Every install into .venv is requirements.txt, or requirements-cloud.txt in up.sh's
    cloud-stack branch (its behaviour: tests/unit/test_scripts.py); the tests' own packages go
    to .venv-dev."""
    sources = [*ROOT.glob("scripts/*.sh"), *ROOT.glob(".github/workflows/*.yaml")]
    installs = [
        (path.name, line.strip())
        for path in sources
        for line in path.read_text().splitlines()
        if "pip install" in line and re.search(r"\.venv/bin/(python|pip)\b", line)
    ]
    assert installs, "no install into .venv found: the scan no longer sees the scripts"
    for name, line in installs:
        assert "requirements-dev" not in line, (name, line)
        assert "requirements-cloud" not in line or name == "up.sh", (name, line)
    assert "ENV=.venv-dev" in (ROOT / "scripts" / "test.sh").read_text()


def test_the_pinned_cli_meets_the_projects_required_version() -> None:
    """Pulumi.yaml's floor (deletedWith cascading on replace) admits the CLI scripts/env.sh
    installs, and refuses the last release without that engine change."""
    import yaml

    required = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["requiredPulumiVersion"]
    match = re.fullmatch(r">=(\d+)\.(\d+)\.(\d+)", required)
    assert match, required
    floor = tuple(int(x) for x in match.groups())
    pinned = re.search(
        r'^PULUMI_VERSION="(\d+)\.(\d+)\.(\d+)"$', (ROOT / "scripts/env.sh").read_text(), re.M
    )
    assert pinned and tuple(int(x) for x in pinned.groups()) >= floor
    assert floor > (3, 259, 0)


def test_up_notes_cloud_sdks_a_kind_stack_does_not_use(tmp_path: Path) -> None:
    project = _project(tmp_path, f'exec {sys.executable} "$@"\n')  # every SDK installed
    assert unneeded_cloud_sdks(project, ["kind"]) == ["pulumi_aws", "pulumi_eks", "pulumi_gcp"]
    assert unneeded_cloud_sdks(project, ["gke", "kind"]) == ["pulumi_aws", "pulumi_eks"]
    (tmp_path / "bare").mkdir()
    bare = _project(tmp_path / "bare", f'exec {sys.executable} -S "$@"\n')
    assert unneeded_cloud_sdks(bare, ["kind"]) == []


def test_the_note_names_the_packages_and_how_to_drop_them(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from components.resources import program_env as module

    monkeypatch.setattr(module, "unneeded_cloud_sdks", lambda *_: ["pulumi_gcp"])
    assert module.main(["kind"]) == 0
    err = capsys.readouterr().err
    assert err == (
        "note: .venv holds pulumi_gcp, which this stack does not use; Pulumi fetches the "
        "plugin of every Pulumi package there. To drop them: .venv/bin/python -m pip "
        "uninstall -y pulumi-gcp\n"
    )
    monkeypatch.setattr(module, "unneeded_cloud_sdks", lambda *_: [])
    assert module.main(["kind"]) == 0 and capsys.readouterr().err == ""
