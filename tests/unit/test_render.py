"""`python -m components render|validate`: files written, diffs shown, errors reported."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from components.checks.load import load_stack
from components.cli.render import diff_fleets
from components.model.stack_file import read_text
from components.objects.fleet import build_fleet
from tests.helpers.stack_texts import DEV as DEV_TEXT
from tests.helpers.stack_texts import cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def dev(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A frozen copy of the dev stack, named like it (the stack name comes from the file
    name), beside each test's own folder, which some tests check stays empty."""
    path = tmp_path_factory.mktemp("frozen") / "Pulumi.dev.yaml"
    path.write_text(DEV_TEXT)
    return path


def test_render_dev_writes_one_directory_per_cluster(dev: Path, tmp_path: Path) -> None:
    out = tmp_path / "render"
    result = cli("render", "--stack", str(dev), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        ".multikueue-fleet-render",  # the list of files written: a later render replaces them
        "fleet.yaml",
        "manager",
        "worker-worker1",
        "worker-worker2",
    ]
    spec, _ = load_stack(str(dev))
    for cluster in build_fleet(spec):
        written = list(yaml.safe_load_all((out / cluster.directory / "objects.yaml").read_text()))
        assert written == list(cluster.objects)  # render and the builders never disagree
        upstream = yaml.safe_load((out / cluster.directory / "upstream.yaml").read_text())
        assert (
            upstream["installs"][0].pop("podTemplateAnnotations")
            == (cluster.bundles[0].as_dict()["podTemplateAnnotations"])
        )
        assert upstream["installs"][0] == {
            "name": "kueue",
            "version": "v0.19.2",
            "method": "manifests",
            "namespace": "kueue-system",
            "url": "https://github.com/kubernetes-sigs/kueue/releases/download/v0.19.2/"
            "manifests.yaml",
        }
    summary = yaml.safe_load((out / "fleet.yaml").read_text())
    assert [c["name"] for c in summary["clusters"]] == ["manager", "worker1", "worker2"]


