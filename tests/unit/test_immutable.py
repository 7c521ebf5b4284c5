"""A change to an immutable field is replaced or refused, never a failed `up` half-way."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.checks.immutable import (
    change_problems,
    replace_on_changes,
    replacement_options,
)
from tests.helpers.fleet_config import base, load, tas

ROOT = Path(__file__).resolve().parents[2]


def _problems(old: dict[str, Any], new: dict[str, Any]) -> list[Any]:
    return change_problems(load(old)[0], load(new)[0])


def test_topology_levels_change_is_refused_with_the_way_around() -> None:
    new = tas()
    new["queues"]["topologies"][0]["levels"] = ["kubernetes.io/hostname"]
    (problem,) = _problems(tas(), new)
    assert problem.severity == "error"
    assert problem.path == "queues.topologies[0].levels"
    assert "Topology default: spec.levels cannot change" in problem.message
    assert "new name" in problem.hint


@pytest.mark.parametrize(
    ("field", "value"),
    [("nodeLabels", {"pool": "b"}), ("tolerations", [{"key": "k", "operator": "Exists"}])],
)
def test_flavor_with_a_topology_keeps_its_node_labels_and_tolerations(
    field: str, value: Any
) -> None:
    new = tas()
    new["queues"]["flavors"][0][field] = value
    (problem,) = _problems(tas(), new)
    assert problem.severity == "error"
    assert problem.path == f"queues.flavors[0].{field}"


def test_flavor_topology_cannot_be_dropped_once_set() -> None:
    new = tas()
    del new["queues"]["flavors"][0]["topology"]
    paths = {p.path for p in _problems(tas(), new) if p.severity == "error"}
    assert "queues.flavors[0].topologyName" in paths


def test_flavor_node_taints_and_flavors_without_topology_change_freely() -> None:
    new = tas()
    new["queues"]["flavors"][0]["nodeTaints"] = [{"key": "k", "effect": "NoSchedule"}]
    assert _problems(tas(), new) == []
    old, changed = base(), base()
    changed["queues"]["flavors"][0]["nodeLabels"] = {"pool": "b"}
    assert _problems(old, changed) == []


def test_local_queue_moving_to_another_cluster_queue_is_a_replacement() -> None:
    old = base()
    old["queues"]["clusterQueues"].append(copy.deepcopy(old["queues"]["clusterQueues"][0]))
    old["queues"]["clusterQueues"][1]["name"] = "cq2"
    new = copy.deepcopy(old)
    new["queues"]["localQueues"][0]["clusterQueue"] = "cq2"
    (problem,) = _problems(old, new)
    assert problem.severity == "warning"
    assert "LocalQueue team-a/lq will be replaced" in problem.message
    assert "pending workloads wait" in problem.hint


def test_pulumi_replaces_exactly_the_replaceable_kinds() -> None:
    assert replacement_options("kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue") == {
        "replace_on_changes": ["spec.clusterQueue"],
        "delete_before_replace": True,
    }
    assert replace_on_changes("ClusterProfile") == ["spec.clusterManager"]
    for kind in ("Topology", "ResourceFlavor", "AdmissionCheck", "ClusterQueue"):
        assert replacement_options(f"kubernetes:kueue.x-k8s.io/v1beta2:{kind}") is None


def test_render_diff_refuses_and_explains(tmp_path: Path) -> None:
    def stack(name: str, config: dict[str, Any]) -> Path:
        path = tmp_path / f"Pulumi.{name}.yaml"
        doc = {"config": {f"multikueue-fleet:{k}": v for k, v in config.items()}}
        path.write_text(yaml.safe_dump(doc))
        return path

    new = tas()
    new["queues"]["topologies"][0]["levels"] = ["kubernetes.io/hostname"]
    result = subprocess.run(
        [sys.executable, "-m", "components", "render", "--diff", "--old",
         str(stack("old", tas())), "--new", str(stack("new", new))],
        cwd=ROOT, capture_output=True, text=True, check=False,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert result.returncode == 2, result.stderr  # an error, not "differs" (1)
    assert "error: queues.topologies[0].levels" in result.stderr
    assert "cannot change" not in result.stdout


# --- checked against what is deployed, by preview, up and the CI driver ---------------------


def _guard_inputs(config: dict[str, Any], cluster: str = "worker1") -> dict[str, Any]:
    from components.objects.fleet import cluster_objects
    from components.resources.immutable import guarded_fields

    spec, problems = load(config)
    assert not [p for p in problems if p.severity == "error"], problems
    target = next(c for c in spec.clusters if c.name == cluster)
    return {"cluster": cluster, **guarded_fields(spec, cluster_objects(spec, target).objects)}


def test_the_deployed_fields_refuse_a_change_in_the_engines_check() -> None:
    """The resource's check gets the inputs of the last deployment: a Topology's levels
    changed since is a failure naming the config path and the way around; nothing else
    (quota, node taints) is."""
    from components.resources.immutable import ImmutableFieldsProvider

    provider = ImmutableFieldsProvider()
    deployed = _guard_inputs(tas())
    new = tas()
    new["queues"]["topologies"][0]["levels"] = ["kubernetes.io/hostname"]
    result = provider.check(deployed, _guard_inputs(new))
    (failure,) = result.failures
    assert failure.property == ""
    assert failure.reason.startswith(
        "queues.topologies[0].levels: Topology default: spec.levels cannot change from what "
        "is deployed: "
    )
    assert "fix: add a Topology under a new name" in failure.reason
    assert "\n" not in failure.reason
    # Allowed changes, a first deployment and the same inputs pass.
    allowed = tas()
    allowed["queues"]["clusterQueues"][0]["resourceGroups"][0]["flavors"][0]["resources"]["cpu"] = (
        99
    )
    assert provider.check(deployed, _guard_inputs(allowed)).failures == []
    assert provider.check({}, _guard_inputs(new)).failures == []
    assert provider.check(deployed, deployed).failures == []
    assert not provider.diff("w", deployed, deployed).changes


def test_the_admission_check_controller_is_guarded_on_the_manager() -> None:
    from components.resources.immutable import refusals

    deployed = _guard_inputs(base(), "manager")
    (key,) = [k for k in deployed["objects"] if k.startswith("AdmissionCheck ")]
    changed = copy.deepcopy(deployed)
    changed["objects"][key]["spec"]["controllerName"] = "example.com/other"
    (line,) = refusals(deployed, changed)
    assert f"{key}: spec.controllerName cannot change" in line


def test_the_stack_diff_workflow_fails_on_a_refused_change() -> None:
    """render --diff exits 2 on a change Kueue refuses; the pull-request workflow used to
    drop that with `|| true`. It still posts the comment, then fails."""
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "stack-diff.yaml").read_text())
    steps = workflow["jobs"]["diff"]["steps"]
    script = next(s["run"] for s in steps if s.get("name") == "Render diff per changed stack")
    assert "|| true" not in script
    assert 'render --diff --old "$base:$file" --new "$new" 2>&1 \\\n' in script
    names = [s.get("name") or s.get("uses") for s in steps]
    assert names[-1] == "Fail when a change cannot be applied"
    assert names.index("actions/github-script@v7") < len(names) - 1


def test_the_stack_diff_workflow_comments_on_a_changed_a_new_and_a_removed_stack(
    tmp_path: Path,
) -> None:
    """The workflow's own script, run in a pull request's checkout: a changed stack gets its
    diff, a new one its capacity from nothing (it used to get `validate` alone), a removed
    one every object removed (it used to fail the job: no such stack file)."""
    import shutil

    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "stack-diff.yaml").read_text())
    steps = workflow["jobs"]["diff"]["steps"]
    script = next(s["run"] for s in steps if s.get("name") == "Render diff per changed stack")
    script = script.replace("${{ github.base_ref }}", "main")
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("components", "controller", "schema"):
        if (ROOT / name).exists():
            shutil.copytree(ROOT / name, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "stacks").mkdir()
    for stack in ("dev", "ci"):
        shutil.copy(ROOT / "stacks" / f"Pulumi.{stack}.yaml", repo / "stacks")
    (repo / ".venv" / "bin").mkdir(parents=True)
    python = repo / ".venv" / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                       cwd=repo, check=True, capture_output=True)  # fmt: skip

    git("init", "-q", "-b", "main")
    git("add", "stacks", "components", "controller")
    git("commit", "-qm", "base")
    git("update-ref", "refs/remotes/origin/main", "HEAD")
    git("checkout", "-qb", "pr")
    dev = repo / "stacks" / "Pulumi.dev.yaml"
    dev.write_text(dev.read_text().replace("cpu: 4", "cpu: 6", 1))
    shutil.copy(ROOT / "stacks" / "Pulumi.dev.yaml", repo / "stacks" / "Pulumi.added.yaml")
    (repo / "stacks" / "Pulumi.ci.yaml").unlink()
    git("add", "-A", "stacks")
    git("commit", "-qm", "change")
    result = subprocess.run(["bash", "-c", script], cwd=repo, capture_output=True, text=True,
                            check=False, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr
    comment = (repo / "diff.md").read_text()
    assert not (repo / "refused.txt").exists(), comment
    sections = dict((part.split("\n", 1)[0], part) for part in comment.split("#### ")[1:])
    assert set(sections) == {"added", "ci", "dev"}, comment
    assert "the whole stack is new" in sections["added"]
    assert "manager (total)  -       8      new" in sections["added"]
    assert "the stack is removed" in sections["ci"] and "removed" in sections["ci"]
    assert "4       6" in sections["dev"] and "Summary:" in sections["dev"]


# --- what is deployed is read from the cluster when it answers -----------------------------


class _FakeKueueApi:
    """CustomObjectsApi.get_cluster_custom_object over a dict of live objects."""

    def __init__(self, objects: list[dict[str, Any]], fail: Exception | None = None) -> None:
        self.objects = {(o["kind"], o["metadata"]["name"]): o for o in objects}
        self.fail = fail
        self.plurals = {"topologies": "Topology", "resourceflavors": "ResourceFlavor"}
        self.plurals["admissionchecks"] = "AdmissionCheck"

    def get_cluster_custom_object(
        self, group: str, version: str, plural: str, name: str, **_: Any
    ) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException

        assert (group, version) == ("kueue.x-k8s.io", "v1beta2")
        if self.fail is not None:
            raise self.fail
        found = self.objects.get((self.plurals[plural], name))
        if found is None:
            raise ApiException(status=404, reason="Not Found")
        return {k: v for k, v in found.items() if k != "kind"}  # as the API returns it


def _live(config: dict[str, Any], cluster: str = "worker1") -> list[dict[str, Any]]:
    """The objects the fleet writes on that cluster, as the API server holds them."""
    from components.objects.fleet import cluster_objects

    spec, _ = load(config)
    target = next(c for c in spec.clusters if c.name == cluster)
    return copy.deepcopy(cluster_objects(spec, target).objects)


def _with_cluster(monkeypatch: pytest.MonkeyPatch, api: _FakeKueueApi | None) -> dict[str, Any]:
    import components.resources.immutable as immutable

    monkeypatch.setattr(immutable, "_cluster_api", lambda news: api)
    return {"kubeconfig": "apiVersion: v1\nkind: Config\n"}


def test_a_revert_to_what_the_cluster_holds_passes_though_the_state_is_ahead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The guard is recorded before the objects after it are applied: an `up` that failed
    there (Kueue refused the change: the first `up` of a stack deployed before the guard,
    which had no inputs to compare with) left the state with the new levels and the cluster
    with the old. Reverting to the cluster's levels must pass; compared with the state, it
    was refused, with no way around it. Kueue v0.19.2 apis/kueue/v1beta2/topology_types.go
    (levels: CEL `self == oldSelf`) compares with the stored object, as this does now."""
    from components.resources.immutable import ImmutableFieldsProvider

    changed = tas()
    changed["queues"]["topologies"][0]["levels"] = ["kubernetes.io/hostname"]
    state = _guard_inputs(changed)  # what the failed `up` recorded
    cluster = _FakeKueueApi(_live(tas()))  # what Kueue kept
    revert = {**_guard_inputs(tas()), **_with_cluster(monkeypatch, cluster)}
    assert ImmutableFieldsProvider().check(state, revert).failures == []
    # And the change itself is refused against the cluster, whatever the state says.
    again = {**_guard_inputs(changed), **_with_cluster(monkeypatch, cluster)}
    (failure,) = ImmutableFieldsProvider().check(state, again).failures
    assert "queues.topologies[0].levels: Topology default: spec.levels cannot change" in (
        failure.reason
    )


