"""Every validation rule: the problem is found, at the right config path, with its text."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.checks.clusters import validate_together
from components.model import kueue_gates
from components.model.spec import load_spec
from tests.helpers.fleet_config import KUBECONFIG, base, only, problems_of

Mutate = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Mutate:
    """A mutation that sets a dotted path ("workers.0.name") in the config."""

    def mutate(config: dict[str, Any]) -> None:
        node: Any = config
        keys = [int(k) if k.isdigit() else k for k in path.split(".")]
        for k in keys[:-1]:
            if isinstance(k, str) and k not in node:
                node[k] = {}
            node = node[k]
        node[keys[-1]] = value

    return mutate


def _seq(*mutations: Mutate) -> Mutate:
    def mutate(config: dict[str, Any]) -> None:
        for m in mutations:
            m(config)

    return mutate


CQ = "queues.clusterQueues.0"
FLAVOR0 = f"{CQ}.resourceGroups.0.flavors.0"
ALL_TAS_OFF = {n: False for n in kueue_gates.needs("TopologyAwareScheduling")}

CASES: list[tuple[str, Mutate, str, str, str]] = [
    (
        "inventory outside ClusterProfile mode",
        _set("dispatcher", {"inventory": True}),
        "dispatcher.inventory",
        "stays inactive",
        "credentials.mode: clusterProfile",
    ),
    # (id, mutation, expected path, text in message, text in hint)
    ("unknown top-level key", _set("workerz", []), "workerz", "unknown key", "'workers'"),
    (
        "unknown nested key",
        _set("manager.kubernetesVersoin", "1.35"),
        "manager.kubernetesVersoin",
        "unknown key",
        "'kubernetesVersion'",
    ),
    ("list expected", _set("workers", "worker1"), "workers", "expected a list", "YAML list"),
    ("bad provider", _set("manager.provider", "kinda"), "manager.provider", "not one of", "'kind'"),
    (
        "required context",
        _set("workers.0", {"name": "w", "provider": "existing"}),
        "workers[0].existing.context",
        "is required",
        "context",
    ),
    (
        "bad k8s version",
        _set("manager.kubernetesVersion", "latest"),
        "manager.kubernetesVersion",
        "not a Kubernetes version",
        "major.minor",
    ),
    (
        "kind version without image",
        _set("manager.kubernetesVersion", "1.29"),
        "manager.kubernetesVersion",
        "no node image pinned",
        "1.36",
    ),
    (
        "settings of another provider",
        _set("manager.gke", {"project": "p"}),
        "manager.gke",
        "settings for provider 'gke'",
        "provider: gke",
    ),
    (
        "unknown framework",
        _set("workers.1.frameworks", ["batch", "jobset", "leaderworkerset", "rayy"]),
        "workers[1].frameworks[3]",
        "unknown framework 'rayy'",
        "known frameworks",
    ),
    (
        "framework missing on worker",
        _set("workers.0.frameworks", ["batch", "jobset"]),
        "workers[0].frameworks",
        "'leaderworkerset' is enabled on the manager but not installed on worker 'worker1'",
        "inactive",
    ),
    (
        "framework dependency",
        _set("manager.frameworks", ["batch", "trainer"]),
        "manager.frameworks",
        "'trainer' needs 'jobset'",
        "add 'jobset'",
    ),
    (
        "unknown integration",
        _set("kueue.integrations", ["ray.io/rayjobb"]),
        "kueue.integrations[0]",
        "is not a Kueue integration",
        "'ray.io/rayjob'",
    ),
    (
        "integration without its operator",
        _set("kueue.integrations", ["kubeflow.org/mpijob"]),
        "kueue.integrations[0]",
        "needs framework 'mpi' on cluster 'manager'",
        "manager.frameworks",
    ),
    (
        "unknown gate",
        _set("kueue.featureGates", {"MultiKueuee": True}),
        "kueue.featureGates.MultiKueuee",
        "unknown feature gate",
        "'MultiKueue'",
    ),
    (
        "removed gate",
        _set("kueue.featureGates", {"MultiKueueBatchJobWithManagedBy": True}),
        "kueue.featureGates.MultiKueueBatchJobWithManagedBy",
        "does not exist in Kueue 0.19",
        "delete it",
    ),
    (
        "locked gate changed",
        _set("kueue.featureGateFlags", {"MultiKueueAllowInsecureKubeconfigs": True}),
        "kueue.featureGateFlags.MultiKueueAllowInsecureKubeconfigs",
        "locked to false",
        "delete it",
    ),
    (
        "gate not a bool",
        _set("kueue.featureGates", {"MultiKueue": "yes"}),
        "kueue.featureGates.MultiKueue",
        "expected true or false",
        "",
    ),
    (
        "TAS off alone",
        _set("kueue.featureGates", {"TopologyAwareScheduling": False}),
        "kueue.featureGates.TopologyAwareScheduling",
        "TASFailedNodeReplacement",
        "set each",
    ),
    (
        "gates in config and flags",
        _seq(
            _set("kueue.featureGates", {"MultiKueue": True}),
            _set("kueue.featureGateFlags", {"PartialAdmission": True}),
        ),
        "kueue.featureGateFlags",
        "both in the config and as --feature-gates",
        "kueue.featureGates",
    ),
    (
        "too many workers",
        _set("workers", [{"name": f"w{i}"} for i in range(21)]),
        "workers",
        "21 workers",
        "split the fleet",
    ),
    ("no workers", _set("workers", []), "workers", "at least one worker", ""),
    (
        "duplicate cluster name",
        _set("workers.1.name", "worker1"),
        "workers[1].name",
        "duplicate cluster name 'worker1' (also at workers[0].name)",
        "",
    ),
    (
        "non-DNS cluster name",
        _set("workers.0.name", "Worker_1"),
        "workers[0].name",
        "not a valid DNS label",
        "lower-case",
    ),
    (
        "kind name too long",
        _set("fleetName", "f" * 45),
        "manager.name",
        "longer than 49",
        "shorten",
    ),
    (
        "bad label",
        _set("workers.0.labels", {"region": "not ok!"}),
        "workers[0].labels.region",
        "not a valid label value",
        "",
    ),
    (
        "kind worker, cloud manager",
        _set(
            "manager",
            {"provider": "gke", "gke": {"project": "my-project", "location": "europe-west4"}},
        ),
        "workers[0].provider",
        "cannot be reached by a gke manager",
        "same Docker host",
    ),
    (
        "plain http server",
        _set(
            "workers.0",
            {
                "name": "w",
                "provider": "existing",
                "existing": {"context": "c", "server": "http://x"},
            },
        ),
        "workers[0].existing.server",
        "https:// URL",
        "",
    ),
    (
        "bad ClusterQueue name",
        _set(f"{CQ}.name", "CQ!"),
        "queues.clusterQueues[0].name",
        "not a valid Kubernetes object name",
        "",
    ),
    (
        "unknown flavor",
        _set(f"{FLAVOR0}.name", "gpu"),
        "queues.clusterQueues[0].resourceGroups[0].flavors[0].name",
        "no ResourceFlavor named 'gpu'",
        "queues.flavors",
    ),
    (
        "covered resources mismatch",
        _set(f"{FLAVOR0}.resources", {"cpu": 4}),
        "queues.clusterQueues[0].resourceGroups[0].flavors[0].resources",
        "exactly the covered resources (cpu, memory)",
        "",
    ),
    (
        "bad quantity",
        _set(f"{FLAVOR0}.resources.cpu", "four"),
        "queues.clusterQueues[0].resourceGroups[0].flavors[0].resources.cpu",
        "nominalQuota 'four' is not a Kubernetes quantity",
        "32Gi",
    ),
    (
        "limit without cohort",
        _set(f"{FLAVOR0}.resources.cpu", {"nominalQuota": 4, "borrowingLimit": 2}),
        "queues.clusterQueues[0].resourceGroups[0].flavors[0].resources.cpu",
        "need a cohort",
        "cohort",
    ),
    (
        "borrow without reclaim",
        _set(f"{CQ}.preemption", {"borrowWithinCohort": {"policy": "LowerPriority"}}),
        "queues.clusterQueues[0].preemption.borrowWithinCohort",
        "reclaimWithinCohort",
        "",
    ),
    (
        "bad preemption choice",
        _set(f"{CQ}.preemption", {"withinClusterQueue": "Always"}),
        "queues.clusterQueues[0].preemption.withinClusterQueue",
        "not one of",
        "",
    ),
    (
        "no resource groups",
        _set(f"{CQ}.resourceGroups", []),
        "queues.clusterQueues[0].resourceGroups",
        "at least one resource group",
        "",
    ),
    (
        "LocalQueue to unknown ClusterQueue",
        _set("queues.localQueues.0.clusterQueue", "nope"),
        "queues.localQueues[0].clusterQueue",
        "no ClusterQueue named 'nope'",
        "",
    ),
    (
        "LocalQueue in reserved namespace",
        _set("queues.localQueues.0.namespace", "kube-system"),
        "queues.localQueues[0].namespace",
        "reserved and is not mirrored",
        "namespace of your own",
    ),
    (
        "LocalQueue namespace not a DNS label",
        _set("queues.localQueues.0.namespace", "Team_A"),
        "queues.localQueues[0].namespace",
        "not a valid DNS label",
        "",
    ),
    (
        "LocalQueue bad name",
        _set("queues.localQueues.0.name", "User Queue"),
        "queues.localQueues[0].name",
        "not a valid Kubernetes object name",
        "",
    ),
    (
        "worker quota, unknown ClusterQueue",
        _set("workers.0.quotas", {"nope": {}}),
        "workers[0].quotas.nope",
        "no ClusterQueue named 'nope'",
        "",
    ),
    (
        "worker quota, unknown flavor",
        _set("workers.0.quotas", {"cq": {"gpu": {"cpu": 1}}}),
        "workers[0].quotas.cq.gpu",
        "has no flavor 'gpu'",
        "default-flavor",
    ),
    (
        "worker quota, uncovered resource",
        _set("workers.0.quotas", {"cq": {"default-flavor": {"nvidia.com/gpu": 1}}}),
        "workers[0].quotas.cq.default-flavor.nvidia.com/gpu",
        "does not cover",
        "cpu, memory",
    ),
    (
        "manager quota differs",
        _set(f"{CQ}.managerQuota", {"default-flavor": {"cpu": 6}}),
        "queues.clusterQueues[0].managerQuota.default-flavor.cpu",
        "admits 6 of cpu in 'default-flavor' but the workers together offer 8",
        "managerQuota",
    ),
    (
        "unknown topology",
        _set(
            "queues.flavors.0",
            {"name": "default-flavor", "topology": "t", "nodeLabels": {"a": "b"}},
        ),
        "queues.flavors[0].topology",
        "no Topology named 't'",
        "queues.topologies",
    ),
    (
        "topology flavor without node labels",
        _seq(
            _set("queues.topologies", [{"name": "t", "levels": ["kubernetes.io/hostname"]}]),
            _set("queues.flavors.0", {"name": "default-flavor", "topology": "t"}),
        ),
        "queues.flavors[0].nodeLabels",
        "at least one node label",
        "",
    ),
    (
        "hostname not last",
        _set("queues.topologies", [{"name": "t", "levels": ["kubernetes.io/hostname", "rack"]}]),
        "queues.topologies[0].levels",
        "may only be the last level",
        "",
    ),
    (
        "TAS off with a topology flavor",
        _seq(
            _set("queues.topologies", [{"name": "t", "levels": ["kubernetes.io/hostname"]}]),
            _set(
                "queues.flavors.0",
                {"name": "default-flavor", "topology": "t", "nodeLabels": {"a": "b"}},
            ),
            _set("kueue.featureGates", {"TopologyAwareScheduling": False, **ALL_TAS_OFF}),
        ),
        "kueue.featureGates.TopologyAwareScheduling",
        "a flavor uses a topology",
        "",
    ),
    (
        "unsupported Kueue",
        _set("kueue.version", "v0.18.6"),
        "kueue.version",
        "not supported",
        "v0.19.x",
    ),
    (
        "bad duration",
        _set("kueue.multiKueue", {"gcInterval": "one minute"}),
        "kueue.multiKueue.gcInterval",
        "not a duration",
        "1h30m",
    ),
    (
        "bad origin",
        _set("kueue.multiKueue", {"origin": "my origin"}),
        "kueue.multiKueue.origin",
        "not a valid label value",
        "",
    ),
    (
        "external framework format",
        _set("kueue.externalFrameworks", ["pipelinerun.tekton.dev"]),
        "kueue.externalFrameworks[0].name",
        "is not Kind.version.group",
        "PipelineRun.v1.tekton.dev",
    ),
    (
        "tekton preset removed",
        _set("frameworks", ["batch", "tekton"]),
        "frameworks[1]",
        "tekton preset was removed",
        "remove 'tekton'",
    ),
    (
        "image volume on old Kubernetes",
        _seq(
            _set(
                "credentials",
                {"mode": "clusterProfile", "clusterProfile": {"pluginMount": "imageVolume"}},
            ),
            _set("manager.kubernetesVersion", "1.34"),
        ),
        "credentials.clusterProfile.pluginMount",
        "need Kubernetes 1.35 or newer",
        "initContainer",
    ),
    (
        "profile mode, gate off",
        _seq(
            _set("credentials", {"mode": "clusterProfile"}),
            _set("kueue.featureGates", {"MultiKueueClusterProfile": False}),
        ),
        "kueue.featureGates.MultiKueueClusterProfile",
        "needs the MultiKueueClusterProfile gate",
        "kubeconfigSecret",
    ),
    (
        "profile mode, unknown manager version",
        _seq(
            _set("credentials", {"mode": "clusterProfile"}),
            _set("manager", {"provider": "existing", "existing": {"context": "m"}}),
            _set("workers", [{"name": "w", "provider": "existing", "existing": {"context": "w"}}]),
        ),
        "manager.kubernetesVersion",
        "plugin mount cannot be chosen",
        "pluginMount",
    ),
    (
        "custom image without image",
        _set(
            "credentials",
            {"mode": "clusterProfile", "clusterProfile": {"pluginMount": "customImage"}},
        ),
        "credentials.clusterProfile.kueueImage",
        "needs the Kueue image",
        "",
    ),
    (
        "kueue image without custom mode",
        _set("credentials", {"clusterProfile": {"kueueImage": "example/kueue:1"}}),
        "credentials.clusterProfile.kueueImage",
        "only with pluginMount: customImage",
        "",
    ),
    (
        "dispatcher with a built-in name",
        _set("dispatcher", {"name": "kueue.x-k8s.io/multikueue-dispatcher-incremental"}),
        "dispatcher.name",
        "built-in Kueue dispatcher",
        "",
    ),
    (
        "dispatcher without merge patch",
        _set("kueue.featureGates", {"WorkloadRequestUseMergePatch": False}),
        "kueue.featureGates.WorkloadRequestUseMergePatch",
        "needs WorkloadRequestUseMergePatch",
        "never admits",
    ),
    (
        "dispatcher nominates too many",
        _set("dispatcher.policy", {"clustersToNominate": 21}),
        "dispatcher.policy.clustersToNominate",
        "out of range",
        "1 to 20",
    ),
    (
        "dispatcher hedges on too many",
        _set("dispatcher.policy", {"hedgeClusters": 21}),
        "dispatcher.policy.hedgeClusters",
        "out of range",
        "1 to 20",
    ),
    (
        "dispatcher hedges at more than all of a queue",
        _set("dispatcher.policy", {"hedgeSharePercent": 101}),
        "dispatcher.policy.hedgeSharePercent",
        "out of range",
        "1 to 100",
    ),
    (
        "cloud manager without a registry",
        _set(
            "manager",
            {"provider": "gke", "gke": {"project": "my-project", "location": "europe-west4"}},
        ),
        "dispatcher.registry",
        "must be pushed somewhere the manager can pull from",
        "dispatcher.image",
    ),
    (
        "a local dispatcher given an image",
        _set("dispatcher", {"run": "local", "image": "registry.example/dispatcher:1"}),
        "dispatcher.image",
        "with dispatcher.run: local no image is built or run",
        "remove dispatcher.image",
    ),
    (
        "a local dispatcher given a registry",
        _set("dispatcher", {"run": "local", "registry": "registry.example/fleet"}),
        "dispatcher.registry",
        "no image is built or run",
        "dispatcher.run: cluster",
    ),
    (
        "a local dispatcher given a base image",
        _set("dispatcher", {"run": "local", "baseImage": "mirror.example/python:3.11"}),
        "dispatcher.baseImage",
        "no image is built or run",
        "remove dispatcher.baseImage",
    ),
    (
        "a base image for a dispatcher image that is not built",
        _set(
            "dispatcher",
            {"image": "registry.example/dispatcher:1", "baseImage": "mirror.example/python:3"},
        ),
        "dispatcher.baseImage",
        "nothing is built from it",
        "remove dispatcher.image to build from controller/",
    ),
    (
        "a dispatcher run nowhere known",
        _set("dispatcher", {"run": "laptop"}),
        "dispatcher.run",
        "",
        "",
    ),
    (
        "profile mode without the dispatcher",
        _seq(_set("credentials", {"mode": "clusterProfile"}), _set("dispatcher.enabled", False)),
        "dispatcher.enabled",
        "ClusterProfile mode needs the dispatcher",
        "kubeconfigSecret",
    ),
    (
        "selector matches no worker",
        _set("dispatcher.policy", {"clusterSelector": {"accelerator": "nvidia-tesla-t4"}}),
        "dispatcher.policy.clusterSelector",
        "no worker has all these labels",
        "",
    ),
    (
        "kubeconfig for unknown worker",
        _set("workerKubeconfigs", {"worker9": {"secure": "v1:abc"}}),
        "workerKubeconfigs.worker9",
        "no worker is named 'worker9'",
        "did you mean 'worker",
    ),
]
WARNINGS = {"manager quota differs", "selector matches no worker"}


@pytest.mark.parametrize(
    ("mutate", "path", "message", "hint"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_rule(
    mutate: Mutate, path: str, message: str, hint: str, request: pytest.FixtureRequest
) -> None:
    config = base()
    mutate(config)
    problems = problems_of(config)
    matching = [p for p in problems if p.path == path and message in p.message]
    assert matching, f"no problem at {path} saying {message!r}; got:\n" + "\n".join(
        map(str, problems)
    )
    assert hint in matching[0].hint
    expected = "warning" if request.node.callspec.id in WARNINGS else "error"
    assert matching[0].severity == expected


def test_base_config_is_clean() -> None:
    assert problems_of(base()) == []


def test_all_problems_are_reported_at_once() -> None:
    # Every problem of shape at once; once the shape is right, every fleet-wide one at once.
    config = base()
    config["workerz"] = []
    config["kueue"] = {"version": "v0.17.0", "multiKueue": {"gcInterval": "soon"}}
    config["workers"][0]["name"] = "Worker_1"
    paths = {p.path for p in problems_of(config)}
    assert {"workerz", "kueue.version", "kueue.multiKueue.gcInterval", "workers[0].name"} <= paths
    config = base()
    config["kueue"] = {"featureGates": {"Nope": True}}
    config["queues"]["localQueues"][0]["clusterQueue"] = "missing"
    config["workers"][1]["name"] = "worker1"
    paths = {p.path for p in problems_of(config)}
    assert {
        "kueue.featureGates.Nope",
        "queues.localQueues[0].clusterQueue",
        "workers[1].name",
    } <= paths


def test_tas_off_is_fine_when_every_dependent_gate_is_off_too() -> None:
    config = base()
    config["kueue"]["featureGates"] = {"TopologyAwareScheduling": False, **ALL_TAS_OFF}
    assert problems_of(config) == []


def test_locked_gate_at_its_default_is_only_a_warning() -> None:
    config = base()
    config["kueue"]["featureGates"] = {"HierarchicalCohorts": True}
    (problem,) = problems_of(config)
    assert problem.severity == "warning"
    assert problem.path == "kueue.featureGates.HierarchicalCohorts"


def test_duplicate_queue_objects() -> None:
    config = base()
    q = config["queues"]
    q["flavors"].append({"name": "default-flavor"})
    q["clusterQueues"].append(dict(q["clusterQueues"][0]))
    q["localQueues"].append(dict(q["localQueues"][0]))
    messages = {(p.path, p.message) for p in problems_of(config)}
    assert (
        "queues.flavors[1]",
        "duplicate ResourceFlavor 'default-flavor' (also at queues.flavors[0])",
    ) in messages
    assert (
        "queues.clusterQueues[1]",
        "duplicate ClusterQueue 'cq' (also at queues.clusterQueues[0])",
    ) in messages
    assert (
        "queues.localQueues[1]",
        "duplicate LocalQueue 'team-a/lq' (also at queues.localQueues[0])",
    ) in messages


@pytest.mark.parametrize(
    ("section", "change", "reason"),
    [
        (
            "users",
            {"exec": {"command": "gke-gcloud-auth-plugin"}},
            "runs an exec credential plugin",
        ),
        ("users", {"tokenFile": "/var/run/token"}, "reads its token from a file"),
        ("users", {"username": "admin", "password": "x"}, "uses basic auth"),
        ("clusters", {"certificate-authority": "/etc/ca.crt"}, "reads its CA from a file"),
        ("clusters", {"insecure-skip-tls-verify": True}, "sets insecure-skip-tls-verify"),
        ("clusters", {"server": "https://under_score:6443"}, "neither an IP nor a DNS name"),
    ],
)
def test_worker_kubeconfig_kueue_would_reject(
    section: str, change: dict[str, Any], reason: str
) -> None:
    kubeconfig = yaml.safe_load(yaml.safe_dump(KUBECONFIG))
    key = "user" if section == "users" else "cluster"
    kubeconfig[section][0][key].update(change)
    config = base()
    config["workerKubeconfigs"] = {"worker1": yaml.safe_dump(kubeconfig)}
    problems = problems_of(config, secret_keys=frozenset({"workerKubeconfigs"}))
    assert [p.path for p in problems] == ["workerKubeconfigs.worker1"]
    assert reason in problems[0].message
    assert "inline `token`" in problems[0].hint


def test_good_worker_kubeconfig_is_accepted_only_as_a_secret() -> None:
    config = base()
    config["workerKubeconfigs"] = {"worker1": yaml.safe_dump(KUBECONFIG)}
    assert problems_of(config, secret_keys=frozenset({"workerKubeconfigs"})) == []
    (problem,) = problems_of(config)
    assert problem.path == "workerKubeconfigs.worker1"
    assert "plain text" in problem.message
    assert "--secret" in problem.hint


def _spec(config: dict[str, Any], stack: str) -> Any:
    spec, problems = load_spec(config, stack)
    assert not problems
    return spec


KUBEADM_CONTEXT = "kubernetes-admin@kubernetes"  # what kubeadm names every context


def _kubeconfig(path: Path, contexts: dict[str, tuple[str, str]]) -> str:
    """A kubeconfig file with `contexts`: name -> (server, CA data); returns its path."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": f"c-{n}", "cluster": {"server": s, "certificate-authority-data": ca}}
                    for n, (s, ca) in contexts.items()
                ],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [
                    {"name": n, "context": {"cluster": f"c-{n}", "user": "u"}} for n in contexts
                ],
            }
        )
    )
    return str(path)