def test_render_without_out_writes_the_stream_to_stdout(dev: Path, tmp_path: Path) -> None:
    """As `helm template`: no --out is the YAML stream on stdout, the same as --out -."""
    plain = cli("render", "--stack", str(dev), cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout == cli("render", "--stack", str(dev), "--out", "-").stdout
    assert plain.stdout.startswith("---\n# cluster: manager")
    assert list(tmp_path.iterdir()) == []  # nothing written beside it


def test_render_shows_the_kueue_configuration_readably(dev: Path, tmp_path: Path) -> None:
    assert cli("render", "--stack", str(dev), "--out", str(tmp_path)).returncode == 0
    text = (tmp_path / "manager" / "objects.yaml").read_text()
    assert (
        "controller_manager_config.yaml: |\n    apiVersion: config.kueue.x-k8s.io/v1beta2" in text
    )


def test_render_refuses_a_bad_stack_and_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "Pulumi.bad.yaml"
    text = DEV_TEXT.replace("cpu: 4", "cpu: four").replace("name: worker2", "name: W2")
    bad.write_text(text)
    out = tmp_path / "out"
    result = cli("render", "--stack", str(bad), "--out", str(out))
    assert result.returncode == 1
    assert "workers[1].name: cluster name 'W2' is not a valid DNS label" in result.stderr
    assert "nominalQuota 'four' is not a Kubernetes quantity" in result.stderr
    assert "Nothing was changed on any cluster" in result.stderr
    assert not out.exists()


def test_validate_all_stacks() -> None:
    result = cli("validate", "--all")
    assert result.returncode == 0, result.stderr
    for stack in ("dev", "ci", "tas", "gke", "eks", "existing"):
        assert f"stacks/Pulumi.{stack}.yaml: 0 error(s)" in result.stdout


def _variant(tmp_path: Path, name: str, old: str, new: str) -> Path:
    path = tmp_path / f"Pulumi.{name}.yaml"
    text = DEV_TEXT
    assert old in text
    path.write_text(text.replace(old, new))
    return path


def test_diff_shows_a_quota_change_cluster_by_cluster(dev: Path, tmp_path: Path) -> None:
    new = _variant(tmp_path, "dev", "cpu: 4", "cpu: 6")
    result = cli("render", "--diff", "--old", str(dev), "--new", str(new))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for directory in ("manager", "worker-worker1", "worker-worker2"):
        assert f"== {directory}: changed" in out
    assert out.count("~ ClusterQueue cluster-queue (changed)") == 3
    assert "    -        nominalQuota: '8'\n    +        nominalQuota: '12'" in out
    assert out.count("    -        nominalQuota: '4'\n    +        nominalQuota: '6'") == 2
    assert "LocalQueue" not in out  # only what changed is shown


def test_diff_shows_an_added_worker(dev: Path, tmp_path: Path) -> None:
    new = _variant(
        tmp_path,
        "dev",
        "  multikueue-fleet:frameworks:",
        "    - name: worker3\n  multikueue-fleet:frameworks:",
    )
    lines = diff_fleets(load_stack(str(dev))[0], load_stack(str(new))[0], "old", "new")
    text = "\n".join(lines)
    assert "== worker-worker3: cluster added" in text
    assert "+ MultiKueueCluster worker3 (added)" in text
    assert "~ MultiKueueConfig multikueue (changed)" in text
    assert "    +  - worker3" in text


def test_diff_without_changes_and_exit_code(dev: Path, tmp_path: Path) -> None:
    same = cli("render", "--diff", "--old", str(dev), "--new", str(dev), "--exit-code")
    assert same.returncode == 0
    assert "no changes" in same.stdout
    new = _variant(tmp_path, "dev", "region: local-b", "region: local-c")
    changed = cli("render", "--diff", "--old", str(dev), "--new", str(new), "--exit-code")
    assert changed.returncode == 1
    assert "~ MultiKueueCluster worker2 (changed)" in changed.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository holding a stack file at two revisions."""

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    (tmp_path / "stacks").mkdir()
    stack = tmp_path / "stacks" / "Pulumi.dev.yaml"
    stack.write_text(DEV_TEXT)
    git("add", ".")
    git("commit", "-qm", "one")
    stack.write_text(DEV_TEXT.replace("memory: 8Gi", "memory: 10Gi"))
    git("commit", "-qam", "two")
    return tmp_path


def test_diff_between_git_revisions(repo: Path) -> None:
    old, _ = load_stack("HEAD~1:stacks/Pulumi.dev.yaml", repo)
    new, _ = load_stack("HEAD:stacks/Pulumi.dev.yaml", repo)
    assert old.stack == new.stack == "dev"
    text = "\n".join(diff_fleets(old, new, "HEAD~1", "HEAD"))
    assert "    -        nominalQuota: 16Gi\n    +        nominalQuota: 20Gi" in text


def test_unknown_revision_is_a_clear_error(repo: Path) -> None:
    with pytest.raises(FileNotFoundError, match=re.escape("nope:stacks/Pulumi.dev.yaml")):
        read_text("nope:stacks/Pulumi.dev.yaml", repo)


def test_diff_cli_against_a_git_revision() -> None:
    # The checkout's own history: HEAD holds both committed stack files.
    result = cli(
        "render",
        "--diff",
        "--old",
        "HEAD:stacks/Pulumi.ci.yaml",
        "--new",
        "HEAD:stacks/Pulumi.dev.yaml",
    )
    assert result.returncode == 0, result.stderr
    assert "== worker-worker2: cluster added" in result.stdout


def test_reader_access_prints_the_read_only_identity_for_a_new_worker() -> None:
    from components.objects.labels import with_fleet_labels
    from components.objects.worker_access import worker_access_objects

    result = cli("reader-access", "--stack", "gke", "--cluster", "gke-new")
    assert result.returncode == 0, result.stderr
    assert "multikueue-fleet/worker=gke-new" in result.stdout  # the steps in the header
    assert "#      mkf reader-access --stack gke --cluster gke-new" in result.stdout
    assert "python -m components" not in result.stdout
    objects = [o for o in yaml.safe_load_all(result.stdout) if o]
    kinds = [o["kind"] for o in objects]
    assert kinds == ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Secret"]
    (role,) = [o for o in objects if o["kind"] == "ClusterRole"]
    assert role["rules"] == [
        {
            "apiGroups": ["kueue.x-k8s.io"],
            "resources": ["clusterqueues", "localqueues", "workloads"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    # The same identity the stack gives its own workers, and nothing of Kueue's.
    spec, _ = load_stack(str(ROOT / "stacks" / "Pulumi.gke.yaml"))
    stack_objects = with_fleet_labels(spec, worker_access_objects(spec))
    assert all(o in stack_objects for o in objects)
    assert not any("multikueue-token" in str(o) for o in objects)


def test_reader_access_refuses_a_name_kubernetes_would() -> None:
    result = cli("reader-access", "--stack", "gke", "--cluster", "New_Cluster")
    assert result.returncode == 2
    assert "'New_Cluster' is not a valid DNS label" in result.stderr
    assert result.stdout == ""


def test_diff_of_two_files_named_differently_shows_only_the_change(tmp_path: Path) -> None:
    """`--old mine.yaml --new copy.yaml`: both read as the new one's stack, so the fleet's
    name and labels (which default to the stack's name) do not mark every object changed."""
    old = tmp_path / "Pulumi.mine.yaml"
    old.write_text(DEV_TEXT)
    new = tmp_path / "candidate.yaml"
    new.write_text(DEV_TEXT.replace("cpu: 4", "cpu: 6"))
    result = cli("render", "--diff", "--old", str(old), "--new", str(new))
    assert result.returncode == 0, result.stderr
    changed = [line for line in result.stdout.splitlines() if line.startswith(("~ ", "+ ", "! "))]
    assert changed == ["~ ClusterQueue cluster-queue (changed)"] * 3
    same = cli("render", "--diff", "--old", str(old), "--new", str(tmp_path / "x.yaml"))
    assert same.returncode == 2 and "x.yaml" in same.stderr


def test_an_unknown_base_names_the_revision_as_what_to_fix() -> None:
    result = cli("render", "--diff", "--stack", "dev", "--base", "nosuchrev")
    assert result.returncode == 2
    assert "invalid object name 'nosuchrev'" in result.stderr
    assert "'nosuchrev' is not a git revision of this checkout" in result.stderr
    assert "give a stack name" not in result.stderr  # the stack was never the problem
    assert "Traceback" not in result.stderr


def test_a_base_that_git_would_read_as_an_option_is_refused(tmp_path: Path) -> None:
    """`git show --output=FILE:...` would write FILE: a revision is never an option."""
    target = tmp_path / "written-by-git"
    # where `git show --output={target}:stacks/Pulumi.dev.yaml` would write
    (tmp_path / "written-by-git:stacks").mkdir()
    result = cli("render", "--diff", "--stack", "dev", f"--base=--output={target}")
    assert result.returncode == 2, result.stdout
    assert f"error: '--output={target}' starts with '-', which git would read" in result.stderr
    assert "Traceback" not in result.stderr
    assert list((tmp_path / "written-by-git:stacks").iterdir()) == []


def test_diff_shows_a_kind_cluster_replaced_when_its_kind_configuration_changes(
    dev: Path,
    tmp_path: Path,
) -> None:
    """A worker's Kubernetes version changes its node image: kind cannot change a cluster in
    place, so `up` deletes and creates it again (everything on it goes), and the diff says
    so though no object of the cluster differs. Another mirror URL is an update: no line."""
    document = yaml.safe_load(DEV_TEXT)
    worker = document["config"]["multikueue-fleet:workers"][0]
    worker["kubernetesVersion"] = "1.35"
    new = tmp_path / "Pulumi.dev.yaml"
    new.write_text(yaml.safe_dump(document, sort_keys=False))
    old_spec, new_spec = load_stack(str(dev))[0], load_stack(str(new))[0]
    lines = diff_fleets(old_spec, new_spec, "old", "new")
    text = "\n".join(lines)
    assert "== worker-worker1: changed" in text, text
    name = new_spec.workers[0].physical_name(new_spec.fleet_name)
    assert f"! kind cluster {name} (replaced: its kind configuration is fixed at creation)" in text
    assert "    # kind deletes the cluster and creates it again" in text
    assert re.search(r"^\s+-\s+image: kindest/node:v1\.36", text, re.M), text
    assert re.search(r"^\s+\+\s+image: kindest/node:v1\.35", text, re.M), text
    assert "worker-worker2" not in text and "== manager" not in text
    result = cli("render", "--diff", "--old", str(dev), "--new", str(new), "--exit-code")
    assert result.returncode == 1, result.stdout + result.stderr


def test_diff_shows_mirrors_changed_in_place_not_a_cluster_replaced(
    dev: Path, tmp_path: Path
) -> None:
    """A first registry mirror on a worker: every kind cluster reads containerd's hosts.toml
    folder from the start, so `up` rewrites the files on the running nodes; the diff shows a
    change of the cluster, not a replacement."""
    document = yaml.safe_load(DEV_TEXT)
    worker = document["config"]["multikueue-fleet:workers"][0]
    worker.setdefault("kind", {})["registryMirrors"] = {"docker.io": "http://mirror.example:5000"}
    new = tmp_path / "Pulumi.dev.yaml"
    new.write_text(yaml.safe_dump(document, sort_keys=False))
    old_spec, new_spec = load_stack(str(dev))[0], load_stack(str(new))[0]
    text = "\n".join(diff_fleets(old_spec, new_spec, "old", "new"))
    name = new_spec.workers[0].physical_name(new_spec.fleet_name)
    assert f"~ kind cluster {name} (changed)" in text, text
    assert "! kind cluster" not in text and " 0 replaced," in text, text
    assert re.search(r"^\s+\+\s+docker.io: http://mirror.example:5000", text, re.M), text
    assert "worker-worker2" not in text and "== manager" not in text
