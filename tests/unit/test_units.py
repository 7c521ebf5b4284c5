"""Small pure helpers: quantities, kubeconfigs, and how stack values are read."""

from __future__ import annotations

import pytest
import yaml

from components.model import quantity
from components.model.spec import Secret, load_spec
from components.objects.kubeconfig import kueue_rejections, worker_kubeconfig
from tests.helpers.fleet_config import base, load


@pytest.mark.parametrize(
    ("values", "total"),
    [
        (["8Gi", "8Gi"], "16Gi"),
        (["4", "4"], "8"),
        (["500m", "1"], "1500m"),
        (["1", "500m"], "1500m"),
        (["36Gi", "36Gi", "36Gi"], "108Gi"),
        (["0.5", "0.5"], "1"),
        (["2", "0"], "2"),
        (["0", "0"], "0"),
        (["1Gi", "512Mi"], "1536Mi"),
    ],
)
def test_quantity_sums_keep_the_users_unit(values: list[str], total: str) -> None:
    assert quantity.total(values) == total
    assert quantity.equal(quantity.total(values), total)


def test_quantity_errors_are_readable() -> None:
    with pytest.raises(ValueError, match="'lots' is not a Kubernetes quantity"):
        quantity.parse("lots")
    assert not quantity.is_valid("12 cores")
    assert quantity.equal("1Gi", "1024Mi")


def test_built_kubeconfig_is_one_kueue_accepts() -> None:
    config = worker_kubeconfig(
        "dev-worker1", "https://dev-worker1-control-plane:6443", "Q0EtREFUQQ==", "token-value"
    )
    assert config["current-context"] == "dev-worker1"
    assert config["users"][0]["user"] == {"token": "token-value"}
    assert kueue_rejections(yaml.safe_dump(config)) == []


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("not: [valid", "not valid YAML"),
        ("just a string", "not a kubeconfig"),
        ("clusters: []\ncontexts: []\n", "current-context is missing"),
        (
            "current-context: x\ncontexts: [{name: x, context: {}}]\n"
            "clusters: [{name: c, cluster: {}}]\n",
            "cluster 'c' has no server",
        ),
    ],
)
def test_kubeconfig_shape_problems(text: str, reason: str) -> None:
    assert any(reason in r for r in kueue_rejections(text))


def test_shorthand_and_full_quota_forms() -> None:
    config = base()
    flavor = config["queues"]["clusterQueues"][0]["resourceGroups"][0]["flavors"][0]
    flavor["resources"] = {
        "cpu": "500m",
        "memory": {"nominalQuota": "1Gi", "lendingLimit": "512Mi"},
    }
    config["queues"]["clusterQueues"][0]["cohort"] = "c"
    spec, problems = load(config)
    assert problems == []
    resources = spec.queues.cluster_queues[0].resource_groups[0].flavors[0].resources
    assert resources["cpu"].nominal == "500m"
    assert resources["memory"].nominal == "1Gi" and resources["memory"].lending_limit == "512Mi"


def test_covered_resources_default_to_the_first_flavors_keys() -> None:
    config = base()
    del config["queues"]["clusterQueues"][0]["resourceGroups"][0]["coveredResources"]
    spec, problems = load(config)
    assert problems == []
    assert spec.queues.cluster_queues[0].resource_groups[0].covered == ("cpu", "memory")


def test_label_values_from_yaml_become_strings() -> None:
    config = base()
    config["workers"][0]["labels"] = {"gpus": 8, "spot": True}
    spec, _ = load(config)
    assert spec.workers[0].labels == {"gpus": "8", "spot": "true"}


def test_batch_is_always_a_framework() -> None:
    config = base()
    config["frameworks"] = ["jobset"]
    spec, _ = load(config)
    assert spec.manager.frameworks == ("batch", "jobset")


def test_encrypted_values_stay_unknown_offline_and_masked() -> None:
    config = base()
    config["workerKubeconfigs"] = {"worker1": {"secure": "v1:abc"}}
    spec, problems = load_spec(config, "t", frozenset({"workerKubeconfigs"}))
    assert problems == []
    assert spec.worker_kubeconfigs["worker1"] == Secret(None)
    assert repr(Secret("token")) == "Secret(***)"


def test_kind_node_image_sets_the_version() -> None:
    config = base()
    config["manager"]["kind"] = {"nodeImage": "kindest/node:v1.35.8@sha256:" + "0" * 64}
    spec, problems = load(config)
    assert problems == []
    assert spec.manager.kubernetes_version == "1.35"
    assert spec.workers[0].kubernetes_version == "1.36"