def _existing_fleet(origin: str, manager_context: str, worker: dict[str, Any]) -> dict[str, Any]:
    config = base()
    config["manager"] = {
        "provider": "existing",
        "kubernetesVersion": "1.35",
        "existing": {"context": manager_context},
    }
    config["workers"] = [{"name": "common", "provider": "existing", "existing": worker}]
    config["kueue"] = {"multiKueue": {"origin": origin}}
    return config


def test_two_fleets_never_share_an_existing_cluster(tmp_path: Path) -> None:
    """Every fleet installs the same names on a worker (Kueue, the multikueue identity, the
    queues): the second fleet's up would stop on "already exists", so validation refuses
    the sharing first, whatever the origins, and whatever the contexts are called."""
    one = _kubeconfig(tmp_path / "one", {"common": ("https://common.example:6443", "Q0E=")})
    two = _kubeconfig(tmp_path / "two", {"also": ("https://common.example:6443", "Q0E=")})
    a = _spec(_existing_fleet("one", "mgr-a", {"context": "common", "kubeconfigPath": one}), "a")
    b = _spec(_existing_fleet("two", "mgr-b", {"context": "also", "kubeconfigPath": two}), "b")
    (problem,) = validate_together([("a.yaml", a), ("b.yaml", b)])
    assert problem.path == "workers[0]"
    assert "at https://common.example:6443 (its API server and CA) is used by a.yaml" in (
        problem.message
    )
    assert "its own cluster" in problem.hint
    other = _kubeconfig(tmp_path / "other", {"common": ("https://other.example:6443", "Q0E=")})
    c = _existing_fleet("three", "mgr-c", {"context": "common", "kubeconfigPath": other})
    assert validate_together([("a.yaml", a), ("c.yaml", _spec(c, "c"))]) == []