def test_the_first_up_of_a_stack_deployed_before_the_guard_is_checked_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No inputs in the state (the guard is new to the stack): the cluster still says what
    is deployed, so a refused change is refused before anything is applied."""
    from components.resources.immutable import ImmutableFieldsProvider

    changed = tas()
    changed["queues"]["flavors"][0]["nodeLabels"] = {"pool": "b"}
    news = {**_guard_inputs(changed), **_with_cluster(monkeypatch, _FakeKueueApi(_live(tas())))}
    (failure,) = ImmutableFieldsProvider().check({}, news).failures
    assert failure.reason.startswith("queues.flavors[0].nodeLabels: ResourceFlavor default-flavor")


def test_the_state_is_the_fallback_and_a_moved_local_queue_is_never_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cluster not answering, or not known yet (a preview of a new cluster): the state's
    inputs. Objects the cluster does not have: nothing to refuse. A LocalQueue moved to
    another ClusterQueue is replaced, not refused (its clusterQueue is immutable, kueue
    v0.19.2 apis/kueue/v1beta2/localqueue_types.go:35, but nothing holds a LocalQueue)."""
    from kubernetes.client.exceptions import ApiException

    from components.resources.immutable import ImmutableFieldsProvider

    provider = ImmutableFieldsProvider()
    deployed = _guard_inputs(tas())
    changed = tas()
    changed["queues"]["topologies"][0]["levels"] = ["kubernetes.io/hostname"]
    for api in (None, _FakeKueueApi([], fail=ApiException(status=403, reason="Forbidden"))):
        news = {**_guard_inputs(changed), **_with_cluster(monkeypatch, api)}
        assert len(provider.check(deployed, news).failures) == 1
    news = {**_guard_inputs(changed), **_with_cluster(monkeypatch, _FakeKueueApi([]))}
    assert provider.check(deployed, news).failures == []
    moved = tas()
    moved["queues"]["clusterQueues"].append(
        {**copy.deepcopy(moved["queues"]["clusterQueues"][0]), "name": "other"}
    )
    moved["queues"]["localQueues"][0]["clusterQueue"] = "other"
    live = _FakeKueueApi(_live(tas()))
    news = {**_guard_inputs(moved), **_with_cluster(monkeypatch, live)}
    assert provider.check(deployed, news).failures == []
    monkeypatch.undo()
    assert provider.check(deployed, _guard_inputs(moved)).failures == []


def test_an_unknown_kubeconfig_is_no_cluster_to_read() -> None:
    from pulumi.runtime import rpc

    from components.resources.immutable import _cluster_api

    assert _cluster_api({"kubeconfig": rpc.UNKNOWN}) is None
    assert _cluster_api({}) is None
