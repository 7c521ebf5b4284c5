"""Cloud values the provider refuses at `up` (components/checks/cloud.py), refused by
`validate` instead, each with a must-accept case."""

from __future__ import annotations

from typing import Any

import pytest

from components.checks.cloud import is_graviton
from tests.helpers.fleet_config import base, problems_of


def _errors(config: dict[str, Any], path: str) -> list[str]:
    return [p.message for p in problems_of(config) if p.path == path and p.severity == "error"]


def _gke(location: str, zones: list[str]) -> dict[str, Any]:
    config = base()
    config["manager"] = {"provider": "gke", "gke": {"project": "p-123456", "location": location}}
    for w in config["workers"]:
        w["provider"] = "gke"
        w["gke"] = {"project": "p-123456", "location": location}
    config["workers"][0]["gke"]["gpuPool"] = {"accelerator": "nvidia-tesla-t4", "zones": zones}
    return config


def test_a_gpu_zone_outside_the_clusters_region_is_refused() -> None:
    (message,) = _errors(_gke("us-central1", ["europe-west4-a"]), "workers[0].gke.gpuPool.zones[0]")
    assert "outside the cluster's region us-central1" in message
    # A zonal cluster: its region is the zone's.
    (message,) = _errors(_gke("us-central1-c", ["us-east1-b"]), "workers[0].gke.gpuPool.zones[0]")
    assert "outside the cluster's region us-central1" in message


def test_a_region_where_a_zone_is_wanted_is_refused() -> None:
    (message,) = _errors(_gke("us-central1", ["us-central1"]), "workers[0].gke.gpuPool.zones[0]")
    assert "is a region, and node locations are zones" in message


def test_zones_of_the_clusters_region_are_accepted() -> None:
    for location in ("us-central1", "us-central1-c"):
        config = _gke(location, ["us-central1-a", "us-central1-f"])
        assert [p for p in problems_of(config) if "zones" in p.path] == []


@pytest.mark.parametrize(
    ("instance", "arm"),
    [
        ("g5g.xlarge", True),
        ("c7gn.large", True),
        ("im4gn.large", True),
        ("a1.large", True),
        ("g4dn.xlarge", False),
        ("g6e.12xlarge", False),
        ("p4de.24xlarge", False),
        ("gr6.4xlarge", False),
    ],
)
def test_graviton_instance_types(instance: str, arm: bool) -> None:
    assert is_graviton(instance) is arm


def _eks(instance: str, ami: str | None) -> dict[str, Any]:
    config = base()
    config["manager"] = {"provider": "eks", "eks": {"region": "eu-west-1"}}
    for w in config["workers"]:
        w["provider"] = "eks"
        w["eks"] = {"region": "eu-west-1"}
    pool: dict[str, Any] = {"instanceType": instance}
    if ami:
        pool["amiType"] = ami
    config["workers"][0]["eks"]["gpuPool"] = pool
    return config


def test_an_eks_gpu_ami_of_another_architecture_is_refused() -> None:
    (message,) = _errors(_eks("g5g.2xlarge", None), "workers[0].eks.gpuPool.amiType")
    assert "BOTTLEROCKET_x86_64_NVIDIA is for x86_64 instances" in message
    (message,) = _errors(
        _eks("g4dn.xlarge", "BOTTLEROCKET_ARM_64_NVIDIA"), "workers[0].eks.gpuPool.amiType"
    )
    assert "g4dn.xlarge is x86_64" in message


def test_an_eks_gpu_ami_of_the_instances_architecture_is_accepted() -> None:
    assert _errors(_eks("g4dn.xlarge", None), "workers[0].eks.gpuPool.amiType") == []
    config = _eks("g5g.2xlarge", "BOTTLEROCKET_ARM_64_NVIDIA")
    assert _errors(config, "workers[0].eks.gpuPool.amiType") == []


def test_a_gke_cluster_name_gke_refuses_is_refused() -> None:
    config = _gke("us-central1", [])
    config["fleetName"] = "a-very-long-fleet-name-for-gke"  # + "-worker1": 38, + manager 38
    config["workers"][0]["name"] = "worker-with-a-long-name"
    (message,) = _errors(config, "workers[0].name")
    assert "is not one GKE takes: at most 40 characters" in message
    config = _gke("us-central1", [])
    config["fleetName"] = "9lives"  # a GKE name starts with a letter
    assert _errors(config, "manager.name")
    config["fleetName"] = "lab"
    assert _errors(config, "manager.name") == [] and _errors(config, "workers[0].name") == []


def test_an_eks_cluster_name_past_100_characters_is_refused() -> None:
    config = _eks("g4dn.xlarge", None)
    config["fleetName"] = "f" * 60
    config["workers"][0]["name"] = "w" * 45
    (message,) = _errors(config, "workers[0].name")
    assert "EKS takes at most 100" in message
    assert _errors(_eks("g4dn.xlarge", None), "workers[0].name") == []


def test_a_gpu_on_a_machine_series_it_does_not_attach_to_is_refused() -> None:
    config = _gke("us-central1", [])
    config["workers"][0]["gke"]["gpuPool"] = {"accelerator": "nvidia-l4"}  # n1-standard-8
    (message,) = _errors(config, "workers[0].gke.gpuPool.machineType")
    assert "nvidia-l4 attaches only to g2-* machines, not n1-standard-8" in message
    config["workers"][0]["gke"]["gpuPool"]["machineType"] = "g2-standard-8"
    assert _errors(config, "workers[0].gke.gpuPool.machineType") == []
    config["workers"][0]["gke"]["gpuPool"] = {"accelerator": "nvidia-tesla-t4"}
    assert _errors(config, "workers[0].gke.gpuPool.machineType") == []