def test_kubeadms_default_context_name_in_two_files_is_two_clusters(tmp_path: Path) -> None:
    """kubeadm names every context kubernetes-admin@kubernetes: two workers in two files are
    two clusters when their API servers (or CAs) differ."""
    config = _existing_fleet("one", "mgr-a", {})
    config["workers"] = [
        {
            "name": name,
            "provider": "existing",
            "existing": {
                "context": KUBEADM_CONTEXT,
                "kubeconfigPath": _kubeconfig(
                    # Each its own CA data: base64, as client-go decodes it.
                    tmp_path / name,
                    {KUBEADM_CONTEXT: (f"https://{name}.example:6443", f"{name}CA")},
                ),
            },
        }
        for name in ("w1", "w2")
    ]
    assert [p for p in problems_of(config) if p.path.startswith("workers")] == []
    # The same server with another CA is another cluster too (a rebuilt one, say).
    (tmp_path / "w2").write_text((tmp_path / "w2").read_text().replace("w2.example", "w1.example"))
    assert [p for p in problems_of(config) if p.path.startswith("workers")] == []


def test_one_stack_cannot_name_one_existing_cluster_twice(tmp_path: Path) -> None:
    """Another `server` (how the manager's pods reach it) does not make another cluster."""
    path = _kubeconfig(tmp_path / "k", {"common": ("https://common.example:6443", "Q0E=")})
    worker = {"context": "common", "kubeconfigPath": path}
    config = _existing_fleet("one", "mgr-a", worker)
    config["workers"].append(
        {
            "name": "again",
            "provider": "existing",
            "existing": {**worker, "server": "https://10.0.0.1:6443"},
        }
    )
    problem = only(problems_of(config), "workers[1]")
    assert "is used by workers[0], workers[1]" in problem.message


