"""What each cluster gets, for every stack and for the features a stack can turn on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from components.checks.load import load_stack
from components.model import quantity
from components.model.frameworks import FRAMEWORKS
from components.model.spec import FleetSpec
from components.objects.fleet import APPLY_ORDER, ClusterObjects, build_fleet, bundles, object_key
from components.objects.kueue_config import CONFIG_KEY, config_map, configuration, feature_gate_args
from components.objects.labels import MANAGED_BY
from components.objects.worker_access import ALL_VERBS
from tests.helpers.fleet_config import as_deployed, base, find, fleet, load

STACK_DIR = Path(__file__).resolve().parents[2] / "stacks"
STACKS = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in STACK_DIR.glob("Pulumi.*.yaml"))
# Top-level keys of config.kueue.x-k8s.io/v1beta2 Configuration (research/kueue-api.md §2):
# Kueue decodes strictly, so nothing else may appear.
V1BETA2_KEYS = {
    "apiVersion",
    "kind",
    "namespace",
    "webhook",
    "leaderElection",
    "metrics",
    "health",
    "pprofBindAddress",
    "controller",
    "tls",
    "manageJobsWithoutQueueName",
    "managedJobsNamespaceSelector",
    "internalCertManagement",
    "waitForPodsReady",
    "clientConnection",
    "integrations",
    "multiKueue",
    "fairSharing",
    "admissionFairSharing",
    "resources",
    "featureGates",
    "objectRetentionPolicies",
    "visibilityServer",
}
MULTIKUEUE_KEYS = {
    "gcInterval",
    "origin",
    "workerLostTimeout",
    "dispatcherName",
    "incrementalDispatcherConfig",
    "externalFrameworks",
    "clusterProfile",
}


def test_every_stack_is_covered() -> None:
    assert set(STACKS) >= {"dev", "ci", "tas", "gke", "eks", "existing"}


@pytest.fixture(params=STACKS)
def stack(request: pytest.FixtureRequest) -> tuple[FleetSpec, list[ClusterObjects]]:
    spec, _ = load_stack(str(STACK_DIR / f"Pulumi.{request.param}.yaml"))
    return spec, build_fleet(spec)


def _kueue_config(cluster: ClusterObjects, spec: FleetSpec | None = None) -> dict[str, Any]:
    """The Configuration the cluster's Kueue runs with: the ConfigMap the fleet applies or,
    with `kueue.install: existing` (`spec` given), the one it expects (`render` writes it)."""
    found = find(cluster, "ConfigMap", "kueue-manager-config")
    if not found and spec is not None and spec.kueue.install == "existing":
        found = [config_map(spec, cluster.cluster)]
    (cm,) = found
    assert cm["metadata"]["namespace"] == "kueue-system"
    return yaml.safe_load(cm["data"][CONFIG_KEY])


def _quotas(cq: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {
        (f["name"], r["name"]): r["nominalQuota"]
        for g in cq["spec"]["resourceGroups"]
        for f in g["flavors"]
        for r in f["resources"]
    }


def test_stack_objects_are_well_formed(stack: tuple[FleetSpec, list[ClusterObjects]]) -> None:
    spec, clusters = stack
    assert [c.cluster.role for c in clusters] == ["manager"] + ["worker"] * len(spec.workers)
    for cluster in clusters:
        keys = [object_key(o) for o in cluster.objects]
        assert len(keys) == len(set(keys)), "an object is written twice"
        ranks = [APPLY_ORDER.index(o["kind"]) for o in cluster.objects]
        assert ranks == sorted(ranks), "objects are not in apply order"
        for obj in cluster.objects:
            assert obj["apiVersion"] and obj["metadata"]["name"]
            assert obj["metadata"]["labels"][MANAGED_BY] == "multikueue-fleet"
            if obj["apiVersion"].startswith("kueue.x-k8s.io"):
                assert obj["apiVersion"] == "kueue.x-k8s.io/v1beta2"
        if spec.kueue.install == "existing":
            # Someone else's Kueue: none of its release is installed.
            assert all(b.name != "kueue" for b in cluster.bundles), cluster.bundles
            continue
        assert cluster.bundles[0].name == "kueue"
        assert cluster.bundles[0].version == spec.kueue.version


def test_stack_kueue_configuration(stack: tuple[FleetSpec, list[ClusterObjects]]) -> None:
    spec, clusters = stack
    for cluster in clusters:
        config = _kueue_config(cluster, spec)
        assert set(config) <= V1BETA2_KEYS
        assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
        assert "batch/job" in config["integrations"]["frameworks"]
        if cluster.cluster.role == "manager":
            assert set(config["multiKueue"]) <= MULTIKUEUE_KEYS
            assert config["multiKueue"]["origin"] == spec.kueue.multikueue.origin
            assert config["multiKueue"]["dispatcherName"] == "multikueue-fleet/dispatcher"
            assert config["featureGates"]["WorkloadRequestUseMergePatch"] is True
        else:
            assert "multiKueue" not in config
            assert "WorkloadRequestUseMergePatch" not in config.get("featureGates", {})


def test_stack_multikueue_wiring(stack: tuple[FleetSpec, list[ClusterObjects]]) -> None:
    spec, clusters = stack
    manager, workers = clusters[0], clusters[1:]
    (check,) = find(manager, "AdmissionCheck")
    assert check["spec"] == {
        "controllerName": "kueue.x-k8s.io/multikueue",
        "parameters": {
            "apiGroup": "kueue.x-k8s.io",
            "kind": "MultiKueueConfig",
            "name": "multikueue",
        },
    }
    (mk_config,) = find(manager, "MultiKueueConfig", "multikueue")
    assert mk_config["spec"]["clusters"] == [w.name for w in spec.workers]
    for w in spec.workers:
        (mkc,) = find(manager, "MultiKueueCluster", w.name)
        assert w.labels.items() <= mkc["metadata"]["labels"].items()
        source = mkc["spec"]["clusterSource"]
        assert len(source) == 1
        if spec.credentials.mode == "clusterProfile":
            assert source == {"clusterProfileRef": {"name": w.name}}
            assert find(manager, "ClusterProfile", w.name)
        else:
            assert source == {
                "kubeConfig": {"location": f"{w.name}-kubeconfig", "locationType": "Secret"}
            }
            (secret,) = find(manager, "Secret", f"{w.name}-kubeconfig")
            assert secret["metadata"]["namespace"] == "kueue-system"
            assert set(secret["stringData"]) == {"kubeconfig"}
    for cq in find(manager, "ClusterQueue"):
        assert cq["spec"]["admissionChecksStrategy"] == {
            "admissionChecks": [{"name": "multikueue"}]
        }
        assert cq["spec"]["namespaceSelector"] == {}
    for worker in workers:
        assert not find(worker, "AdmissionCheck") and not find(worker, "MultiKueueCluster")
        for cq in find(worker, "ClusterQueue"):
            assert "admissionChecksStrategy" not in cq["spec"]


def test_stack_workers_mirror_the_manager(stack: tuple[FleetSpec, list[ClusterObjects]]) -> None:
    _, clusters = stack
    manager, workers = clusters[0], clusters[1:]

    def mirrored(c: ClusterObjects) -> set[str]:
        return {
            object_key(o)
            for o in c.objects
            if o["kind"] in ("Namespace", "LocalQueue", "ResourceFlavor", "Topology")
        }

    for worker in workers:
        assert mirrored(manager) <= mirrored(worker)
        assert {cq["metadata"]["name"] for cq in find(manager, "ClusterQueue")} == {
            cq["metadata"]["name"] for cq in find(worker, "ClusterQueue")
        }


def test_stack_manager_quota_is_the_workers_sum(
    stack: tuple[FleetSpec, list[ClusterObjects]],
) -> None:
    _, clusters = stack
    manager, workers = clusters[0], clusters[1:]
    for cq in find(manager, "ClusterQueue"):
        name = cq["metadata"]["name"]
        for key, value in _quotas(cq).items():
            total = quantity.total(
                [_quotas(find(w, "ClusterQueue", name)[0])[key] for w in workers]
            )
            assert quantity.equal(value, total), (name, key)


def test_stack_worker_rbac_covers_every_manager_integration(
    stack: tuple[FleetSpec, list[ClusterObjects]],
) -> None:
    spec, clusters = stack
    manager_frameworks = _kueue_config(clusters[0], spec)["integrations"]["frameworks"]
    for worker in clusters[1:]:
        (role,) = find(worker, "ClusterRole", "multikueue-fleet:multikueue")
        granted = {
            (g, r): set(rule["verbs"])
            for rule in role["rules"]
            for g in rule["apiGroups"]
            for r in rule["resources"]
        }
        assert granted[("kueue.x-k8s.io", "workloads")] == set(ALL_VERBS)
        assert granted[("kueue.x-k8s.io", "workloads/status")] == {"patch"}
        for integration in manager_frameworks:
            group, _, kind = integration.rpartition("/")
            plural = {"batch/job": "jobs"}.get(integration, kind + "s")
            patches = integration == "batch/job" or group == "ray.io"
            assert granted[(group, plural)] == {"create", "delete", "get", "watch"} | (
                {"patch"} if patches else set()
            ), integration
        # must-nots: no status of a job kind, no queue reads without quota automation
        assert [r for _, r in granted if r.endswith("/status")] == ["workloads/status"]
        assert ("kueue.x-k8s.io", "clusterqueues") not in granted
        (binding,) = find(worker, "ClusterRoleBinding", "multikueue-fleet:multikueue")
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "multikueue", "namespace": "kueue-system"}
        ]
        (token,) = find(worker, "Secret", "multikueue-token")
        assert token["type"] == "kubernetes.io/service-account-token"
        assert token["metadata"]["annotations"] == {
            "kubernetes.io/service-account.name": "multikueue"
        }


def test_dispatcher_reader_is_read_only() -> None:
    worker = fleet(base())["worker-worker1"]
    (role,) = find(worker, "ClusterRole", "multikueue-fleet:dispatcher-reader")
    assert role["rules"] == [
        {
            "apiGroups": ["kueue.x-k8s.io"],
            "resources": ["clusterqueues", "localqueues", "workloads"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    (sa,) = find(worker, "ServiceAccount", "dispatcher-reader")
    assert sa["metadata"]["namespace"] == "multikueue-fleet-system"
    assert find(worker, "Namespace", "multikueue-fleet-system")


def test_no_dispatcher_no_reader_and_kueue_keeps_its_own_dispatcher() -> None:
    config = base()
    config["dispatcher"] = {"enabled": False}
    clusters = fleet(config)
    assert not find(clusters["worker-worker1"], "ClusterRole", "multikueue-fleet:dispatcher-reader")
    mk = _kueue_config(clusters["manager"])
    assert "dispatcherName" not in mk["multiKueue"]
    assert mk["featureGates"] == {"DisableWaitForPodsReady": True}  # onManager: false in base()


@pytest.mark.parametrize(
    ("framework", "resources"),
    [
        ("kuberay", {"rayjobs", "rayclusters", "rayservices"}),
        ("training-operator", {"pytorchjobs", "tfjobs", "xgboostjobs", "paddlejobs", "jaxjobs"}),
        ("mpi", {"mpijobs"}),
        ("appwrapper", {"appwrappers"}),
        ("trainer", {"trainjobs"}),
    ],
)
def test_rbac_follows_the_enabled_frameworks(framework: str, resources: set[str]) -> None:
    config = base()
    config["frameworks"] = ["batch", "jobset", framework]
    clusters = fleet(config)
    (role,) = find(clusters["worker-worker1"], "ClusterRole", "multikueue-fleet:multikueue")
    granted = {r for rule in role["rules"] for r in rule["resources"]}
    assert resources <= granted
    assert "leaderworkersets" not in granted  # not enabled here, so not granted
    bundles = {b.name for b in clusters["worker-worker1"].bundles}
    # Trainer's bundled JobSet is left out of its install (test_upstream.py): JobSet comes
    # from the jobset framework, at the version Kueue is tested with.
    expected = {"kueue", "jobset"} | {b.name for b in FRAMEWORKS[framework].bundles}
    assert bundles == expected


def test_core_integrations_are_granted_when_they_have_a_multikueue_adapter() -> None:
    """kueue v0.19.2 has pod and statefulset MultiKueue adapters and none for deployment."""
    config = base()
    config["kueue"]["integrations"] = ["pod", "deployment", "statefulset"]
    role = find(fleet(config)["worker-worker1"], "ClusterRole", "multikueue-fleet:multikueue")[0]
    groups = {(rule["apiGroups"][0], r) for rule in role["rules"] for r in rule["resources"]}
    assert {("", "pods"), ("apps", "statefulsets")} <= groups
    assert ("apps", "deployments") not in groups
    assert ("", "pods/status") not in groups


def _worker_rights(config: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    (role,) = find(fleet(config)["worker-worker1"], "ClusterRole", "multikueue-fleet:multikueue")
    return {
        (g, r): set(rule["verbs"])
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
    }


def test_worker_rights_must_and_must_not() -> None:
    rights = _worker_rights(base())
    assert rights == {
        ("kueue.x-k8s.io", "workloads"): {"create", "delete", "get", "list", "update", "watch"},
        ("kueue.x-k8s.io", "workloads/status"): {"patch"},
        ("batch", "jobs"): {"create", "delete", "get", "patch", "watch"},
        ("jobset.x-k8s.io", "jobsets"): {"create", "delete", "get", "watch"},
        ("leaderworkerset.x-k8s.io", "leaderworkersets"): {"create", "delete", "get", "watch"},
    }


def test_queue_reads_only_with_manager_quota_automation() -> None:
    """multikueuecluster.go (v0.19.2) caches ClusterQueues/LocalQueues only under the gate."""
    config = base()
    config["kueue"]["featureGates"] = {
        "MultiKueueManagerQuotaAutomation": True,
        "MultiKueueOrchestratedPreemption": True,
    }
    rights = _worker_rights(config)
    assert rights[("kueue.x-k8s.io", "clusterqueues")] == {"list", "watch"}
    assert rights[("kueue.x-k8s.io", "localqueues")] == {"list", "watch"}
    # opening preemption gates updates the remote Workload's status
    assert rights[("kueue.x-k8s.io", "workloads/status")] == {"patch", "update"}


def test_other_external_framework_gets_manager_and_worker_rights() -> None:
    config = base()
    config["kueue"]["externalFrameworks"] = [{"name": "Workflow.v1alpha1.argoproj.io"}]
    clusters = fleet(config)
    manager = clusters["manager"]
    kueue = _kueue_config(manager)
    assert kueue["integrations"]["externalFrameworks"] == ["Workflow.v1alpha1.argoproj.io"]
    assert kueue["multiKueue"]["externalFrameworks"] == [{"name": "Workflow.v1alpha1.argoproj.io"}]
    (role,) = find(manager, "ClusterRole", "multikueue-fleet:kueue-external-frameworks")
    assert role["rules"] == [
        {
            "apiGroups": ["argoproj.io"],
            "resources": ["workflows", "workflows/status"],
            "verbs": ["get", "list", "patch", "update", "watch"],
        }
    ]
    (binding,) = find(manager, "ClusterRoleBinding", "multikueue-fleet:kueue-external-frameworks")
    assert binding["subjects"][0]["name"] == "kueue-controller-manager"
    worker_role = find(clusters["worker-worker1"], "ClusterRole", "multikueue-fleet:multikueue")[0]
    assert {
        "apiGroups": ["argoproj.io"],
        "resources": ["workflows"],
        "verbs": ["create", "delete", "get", "watch"],
    } in worker_role["rules"]


def test_worker_quota_overrides_and_manager_sum() -> None:
    config = base()
    config["workers"][0]["quotas"] = {"cq": {"default-flavor": {"cpu": 10, "memory": "1Gi"}}}
    clusters = fleet(config)
    assert _quotas(find(clusters["worker-worker1"], "ClusterQueue", "cq")[0]) == {
        ("default-flavor", "cpu"): "10",
        ("default-flavor", "memory"): "1Gi",
    }
    assert _quotas(find(clusters["worker-worker2"], "ClusterQueue", "cq")[0]) == {
        ("default-flavor", "cpu"): "4",
        ("default-flavor", "memory"): "8Gi",
    }
    assert _quotas(find(clusters["manager"], "ClusterQueue", "cq")[0]) == {
        ("default-flavor", "cpu"): "14",
        ("default-flavor", "memory"): "9Gi",
    }


def test_explicit_manager_quota_wins() -> None:
    config = base()
    config["queues"]["clusterQueues"][0]["managerQuota"] = {"default-flavor": {"cpu": 6}}
    manager = fleet(config)["manager"]
    assert _quotas(find(manager, "ClusterQueue", "cq")[0])[("default-flavor", "cpu")] == "6"


def test_cluster_queue_options_are_written() -> None:
    config = base()
    cq = config["queues"]["clusterQueues"][0]
    cq.update(
        cohort="research",
        queueingStrategy="StrictFIFO",
        preemption={"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
        flavorFungibility={"whenCanBorrow": "TryNextFlavor"},
        namespaceSelector={"matchLabels": {"team": "a"}},
    )
    cq["resourceGroups"][0]["flavors"][0]["resources"]["cpu"] = {
        "nominalQuota": 4,
        "borrowingLimit": 2,
        "lendingLimit": 1,
    }
    for name in ("manager", "worker-worker1"):
        spec = find(fleet(config)[name], "ClusterQueue", "cq")[0]["spec"]
        assert spec["cohortName"] == "research"
        assert spec["queueingStrategy"] == "StrictFIFO"
        assert spec["preemption"] == {
            "reclaimWithinCohort": "Any",
            "withinClusterQueue": "LowerPriority",
        }
        assert spec["flavorFungibility"] == {"whenCanBorrow": "TryNextFlavor"}
        assert spec["namespaceSelector"] == {"matchLabels": {"team": "a"}}
        cpu = spec["resourceGroups"][0]["flavors"][0]["resources"][0]
        assert cpu["borrowingLimit"] == "2" and cpu["lendingLimit"] == "1"


def test_topology_aware_flavor() -> None:
    spec, _ = load_stack(str(STACK_DIR / "Pulumi.tas.yaml"))
    for cluster in build_fleet(spec):
        (topology,) = find(cluster, "Topology", "default")
        assert topology["spec"]["levels"][-1] == {"nodeLabel": "kubernetes.io/hostname"}
        (flavor,) = find(cluster, "ResourceFlavor", "tas-flavor")
        assert flavor["spec"]["topologyName"] == "default"
        assert flavor["spec"]["nodeLabels"] == {"cloud.provider.com/node-group": "tas-node"}


def test_cluster_profile_mode() -> None:
    spec, _ = load_stack(str(STACK_DIR / "Pulumi.existing.yaml"))
    manager = build_fleet(spec)[0]
    config = _kueue_config(manager)
    assert config["featureGates"]["MultiKueueClusterProfile"] is True
    assert config["multiKueue"]["clusterProfile"] == {
        "accessProviders": [
            {
                "name": "secretreader",
                "execConfig": {
                    "apiVersion": "client.authentication.k8s.io/v1",
                    "command": "/plugins/bin/secretreader-plugin",
                    "provideClusterInfo": True,
                    "interactiveMode": "Never",
                },
            }
        ]
    }
    (role,) = find(manager, "Role", "multikueue-fleet-clusterprofile-tokens")
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": ["lab-a-token", "lab-b-token"],
            "verbs": ["get"],
        }
    ]
    profile = find(manager, "ClusterProfile", "lab-a")[0]
    assert profile["apiVersion"] == "multicluster.x-k8s.io/v1alpha1"
    assert profile["metadata"]["namespace"] == "kueue-system"
    assert profile["spec"]["clusterManager"] == {"name": "multikueue-fleet"}
    assert "status" not in profile
    assert not find(manager, "Secret", "lab-a-kubeconfig")
    assert "clusterprofile-crd" in {b.name for b in manager.bundles}


def test_feature_gates_as_flags_move_derived_gates_along() -> None:
    config = base()
    config["kueue"]["featureGateFlags"] = {"PartialAdmission": False}
    spec, _ = load(config)
    manager = configuration(spec, spec.manager)
    assert "featureGates" not in manager
    assert feature_gate_args(spec, spec.manager) == [
        "--feature-gates=DisableWaitForPodsReady=true,PartialAdmission=false,"
        "WorkloadRequestUseMergePatch=true"
    ]
    assert feature_gate_args(spec, spec.workers[0]) == ["--feature-gates=PartialAdmission=false"]


def test_wait_for_pods_ready_off_uses_the_opt_out_gate() -> None:
    config = base()
    config["kueue"] = {"waitForPodsReady": {"enabled": False}}
    spec, _ = load(config)
    for cluster in spec.clusters:
        kueue = configuration(spec, cluster)
        assert "waitForPodsReady" not in kueue
        assert kueue["featureGates"]["DisableWaitForPodsReady"] is True


def test_wait_for_pods_ready_settings() -> None:
    config = base()
    config["kueue"] = {
        "waitForPodsReady": {
            "timeout": "1h",
            "blockAdmission": True,
            "recoveryTimeout": "5m",
            "requeuingStrategy": {"timestamp": "Creation", "backoffLimitCount": 3},
        }
    }
    spec, _ = load(config)
    assert configuration(spec, spec.workers[0])["waitForPodsReady"] == {
        "timeout": "1h",
        "blockAdmission": True,
        "requeuingStrategy": {
            "timestamp": "Creation",
            "backoffBaseSeconds": 60,
            "backoffMaxSeconds": 3600,
            "backoffLimitCount": 3,
        },
        "recoveryTimeout": "5m",
    }


def test_user_kubeconfig_replaces_the_placeholder() -> None:
    config = base()
    config["workerKubeconfigs"] = {"worker2": "apiVersion: v1\nkind: Config\n"}
    spec, _ = load(config, secret_keys=frozenset({"workerKubeconfigs"}))
    manager = build_fleet(spec)[0]
    assert (
        find(manager, "Secret", "worker2-kubeconfig")[0]["stringData"]["kubeconfig"]
        == "apiVersion: v1\nkind: Config\n"
    )
    assert (
        "<secret:" in find(manager, "Secret", "worker1-kubeconfig")[0]["stringData"]["kubeconfig"]
    )


def test_default_fleet_when_keys_are_omitted() -> None:
    spec, problems = load({}, stack="dev")
    # the default frameworks include LeaderWorkerSet: the manager does not wait for PodsReady
    assert [(p.path, p.severity) for p in problems] == [("kueue.waitForPodsReady", "note")]
    assert [c.name for c in spec.clusters] == ["manager", "worker1", "worker2"]
    assert {c.provider for c in spec.clusters} == {"kind"}
    assert spec.manager.kind is not None and "@sha256:" in spec.manager.kind.node_image
    assert spec.kueue.version == "v0.19.2"
    assert spec.kueue.multikueue.origin == "mkf-dev"
    assert spec.queues.local_queues[0].name == "user-queue"


def test_inventory_rights_only_when_asked_for(tmp_path: Path) -> None:
    from controller.settings import load_settings

    config = base()
    plain = fleet(config)["manager"]
    (role,) = find(plain, "ClusterRole", "multikueue-fleet:dispatcher")
    assert not any(
        "create" in r["verbs"] and "multikueueclusters" in r["resources"] for r in role["rules"]
    )
    assert not find(plain, "Role", "multikueue-fleet-dispatcher") or all(
        r["metadata"]["namespace"] != "kueue-system"
        for r in find(plain, "Role", "multikueue-fleet-dispatcher")
    )
    # Inventory clusters are ClusterProfiles: only ClusterProfile mode connects them.
    config["dispatcher"] = {"inventory": True}
    config["credentials"] = {"mode": "clusterProfile"}
    manager = fleet(config)["manager"]
    # The controller is told, so it watches profiles and reaches joined clusters by token.
    for objects, expected in ((plain, False), (manager, True)):
        (settings_map,) = find(objects, "ConfigMap", "multikueue-fleet-dispatcher")
        (tmp_path / "config.yaml").write_text(as_deployed(settings_map["data"]["config.yaml"]))
        assert load_settings(tmp_path / "config.yaml").inventory is expected
    (role,) = find(manager, "ClusterRole", "multikueue-fleet:dispatcher")
    assert {
        "apiGroups": ["kueue.x-k8s.io"],
        "resources": ["multikueueclusters", "multikueueconfigs"],
        "verbs": ["create", "patch", "delete"],
    } in role["rules"]
    (profiles,) = [
        r
        for r in find(manager, "Role", "multikueue-fleet-dispatcher")
        if r["metadata"]["namespace"] == "kueue-system"
    ]
    assert {
        "apiGroups": ["multicluster.x-k8s.io"],
        "resources": ["clusterprofiles"],
        "verbs": ["get", "list", "watch"],
    } in profiles["rules"]


@pytest.mark.parametrize(
    ("kind", "plural"),
    [
        ("Workflow", "workflows"),
        ("TrainingPolicy", "trainingpolicies"),
        ("Gateway", "gateways"),
        ("Index", "indexes"),
        ("Ingress", "ingresses"),
        ("Batch", "batches"),
    ],
)
def test_an_external_frameworks_plural_is_the_one_crd_generators_write(
    kind: str, plural: str
) -> None:
    """Not kind + "s" ("trainingpolicys" would grant rights on nothing): the plural
    controller-tools gives the CRD; `resource` still overrides it."""
    config = base()
    config["kueue"]["externalFrameworks"] = [{"name": f"{kind}.v1.example.com"}]
    (role,) = find(
        fleet(config)["manager"], "ClusterRole", "multikueue-fleet:kueue-external-frameworks"
    )
    assert role["rules"][0]["resources"] == [plural, f"{plural}/status"]


def test_the_dispatcher_keeps_a_lost_worker_as_long_as_kueue_does(tmp_path: Path) -> None:
    """kueue.multiKueue.workerLostTimeout reaches the dispatcher's settings: a nomination on
    a worker it cannot reach is kept that long, not dropped after a few failed probes."""
    from controller.settings import load_settings

    config = base()
    for written, seconds in ((None, 900.0), ("5m", 300.0), ("1h30m", 5400.0)):
        if written:
            config["kueue"]["multiKueue"] = {"workerLostTimeout": written}
        (settings_map,) = find(fleet(config)["manager"], "ConfigMap", "multikueue-fleet-dispatcher")
        (tmp_path / "config.yaml").write_text(settings_map["data"]["config.yaml"])
        assert load_settings(tmp_path / "config.yaml").worker_lost_timeout_seconds == seconds


def test_a_framework_is_installed_after_those_it_requires() -> None:
    """Written trainer first, JobSet's bundle still comes before Trainer's."""
    config = base()
    config["frameworks"] = ["batch", "trainer", "leaderworkerset", "jobset"]
    spec, problems = load(config)
    assert not [p for p in problems if p.severity == "error"], problems
    names = [b.name for b in bundles(spec, spec.manager)]
    assert names.index("jobset") < names.index("kubeflow-trainer")
    # JobSet moves up to just before Trainer; the rest keep the order written.
    assert names.index("kubeflow-trainer") < names.index("leaderworkerset")
