"""`kueue.install: existing`: Kueue brought by someone else. The stack key and what it cannot
go with, what render shows (no Kueue install, the Configuration that Kueue must run with),
the program under the mock engine (no Kueue applied, a check before every object), and the
deploy-time check itself, against fakes and against a real kube-apiserver."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.checks.existing_kueue import (
    CLUSTER_PROFILE_API,
    KUEUE_API,
    required_apis,
    unserved,
)
from components.cli.render import EXPECTED_KUEUE_FILE, EXPECTED_KUEUE_KEY, diff_fleets
from components.objects.fleet import build_fleet
from components.objects.kueue_config import FLEET_KEYS, configuration
from components.resources.commands import CommandFailed
from components.resources.existing_kueue import (
    KueueApiCheckProvider,
    check_existing_kueue,
)
from tests.helpers.fleet_config import load, only, problems_of
from tests.helpers.pulumi_harness import (
    Run,
    before,
    kube_objects,
    run_program,
    synthetic_environment,
)
from tests.helpers.stack_texts import cli

# A fleet of clusters that already exist, whose Kueue a platform team installed (the
# contexts are those of the harness's kubeconfig).
BYO: dict[str, Any] = {
    "fleetName": "byo",
    "manager": {
        "provider": "existing",
        "kubernetesVersion": "1.35",
        "existing": {"context": "lab-manager"},
    },
    "workers": [
        {
            "name": "lab-a",
            "provider": "existing",
            "existing": {"context": "lab-a", "server": "https://lab-a.k8s.internal:6443"},
        },
        {
            "name": "lab-b",
            "provider": "existing",
            "existing": {"context": "lab-b", "server": "https://lab-b.k8s.internal:6443"},
        },
    ],
    "frameworks": ["batch", "jobset"],
    "kueue": {"install": "existing"},
    "dispatcher": {"image": "registry.example/mkf/dispatcher@sha256:" + "0" * 64},
}


def byo(**changes: Any) -> dict[str, Any]:
    config = json.loads(json.dumps(BYO))
    for key, value in changes.items():
        config[key] = {**config.get(key, {}), **value}
    return config


def byo_spec(**changes: Any) -> Any:
    spec, problems = load(byo(**changes), stack="byo")
    assert not [p for p in problems if p.severity == "error"], problems
    return spec


# --- the stack key ---------------------------------------------------------------------------


def test_kueue_is_managed_unless_the_stack_says_otherwise() -> None:
    config = byo()
    del config["kueue"]
    spec, _ = load(config, stack="byo")
    assert spec.kueue.install == "managed"
    assert byo_spec().kueue.install == "existing"


def test_an_unknown_install_mode_names_the_choices() -> None:
    problem = only(problems_of(byo(kueue={"install": "preinstalled"})), "kueue.install")
    assert "'preinstalled' is not one of managed, existing" in problem.message


def test_a_cluster_the_fleet_creates_cannot_have_kueue_already() -> None:
    config = byo()
    config["workers"][1] = {
        "name": "lab-b",
        "provider": "gke",
        "gke": {"project": "lab-project", "location": "europe-west4"},
    }
    problem = only(problems_of(config), "workers[1].provider")
    assert "creates this gke cluster" in problem.message
    assert "kueue.install: managed" in problem.hint


def test_gate_flags_need_the_deployment_the_fleet_does_not_manage() -> None:
    config = byo(kueue={"featureGateFlags": {"MultiKueueOrchestratedPreemption": True}})
    problem = only(problems_of(config), "kueue.featureGateFlags")
    assert "command line" in problem.message and "kueue.featureGates" in problem.hint


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("pluginMount", "initContainer"),
        ("pluginImage", "registry.example/secretreader:1"),
        ("kueueImage", "registry.example/kueue:custom"),
    ],
)
def test_cluster_profile_settings_that_edit_kueues_deployment_are_refused(
    key: str, value: str
) -> None:
    config = byo(credentials={"mode": "clusterProfile", "clusterProfile": {key: value}})
    problems = problems_of(config)
    problem = only(problems, f"credentials.clusterProfile.{key}")
    assert "does not manage" in problem.message
    assert "/plugins/bin/secretreader-plugin" in problem.hint


def test_cluster_profile_mode_needs_no_manager_version_when_kueue_is_existing() -> None:
    config = byo(credentials={"mode": "clusterProfile"})
    del config["manager"]["kubernetesVersion"]
    assert not [p for p in problems_of(config) if p.severity == "error"]
    # The same stack with a managed Kueue must choose the plugin mount from that version.
    config["kueue"] = {"install": "managed"}
    assert "plugin" in only(problems_of(config), "manager.kubernetesVersion").message


# --- what the builders and render give -----------------------------------------------------


def test_no_kueue_install_and_no_kueue_configmap_on_any_cluster() -> None:
    # ClusterProfile mode: not even the ClusterProfile CRD, which Kueue needs at its start.
    for cluster in build_fleet(byo_spec(credentials={"mode": "clusterProfile"})):
        assert [b.name for b in cluster.bundles] == ["jobset"]
        names = [o["metadata"]["name"] for o in cluster.objects if o["kind"] == "ConfigMap"]
        assert "kueue-manager-config" not in names
        assert cluster.expected_kueue_configuration is not None


def test_the_expected_configuration_is_the_fleets_part_of_the_managed_one() -> None:
    spec = byo_spec()
    for cluster in build_fleet(spec):
        full = configuration(spec, cluster.cluster)
        expected = cluster.expected_kueue_configuration
        assert expected == {k: v for k, v in full.items() if k in FLEET_KEYS}
        assert "health" not in expected and "leaderElection" not in expected
    manager = build_fleet(spec)[0].expected_kueue_configuration
    assert manager is not None
    # What the dispatcher needs from the platform's Kueue is in it.
    assert manager["multiKueue"]["dispatcherName"] == "multikueue-fleet/dispatcher"
    assert manager["featureGates"]["WorkloadRequestUseMergePatch"] is True


def test_a_managed_fleet_renders_as_before() -> None:
    config = byo(kueue={"install": "managed"})
    for cluster in build_fleet(load(config, stack="byo")[0]):
        assert cluster.bundles[0].name == "kueue"
        assert cluster.expected_kueue_configuration is None
        names = [o["metadata"]["name"] for o in cluster.objects if o["kind"] == "ConfigMap"]
        assert "kueue-manager-config" in names


def test_render_writes_the_expected_configuration_beside_the_objects(tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.byo.yaml"
    stack.write_text(
        yaml.safe_dump({"config": {f"multikueue-fleet:{k}": v for k, v in BYO.items()}})
    )
    out = tmp_path / "render"
    result = cli("render", "--stack", str(stack), "--out", str(out))
    assert result.returncode == 0, result.stderr
    for cluster in build_fleet(byo_spec()):
        folder = out / cluster.directory
        text = (folder / EXPECTED_KUEUE_FILE).read_text()
        assert text.startswith("# Kueue v0.19.2 on cluster")
        assert yaml.safe_load(text) == cluster.expected_kueue_configuration
        installs = yaml.safe_load((folder / "upstream.yaml").read_text())["installs"]
        assert [i["name"] for i in installs] == ["jobset"]
    listed = (out / ".multikueue-fleet-render").read_text()
    assert f"manager/{EXPECTED_KUEUE_FILE}" in listed


def test_render_diff_shows_a_change_of_the_expected_configuration() -> None:
    old = byo_spec()
    new = byo_spec(kueue={"install": "existing", "multiKueue": {"workerLostTimeout": "5m"}})
    lines = diff_fleets(old, new, "old", "new")
    assert f"~ {EXPECTED_KUEUE_KEY} (changed)" in lines
    assert "    +  workerLostTimeout: 5m" in lines
    # Only the manager runs MultiKueue: the workers' Configuration is unchanged.
    assert [line for line in lines if line.startswith("==")] == ["== manager: changed"]


def test_render_diff_shows_that_switching_a_deployed_stack_uninstalls_its_kueue() -> None:
    managed = load(byo(kueue={"install": "managed"}), stack="byo")[0]
    lines = diff_fleets(managed, byo_spec(), "old", "new")
    for cluster in ("manager", "worker-lab-a", "worker-lab-b"):
        section = lines[lines.index(f"== {cluster}: changed") :]
        assert "- upstream kueue (removed)" in section
        assert "- ConfigMap kueue-system/kueue-manager-config (removed)" in section
        assert f"+ {EXPECTED_KUEUE_KEY} (added)" in section


# --- the deploy-time check -------------------------------------------------------------------


def test_required_apis_follow_the_objects_each_cluster_gets() -> None:
    spec = byo_spec(credentials={"mode": "clusterProfile"})
    manager, worker, _ = build_fleet(spec)
    on_manager = required_apis(manager.objects)
    assert on_manager[CLUSTER_PROFILE_API] == ["ClusterProfile"]
    assert {"AdmissionCheck", "MultiKueueCluster", "MultiKueueConfig", "Workload"} <= set(
        on_manager[KUEUE_API]
    )
    on_worker = required_apis(worker.objects)
    assert set(on_worker) == {KUEUE_API}
    assert "MultiKueueCluster" not in on_worker[KUEUE_API]
    assert {"ClusterQueue", "LocalQueue", "ResourceFlavor", "Workload"} <= set(on_worker[KUEUE_API])


REQUIRED = {
    CLUSTER_PROFILE_API: ["ClusterProfile"],
    KUEUE_API: ["ClusterQueue", "MultiKueueCluster", "Workload"],
}


def test_unserved_says_what_is_missing_and_what_to_do() -> None:
    served = {KUEUE_API: {"ClusterQueue", "MultiKueueCluster", "Workload"}}
    assert unserved("m", "v0.19.2", REQUIRED, served | {CLUSTER_PROFILE_API: {"X"}}, True) == [
        "cluster 'm' serves no multicluster.x-k8s.io/v1alpha1 ClusterProfile, which "
        "credentials.mode clusterProfile needs: install the ClusterProfile CRD "
        "(cluster-inventory-api) and restart Kueue (it looks for the CRD only at start), or "
        "use credentials.mode: kubeconfigSecret"
    ]
    (line,) = unserved("m", "v0.19.2", {KUEUE_API: REQUIRED[KUEUE_API]}, {KUEUE_API: None}, True)
    assert line.startswith("cluster 'm' serves no kueue.x-k8s.io/v1beta2 API, so Kueue is not")
    assert "install Kueue v0.19.2" in line and "kueue.install: managed" in line
    (line,) = unserved(
        "m", "v0.19.2", {KUEUE_API: REQUIRED[KUEUE_API]}, {KUEUE_API: {"Workload"}}, True
    )
    assert "without ClusterQueue, MultiKueueCluster: its Kueue is not the v0.19.2" in line
    (line,) = unserved("m", "v0.19.2", {}, {}, False)
    assert "has no namespace kueue-system" in line
    all_there = served | {CLUSTER_PROFILE_API: {"ClusterProfile"}}
    assert unserved("m", "v0.19.2", REQUIRED, all_there, True) == []


class FakeApi:
    """A cluster whose APIs appear after `calls` look-ups, or raise `error` meanwhile."""

    def __init__(
        self, served: dict[str, set[str]], calls: int = 0, error: Exception | None = None
    ) -> None:
        self.served, self.calls, self.error, self.seen = served, calls, error, 0

    def kinds(self, api_version: str) -> set[str] | None:
        self.seen += 1
        if self.seen <= self.calls:
            if self.error is not None:
                raise self.error
            return None
        return self.served.get(api_version)

    def has_namespace(self, name: str) -> bool:
        return name == "kueue-system"


def test_the_check_waits_for_apis_that_appear_and_then_passes() -> None:
    api = FakeApi({KUEUE_API: {"ClusterQueue", "MultiKueueCluster", "Workload"}}, calls=3)
    required = {KUEUE_API: REQUIRED[KUEUE_API]}
    check_existing_kueue("m", "v0.19.2", required, api, timeout=5, interval=0.01)
    assert api.seen == 4


def test_the_check_fails_with_every_missing_thing_after_its_bound() -> None:
    api = FakeApi({})
    with pytest.raises(CommandFailed) as failed:
        check_existing_kueue("lab-a", "v0.19.2", REQUIRED, api, timeout=0.05, interval=0.01)
    lines = str(failed.value).splitlines()
    assert len(lines) == 2
    assert "serves no multicluster.x-k8s.io/v1alpha1 ClusterProfile" in lines[0]
    assert "serves no kueue.x-k8s.io/v1beta2 API" in lines[1]


def test_an_unreachable_cluster_is_named_with_its_server() -> None:
    api = FakeApi({}, calls=10**6, error=ConnectionRefusedError(111, "Connection refused"))
    with pytest.raises(CommandFailed, match=r"cluster 'lab-a' \(https://x:6443\) did not answer"):
        check_existing_kueue(
            "lab-a", "v0.19.2", REQUIRED, api, timeout=0.05, interval=0.01, server="https://x:6443"
        )


def test_the_check_runs_again_only_for_another_cluster_version_or_need() -> None:
    provider = KueueApiCheckProvider()
    olds = {
        "kubeconfig": "a",
        "cluster": "existing/https://m",
        "cluster_name": "m",
        "version": "v0.19.2",
        "required": REQUIRED,
    }
    assert not provider.diff("m", olds, dict(olds)).changes
    # New credentials for the same cluster: not another cluster.
    assert not provider.diff("m", olds, {**olds, "kubeconfig": "b"}).changes
    for key, value in [
        ("cluster", "existing/https://n"),
        ("version", "v0.19.3"),
        ("required", {KUEUE_API: ["Topology"]}),
    ]:
        assert provider.diff("m", olds, {**olds, key: value}).replaces == [key]


# --- the program under the mock engine ---------------------------------------------------------


@pytest.fixture(scope="module")
def byo_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    with synthetic_environment(tmp_path_factory.mktemp("byo")):
        config = byo(credentials={"mode": "clusterProfile"})
        engine = {f"multikueue-fleet:{k}": json.dumps(v) for k, v in config.items()}
        engine["multikueue-fleet:fleetName"] = "byo"
        return {
            mode: run_program("byo", engine, [], preview=mode == "preview")
            for mode in ("up", "preview")
        }


def test_the_program_applies_nothing_of_kueues(byo_runs: dict[str, Run]) -> None:
    for run in byo_runs.values():
        types = {r.typ for r in run.monitor.registered.values()}
        assert not [r for r in run.monitor.registered.values() if "kueue-manifests" in r.name]
        assert not [r for r in run.monitor.registered.values() if "clusterprofile-crd" in r.name]
        assert "multikueue-fleet:kueue:Install" not in types
        checks = run.monitor.of_type("multikueue-fleet:KueueApi")
        names = sorted(c.name for c in checks)
        assert names == ["lab-a-kueue-api", "lab-b-kueue-api", "manager-kueue-api"]


def test_every_object_waits_for_its_clusters_check(byo_runs: dict[str, Run]) -> None:
    monitor = byo_runs["up"].monitor
    check_of = {c.inputs["cluster_name"]: c for c in monitor.of_type("multikueue-fleet:KueueApi")}
    objects = kube_objects(monitor)
    assert objects
    for reg in objects:
        cluster = reg.name.split(":")[0]
        assert check_of[cluster].urn in before(monitor, reg.urn), reg.name
    for reg in monitor.registered.values():  # the job frameworks, installed as groups
        if reg.typ.endswith("yaml/v2:ConfigFile") or reg.typ.endswith("kustomize/v2:Directory"):
            cluster = reg.name.rsplit("-frameworks-", 1)[0]
            assert check_of[cluster].urn in before(monitor, reg.urn), reg.name


def test_the_check_asks_for_what_the_cluster_gets(byo_runs: dict[str, Run]) -> None:
    spec = byo_spec(credentials={"mode": "clusterProfile"})
    monitor = byo_runs["up"].monitor
    check_of = {c.inputs["cluster_name"]: c for c in monitor.of_type("multikueue-fleet:KueueApi")}
    for cluster in build_fleet(spec):
        inputs = check_of[cluster.cluster.name].inputs
        assert inputs["required"] == required_apis(cluster.objects)
        assert inputs["version"] == "v0.19.2"
        assert inputs["cluster"].startswith("existing/")
        assert "4dabf18193072939515e22adb298388d" in json.dumps(inputs["kubeconfig"])  # secret


def test_a_preview_registers_exactly_the_rendered_objects(byo_runs: dict[str, Run]) -> None:
    spec = byo_spec(credentials={"mode": "clusterProfile"})
    registered: dict[str, set[str]] = {}
    for reg in kube_objects(byo_runs["preview"].monitor):
        meta = reg.inputs["metadata"]
        where = f"{meta['namespace']}/" if meta.get("namespace") else ""
        registered.setdefault(reg.name.split(":")[0], set()).add(
            f"{reg.inputs['kind']} {where}{meta['name']}"
        )
    for cluster in build_fleet(spec):
        rendered = set()
        for o in cluster.objects:
            meta = o["metadata"]
            where = f"{meta['namespace']}/" if meta.get("namespace") else ""
            rendered.add(f"{o['kind']} {where}{meta['name']}")
        assert registered[cluster.cluster.name] == rendered, cluster.cluster.name


# --- against a real kube-apiserver ------------------------------------------------------------