def test_an_unreadable_kubeconfig_still_tells_one_context_used_twice(tmp_path: Path) -> None:
    worker = {"context": "common", "kubeconfigPath": str(tmp_path / "absent")}
    config = _existing_fleet("one", "mgr-a", worker)
    config["workers"].append({"name": "again", "provider": "existing", "existing": worker})
    problem = only(problems_of(config), "workers[1]")
    assert f"context 'common' of {tmp_path / 'absent'} is used by" in problem.message


def test_default_origins_differ_per_fleet() -> None:
    a, b = base(), base()
    a["fleetName"], b["fleetName"] = "one", "two"
    spec_a, spec_b = _spec(a, "one"), _spec(b, "two")
    assert spec_a.kueue.multikueue.origin != spec_b.kueue.multikueue.origin
    assert validate_together([("one", spec_a), ("two", spec_b)]) == []


def test_two_stacks_creating_the_same_kind_cluster() -> None:
    a, b = base(), base()
    a["fleetName"] = b["fleetName"] = "same"
    problems = validate_together([("a", _spec(a, "a")), ("b", _spec(b, "b"))])
    assert any(
        "same-manager would be created by a (manager), b (manager)" in p.message for p in problems
    )


def test_a_wrong_fleet_framework_is_reported_once_at_the_list() -> None:
    """Every cluster without its own list takes the fleet's: a typo there is one mistake,
    reported where it is written, not once per cluster at the cluster."""
    config = base()
    config["frameworks"] = ["batch", "jobsett"]
    problems = [p for p in problems_of(config) if "jobsett" in p.message]
    assert [p.path for p in problems] == ["frameworks[1]"]
    assert "did you mean 'jobset'" in problems[0].hint
    # A cluster's own list is reported at that list.
    config["frameworks"] = ["batch"]
    config["workers"][1]["frameworks"] = ["jobsett"]  # batch is added, not written
    problems = [p for p in problems_of(config) if "jobsett" in p.message]
    assert [p.path for p in problems] == ["workers[1].frameworks[0]"]


