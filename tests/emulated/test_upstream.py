"""The edits made to Kueue's real v0.19.2 install manifest (the pinned release or its Go
module): our Configuration, gate flags, the restart hash, the plugin mount."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from components.cli.render import diff_fleets
from components.model.spec import FleetSpec
from components.objects.fleet import build_fleet
from components.objects.kueue_config import (
    CONFIG_KEY,
    CONFIG_MAP,
    RESTART_ANNOTATION,
    startup_hash,
)
from components.objects.kueue_install import kueue_objects, plugin_mount
from components.objects.manifests import documents
from tests.helpers.fleet_config import base, checked_spec, load, only
from tests.helpers.upstream_data import real_kueue_manifest, why_missing


@pytest.fixture(scope="module")
def manifest() -> str:
    text = real_kueue_manifest()
    if text is None:
        pytest.skip(why_missing())
    return text


def _deployment(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = [
        o
        for o in objects
        if o["kind"] == "Deployment" and o["metadata"]["name"] == "kueue-controller-manager"
    ]
    return deployment


def _manager_pod(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return _deployment(objects)["spec"]["template"]["spec"]


def _restart_hash(manifest: str, spec: FleetSpec, worker: bool = False) -> str:
    cluster = spec.workers[0] if worker else spec.manager
    template = _deployment(kueue_objects(manifest, spec, cluster))["spec"]["template"]
    return template["metadata"]["annotations"][RESTART_ANNOTATION]


def _profile_spec(mount: str, version: str = "1.34", image: str | None = None) -> FleetSpec:
    config = base()
    config["credentials"] = {
        "mode": "clusterProfile",
        "clusterProfile": {"pluginMount": mount, **({"kueueImage": image} if image else {})},
    }
    config["manager"]["kubernetesVersion"] = version
    return checked_spec(config)


def test_kueue_gets_our_configuration_and_nothing_else_changes(manifest: str) -> None:
    spec = checked_spec(base())
    shipped = documents(manifest)
    objects = kueue_objects(manifest, spec, spec.manager)
    assert len(objects) == len(shipped) == 79
    (config,) = [o for o in objects if o["kind"] == "ConfigMap"]
    assert (
        "dispatcherName: multikueue-fleet/dispatcher"
        in config["data"]["controller_manager_config.yaml"]
    )
    changed = [
        f"{o['kind']} {o['metadata']['name']}"
        for o, s in zip(objects, shipped, strict=True)
        if o != s
    ]
    assert changed == ["ConfigMap kueue-manager-config", "Deployment kueue-controller-manager"]
    container = _manager_pod(objects)["containers"][0]
    assert container["args"] == ["--config=/controller_manager_config.yaml", "--zap-log-level=2"]
    # Kueue reads the file through subPath: only a restart brings a new one in.
    assert {
        "mountPath": "/controller_manager_config.yaml",
        "name": "manager-config",
        "subPath": "controller_manager_config.yaml",
    } in container["volumeMounts"]


def test_our_configuration_keeps_every_setting_kueue_ships_that_the_fleet_does_not_own(
    manifest: str,
) -> None:
    """Whatever the shipped Configuration sets and the fleet has no reason to change (the
    reconciles each controller runs at once, client rates, probes, ports, leader election)
    comes through as shipped. A key left out is not "as shipped": Kueue's defaults.go sets
    no groupKindConcurrency, and controller-runtime then runs one reconcile at a time."""

    def configuration(objects: list[dict[str, Any]]) -> dict[str, Any]:
        (config_map,) = [
            o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == CONFIG_MAP
        ]
        return yaml.safe_load(config_map["data"][CONFIG_KEY])

    shipped = configuration(documents(manifest))
    spec = checked_spec(base())
    for cluster in (spec.manager, spec.workers[0]):
        ours = configuration(kueue_objects(manifest, spec, cluster))
        # The fleet's own: which frameworks run; the metrics add the ClusterQueue resource
        # gauges the dashboards read, on the shipped address.
        assert ours["integrations"] != shipped["integrations"]
        assert shipped["metrics"].items() <= ours["metrics"].items()
        kept = {k: v for k, v in shipped.items() if k not in ("integrations", "metrics")}
        assert kept == {k: ours.get(k) for k in kept}, cluster.name
    assert shipped["controller"]["groupKindConcurrency"]["Workload.kueue.x-k8s.io"] == 10


def test_feature_gates_as_flags_reach_the_container(manifest: str) -> None:
    config = base()
    config["kueue"]["featureGateFlags"] = {"PartialAdmission": False}
    spec = checked_spec(config)
    pod = _manager_pod(kueue_objects(manifest, spec, spec.manager))
    assert (
        pod["containers"][0]["args"][-1]
        == "--feature-gates=DisableWaitForPodsReady=true,PartialAdmission=false,"
        "WorkloadRequestUseMergePatch=true"
    )


def test_the_pod_template_keeps_upstreams_annotations_and_gets_the_hash(manifest: str) -> None:
    spec = checked_spec(base())
    annotations = _deployment(kueue_objects(manifest, spec, spec.manager))["spec"]["template"][
        "metadata"
    ]["annotations"]
    assert annotations["kubectl.kubernetes.io/default-container"] == "manager"
    assert len(annotations[RESTART_ANNOTATION]) == 16


@pytest.mark.parametrize(
    ("what", "change", "manager", "worker"),
    [
        ("dispatcher name", lambda c: c.__setitem__("dispatcher", {"name": "t/o"}), True, False),
        (
            "a gate",
            lambda c: c["kueue"].__setitem__("featureGates", {"PartialAdmission": False}),
            True,
            True,
        ),
        (
            "a gate as a flag",
            lambda c: c["kueue"].__setitem__("featureGateFlags", {"PartialAdmission": False}),
            True,
            True,
        ),
        ("a framework", lambda c: c.__setitem__("frameworks", ["batch", "jobset"]), True, True),
        (
            "the origin",
            lambda c: c["kueue"].__setitem__("multiKueue", {"origin": "o2"}),
            True,
            False,
        ),
        # base() leaves the manager out of waitForPodsReady (it runs LeaderWorkerSets)
        (
            "waitForPodsReady",
            lambda c: c["kueue"]["waitForPodsReady"].__setitem__("timeout", "1h"),
            False,
            True,
        ),
    ],
)
def test_what_kueue_reads_at_start_changes_the_pod_template(
    what: str, change: Any, manager: bool, worker: bool
) -> None:
    before = checked_spec(base())
    config = base()
    change(config)
    after = checked_spec(config)
    assert (startup_hash(before, before.manager) != startup_hash(after, after.manager)) == (
        manager
    ), what
    assert (
        startup_hash(before, before.workers[0]) != startup_hash(after, after.workers[0])
    ) == worker, what


def test_other_changes_leave_kueue_running() -> None:
    config = base()
    config["queues"]["clusterQueues"][0]["resourceGroups"][0]["flavors"][0]["resources"]["cpu"] = 8
    before, after = checked_spec(base()), checked_spec(config)
    for old, new in zip(before.clusters, after.clusters, strict=True):
        assert startup_hash(before, old) == startup_hash(after, new)


def test_render_diff_shows_the_rollout() -> None:
    config = base()
    config["dispatcher"] = {"name": "team/other"}
    lines = diff_fleets(checked_spec(base()), checked_spec(config), "old", "new")
    manager = (
        lines[: lines.index("== worker-worker1: changed")]
        if ("== worker-worker1: changed" in lines)
        else lines
    )
    assert "~ upstream kueue (changed)" in manager
    assert any(RESTART_ANNOTATION in line and line.lstrip().startswith("-") for line in manager)
    assert any(RESTART_ANNOTATION in line and line.lstrip().startswith("+") for line in manager)
    # the same hash the applied Deployment carries
    (kueue,) = [b for b in build_fleet(checked_spec(config))[0].bundles if b.name == "kueue"]
    assert kueue.as_dict()["podTemplateAnnotations"][RESTART_ANNOTATION]


def test_render_shows_the_hash_the_deployment_gets(manifest: str) -> None:
    spec = checked_spec(base())
    for cluster, objects in zip(spec.clusters, build_fleet(spec), strict=True):
        (kueue,) = [b for b in objects.bundles if b.name == "kueue"]
        template = _deployment(kueue_objects(manifest, spec, cluster))["spec"]["template"]
        assert (
            kueue.as_dict()["podTemplateAnnotations"][RESTART_ANNOTATION]
            == template["metadata"]["annotations"][RESTART_ANNOTATION]
        )


def test_plugin_by_image_volume_and_by_custom_image(manifest: str) -> None:
    spec = _profile_spec("auto", "1.35")
    assert plugin_mount(spec, spec.manager) == "imageVolume"
    assert plugin_mount(spec, spec.workers[0]) is None  # workers need no plugin
    pod = _manager_pod(kueue_objects(manifest, spec, spec.manager))
    assert {
        "name": "access-provider-plugins",
        "image": {
            "reference": "registry.k8s.io/cluster-inventory-api/secretreader:v0.1.3",
            "pullPolicy": "IfNotPresent",
        },
    } in pod["volumes"]
    custom = _profile_spec("customImage", "1.34", "example.com/kueue-with-plugin:v0.19.2")
    pod = _manager_pod(kueue_objects(manifest, custom, custom.manager))
    assert pod["containers"][0]["image"] == "example.com/kueue-with-plugin:v0.19.2"
    assert [v["name"] for v in pod["volumes"]] == ["visibility", "cert", "manager-config"]


def test_unexpected_kueue_manifests_are_refused(manifest: str) -> None:
    spec = checked_spec(base())
    without = [o for o in documents(manifest) if o["kind"] != "Deployment"]
    with pytest.raises(RuntimeError, match="no kueue-controller-manager Deployment"):
        kueue_objects(yaml.safe_dump_all(without), spec, spec.manager)


@pytest.mark.parametrize("mount", ["auto", "initContainer"])
def test_the_init_container_needs_a_plugin_image_named_by_the_user(mount: str) -> None:
    """The official secretreader image is FROM scratch (cluster-inventory-api
    hack/Dockerfile.plugin), and Kueue v0.19.2's alpine build of it is made only for its
    local kind e2e (Makefile 602-617, in no push target): below 1.35 there is no published
    image to default to, so the stack asks for one."""
    config = base()
    config["credentials"] = {"mode": "clusterProfile", "clusterProfile": {"pluginMount": mount}}
    config["manager"]["kubernetesVersion"] = "1.34"
    problem = only(load(config)[1], "credentials.clusterProfile.pluginImage")
    assert problem.severity == "error"
    assert "needs an image with sh and cp" in problem.message
    assert "no image that has them is published" in problem.message
    assert "hack/testing/secretreader/Dockerfile" in problem.hint
    assert "set pluginImage" in problem.hint


def test_own_plugin_image_is_used_as_given(manifest: str) -> None:
    config = base()
    config["credentials"] = {
        "mode": "clusterProfile",
        "clusterProfile": {"pluginImage": "example.com/secretreader-alpine:v1"},
    }
    config["manager"]["kubernetesVersion"] = "1.34"
    spec = checked_spec(config)
    pod = _manager_pod(kueue_objects(manifest, spec, spec.manager))
    (init,) = pod["initContainers"]
    assert init["image"] == "example.com/secretreader-alpine:v1"
    assert init["command"] == [
        "sh",
        "-c",
        'mkdir -p "$1" && cp "$2" "$1/"',
        "copy-plugin",
        "/plugins/bin",
        "/bin/secretreader-plugin",
    ]
    assert {"name": "access-provider-plugins", "emptyDir": {}} in pod["volumes"]
    assert {
        "name": "access-provider-plugins",
        "mountPath": "/plugins",
        "readOnly": True,
    } in pod["containers"][0]["volumeMounts"]


@pytest.mark.parametrize("mount", ["auto", "initContainer"])
def test_a_plugin_image_without_a_shell_is_refused_for_the_init_container(mount: str) -> None:
    config = base()
    config["credentials"] = {
        "mode": "clusterProfile",
        "clusterProfile": {
            "pluginMount": mount,
            "pluginImage": "registry.k8s.io/cluster-inventory-api/secretreader:v0.1.2",
        },
    }
    config["manager"]["kubernetesVersion"] = "1.34"
    problem = only(load(config)[1], "credentials.clusterProfile.pluginImage")
    assert problem.severity == "error"
    assert "no shell" in problem.message
    assert "set pluginImage" in problem.hint
    # the same image is fine where it is mounted as an image volume
    config["manager"]["kubernetesVersion"] = "1.35"
    config["credentials"]["clusterProfile"]["pluginMount"] = "auto"
    assert not [p for p in load(config)[1] if p.severity == "error"]


def test_trainer_leaves_its_bundled_jobset_to_the_jobset_install() -> None:
    """Trainer v2.2.1's manager overlay bundles JobSet v0.11.0; Kueue v0.19.2 is tested with
    JobSet v0.12.0 (go.mod), which the `jobset` framework installs beside it."""
    config = base()
    config["frameworks"] = ["batch", "jobset", "trainer"]
    spec = checked_spec(config)
    installs = {b.name: b for b in build_fleet(spec)[1].bundles}
    assert installs["jobset"].version == "v0.12.0"
    trainer = installs["kubeflow-trainer"]
    assert trainer.without == (r"jobset-.*", r"jobsets\.jobset\.x-k8s\.io")
    assert trainer.as_dict()["without"] == list(trainer.without)
    assert "without" not in installs["kubeflow-trainer-runtimes"].as_dict()


def test_kueue_deployment_is_applied_after_its_configmap(manifest: str) -> None:
    """One ConfigGroup applies Kueue's objects in parallel unless told: the Deployment
    names the ConfigMap in yaml/v2's depends-on annotation, so Kueue never starts on the
    release's default configuration."""
    spec = checked_spec(base())
    objects = kueue_objects(manifest, spec, spec.manager)
    annotations = _deployment(objects)["metadata"]["annotations"]
    assert (
        annotations["config.kubernetes.io/depends-on"]
        == "/namespaces/kueue-system/ConfigMap/kueue-manager-config"
    )