def test_a_duplicate_worker_name_is_one_problem_with_its_fix() -> None:
    """Not also "would be created by workers[0], workers[1]" with a fleetName hint: in one
    stack the fix is another name."""
    config = base()
    config["workers"][1]["name"] = "worker1"
    problems = [p for p in problems_of(config) if p.severity == "error"]
    assert [(p.path, p.hint) for p in problems] == [
        ("workers[1].name", "give each cluster its own name")
    ]


def test_kueue_rejections_of_a_kubeconfig_with_empty_items_are_reasons_not_errors() -> None:
    from components.objects.kubeconfig import kueue_rejections

    reasons = kueue_rejections("clusters:\n- \n- name: c\n  cluster: x\nusers: [null]\n")
    assert "cluster 'c' is not a mapping" in reasons
    assert "current-context is missing or names no context in the file" in reasons


def test_a_misspelt_flavor_definition_is_named_not_suggested() -> None:
    """The definition misspelt and the reference right: the hint points at the definition
    nothing uses instead of suggesting the misspelling to the reference."""
    config = base()
    config["queues"]["flavors"][0]["name"] = "defualt-flavor"
    problem = only(problems_of(config), "queues.clusterQueues[0].resourceGroups[0].flavors[0].name")
    assert problem.message == "no ResourceFlavor named 'default-flavor'"
    assert "did you mean 'defualt-flavor'" not in problem.hint
    assert problem.hint.startswith("queues.flavors[0] defines 'defualt-flavor', which no")
    assert "rename it to 'default-flavor'" in problem.hint
    # A misspelt reference to a flavor that is used elsewhere still gets the suggestion.
    config = base()
    config["queues"]["clusterQueues"][0]["resourceGroups"][0]["flavors"][0]["name"] = (
        "defaul-flavor"
    )
    config["queues"]["clusterQueues"].append(
        {**copy.deepcopy(config["queues"]["clusterQueues"][0]), "name": "cq2"}
    )
    config["queues"]["clusterQueues"][1]["resourceGroups"][0]["flavors"][0]["name"] = (
        "default-flavor"
    )
    hints = [p.hint for p in problems_of(config) if "no ResourceFlavor" in p.message]
    assert hints == ["did you mean 'default-flavor'? define it under queues.flavors"]


def test_a_duplicate_cluster_queue_is_one_problem() -> None:
    """Every reference to the name (a LocalQueue, a worker's quotas, managerQuota) still
    resolves: no "no ClusterQueue named" after the duplicate."""
    config = base()
    config["queues"]["clusterQueues"].append(copy.deepcopy(config["queues"]["clusterQueues"][0]))
    config["workers"][0]["quotas"] = {"cq": {"default-flavor": {"cpu": 1, "memory": "1Gi"}}}
    errors = [p for p in problems_of(config) if p.severity == "error"]
    assert [p.path for p in errors] == ["queues.clusterQueues[1]"], errors


@pytest.mark.parametrize("zero", ["0s", "0", 0, "0h0m"])
def test_a_zero_pods_ready_timeout_is_refused(zero: Any) -> None:
    """Kueue v0.19.2 replaces a zero waitForPodsReady.timeout with 30m (defaults.go): the
    stack must not say 0s while Kueue waits half an hour."""
    config = base()
    config["kueue"]["waitForPodsReady"] = {"timeout": zero}
    problem = only(problems_of(config), "kueue.waitForPodsReady.timeout")
    assert "Kueue replaces with its default of 30m" in problem.message
    assert "enabled: false" in problem.hint
    config["kueue"]["waitForPodsReady"] = {"timeout": zero, "enabled": False}
    assert not [p for p in problems_of(config) if "timeout" in p.path]


@pytest.mark.parametrize(
    ("key", "refused"),
    [
        ("kubernetes.io/role", True),
        ("node-role.kubernetes.io/gpu", True),
        ("cloud.google.com/gke-accelerator", False),
        ("example.k8s.io/pool", True),
        ("topology.kubernetes.io/zone", False),
        ("node.kubernetes.io/pool", False),
        ("pool.node.kubernetes.io/x", False),
        ("feature.kubelet.kubernetes.io/x", False),
        ("kubernetes.io/hostname", False),
        ("example.com/pool", False),
        ("accelerator", False),
    ],
)
def test_node_labels_the_kubelet_refuses_are_refused(key: str, refused: bool) -> None:
    """kubelet (well_known_labels.go, options.go ValidateKubeletFlags) refuses to start with
    other kubernetes.io / k8s.io labels: kind create would fail half-way through `up`."""
    config = base()
    config["workers"][0]["nodeLabels"] = {key: "x"}
    found = [p for p in problems_of(config) if p.path.startswith("workers[0].nodeLabels")]
    assert bool(found) == refused, found
    if refused:
        assert found[0].path == f"workers[0].nodeLabels.{key}"
        assert "kubelet refuses to start" in found[0].message


def _gke_gpu_config() -> dict[str, Any]:
    config = base()
    config["manager"] = {
        "provider": "gke",
        "gke": {"project": "p-123456", "location": "us-central1"},
    }
    for w in config["workers"]:
        w["provider"] = "gke"
        w["gke"] = {"project": "p-123456", "location": "us-central1"}
    config["queues"]["flavors"].append(
        {"name": "t4", "nodeLabels": {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}}
    )
    config["queues"]["clusterQueues"][0]["resourceGroups"].append(
        {
            "coveredResources": ["nvidia.com/gpu"],
            "flavors": [{"name": "t4", "resources": {"nvidia.com/gpu": 4}}],
        }
    )
    config["workers"][1]["quotas"] = {"cq": {"t4": {"nvidia.com/gpu": 0}}}
    return config


def test_gpu_quota_on_a_cloud_worker_without_gpu_nodes_is_said() -> None:
    """The stack offers GPUs on a GKE/EKS worker it gives no GPU node pool (what the gke
    stack did): workloads sent there would wait for nodes that never come."""
    config = _gke_gpu_config()
    problem = only(problems_of(config), "workers[0].gke.gpuPool")
    assert problem.severity == "warning"
    assert "offers nvidia.com/gpu (flavor 't4' of ClusterQueue 'cq')" in problem.message
    # worker2 offers 0: nothing said. With a pool of the flavor's accelerator: nothing.
    config["workers"][0]["gke"]["gpuPool"] = {"accelerator": "nvidia-tesla-t4"}
    assert not [p for p in problems_of(config) if "gpuPool" in p.path]
    config["workers"][0]["gke"]["gpuPool"] = {
        "accelerator": "nvidia-l4",
        "machineType": "g2-standard-8",
    }
    problem = only(problems_of(config), "workers[0].gke.gpuPool.accelerator")
    assert "selects cloud.google.com/gke-accelerator=nvidia-tesla-t4" in problem.message


def test_an_empty_worker_kubeconfig_says_it_is_empty() -> None:
    config = base()
    config["workerKubeconfigs"] = {"worker1": "  \n"}
    problems = problems_of(config, secret_keys=frozenset({"workerKubeconfigs"}))
    problem = only(problems, "workerKubeconfigs.worker1")
    assert problem.message == "Kueue would reject this kubeconfig: it is empty"


def test_a_gpu_pools_node_labels_are_held_to_the_kubelets_rule_too() -> None:
    config = _gke_gpu_config()
    config["workers"][0]["gke"]["gpuPool"] = {
        "accelerator": "nvidia-tesla-t4",
        "nodeLabels": {"node-role.kubernetes.io/gpu": ""},
    }
    problem = only(
        problems_of(config), "workers[0].gke.gpuPool.nodeLabels.node-role.kubernetes.io/gpu"
    )
    assert "kubelet refuses to start" in problem.message


def _eks_gpu_config(flavor_labels: dict[str, str]) -> dict[str, Any]:
    config = base()
    config["manager"] = {"provider": "eks", "eks": {"region": "eu-west-1"}}
    for w in config["workers"]:
        w["provider"] = "eks"
        w["eks"] = {"region": "eu-west-1"}
    config["queues"]["flavors"].append({"name": "gpu", "nodeLabels": flavor_labels})
    config["queues"]["clusterQueues"][0]["resourceGroups"].append(
        {
            "coveredResources": ["nvidia.com/gpu"],
            "flavors": [{"name": "gpu", "resources": {"nvidia.com/gpu": 4}}],
        }
    )
    config["workers"][0]["eks"]["gpuPool"] = {
        "instanceType": "g4dn.12xlarge",
        "nodeLabels": {"example.com/gpu": "t4"},
    }
    config["workers"][1]["quotas"] = {"cq": {"gpu": {"nvidia.com/gpu": 0}}}
    return config


def test_an_eks_gpu_flavor_selects_only_labels_its_nodes_carry() -> None:
    """EKS sets no accelerator label: a flavor copied from a GKE stack
    (cloud.google.com/gke-accelerator) selects nodes that never exist. What EKS nodes do
    carry: node.kubernetes.io/instance-type (set by the cloud provider) and the node
    group's labels (CreateNodegroup `labels`). 9825baf checked the flavor's labels on GKE
    only."""
    gke_label = {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}
    problem = only(problems_of(_eks_gpu_config(gke_label)), "workers[0].eks.gpuPool")
    assert problem.severity == "warning"
    assert "cloud.google.com/gke-accelerator=nvidia-tesla-t4" in problem.message
    assert "EKS sets no accelerator label" in problem.message
    mismatched = {"node.kubernetes.io/instance-type": "p3.2xlarge"}
    problem = only(problems_of(_eks_gpu_config(mismatched)), "workers[0].eks.gpuPool")
    assert "carry node.kubernetes.io/instance-type=g4dn.12xlarge" in problem.message
    unknown = {"example.com/accelerator": "t4"}
    problem = only(problems_of(_eks_gpu_config(unknown)), "workers[0].eks.gpuPool")
    assert "do not carry" in problem.message
    for fine in (
        {"node.kubernetes.io/instance-type": "g4dn.12xlarge"},
        {"example.com/gpu": "t4"},
        {"topology.kubernetes.io/zone": "eu-west-1a"},  # set by the cloud provider
    ):
        assert not [p for p in problems_of(_eks_gpu_config(fine)) if "gpuPool" in p.path], fine


def test_every_gpu_flavor_of_a_worker_is_held_to_its_pools_labels() -> None:
    """Not only the first GPU flavor a worker offers: a second one selecting another
    accelerator is said too."""
    config = _gke_gpu_config()
    config["workers"][0]["gke"]["gpuPool"] = {"accelerator": "nvidia-tesla-t4"}
    config["queues"]["flavors"].append(
        {"name": "l4", "nodeLabels": {"cloud.google.com/gke-accelerator": "nvidia-l4"}}
    )
    config["queues"]["clusterQueues"][0]["resourceGroups"][-1]["flavors"].append(
        {"name": "l4", "resources": {"nvidia.com/gpu": 4}}
    )
    config["workers"][1]["quotas"] = {
        "cq": {"t4": {"nvidia.com/gpu": 0}, "l4": {"nvidia.com/gpu": 0}}
    }
    problem = only(problems_of(config), "workers[0].gke.gpuPool.accelerator")
    assert "flavor 'l4' selects cloud.google.com/gke-accelerator=nvidia-l4" in problem.message


def test_a_gpu_flavor_declaring_the_gpu_taint_must_tolerate_it() -> None:
    """Kueue admits on a flavor only workloads whose pod template tolerates its nodeTaints
    or that the flavor tolerates itself (kueue v0.19.2 flavorassigner.go:1239); the
    ExtendedResourceToleration plugin tolerates the GPU taint on the pods, after admission."""
    config = _eks_gpu_config({"example.com/gpu": "t4"})
    flavor = config["queues"]["flavors"][-1]
    flavor["nodeTaints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    path = f"queues.flavors[{len(config['queues']['flavors']) - 1}].nodeTaints"
    problem = only(problems_of(config), path)
    assert problem.severity == "warning"
    assert "does not tolerate it" in problem.message
    flavor["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    assert not [p for p in problems_of(config) if p.path == path]
    flavor["tolerations"] = [{"key": "nvidia.com/gpu", "value": "other", "effect": "NoSchedule"}]
    assert only(problems_of(config), path)
