"""Cloud values the stack file takes but the provider refuses at `up`, after it has
created the clusters: a GPU pool's zones outside its cluster's region, or a region where a
zone is wanted; an EKS GPU AMI built for another architecture than the instance type."""

from __future__ import annotations

import re
from collections.abc import Iterator

from components.model.problems import Problem, key_path
from components.model.spec import FleetSpec

# A Compute Engine zone is its region and a one-letter suffix (europe-west4-a).
_GCP_ZONE = re.compile(r"^(?P<region>[a-z]+-[a-z]+[0-9]+)-[a-z]$")
# EC2 instance families on AWS Graviton (arm64): the generation digit is followed by a 'g'
# (c6g, m7gd, g5g, im4gn, is4gen, x2gd, hpc7g, t4g), and a1. The naming rule is AWS's
# ("Amazon EC2 instance type naming conventions": processor family 'g' = AWS Graviton).
_GRAVITON = re.compile(r"^(a1|[a-z]+[0-9]+g[a-z-]*)$")
ARM_AMI = "BOTTLEROCKET_ARM_64_NVIDIA"
X86_AMI = "BOTTLEROCKET_x86_64_NVIDIA"


def _region(location: str) -> str:
    zone = _GCP_ZONE.match(location)
    return zone.group("region") if zone else location


def gke_gpu_zones(spec: FleetSpec) -> Iterator[Problem]:
    """GKE node_locations: zones of the cluster's own region (GKE API, NodePool.locations:
    "zones in which the NodePool's nodes should be located", within the cluster's region)."""
    for c in spec.clusters:
        if c.gke is None or c.gke.gpu_pool is None:
            continue
        region = _region(c.gke.location)
        for i, zone in enumerate(c.gke.gpu_pool.zones):
            path = key_path(key_path(c.path, "gke.gpuPool.zones"), i)
            if not _GCP_ZONE.match(zone):
                yield Problem(
                    path,
                    f"'{zone}' is a region, and node locations are zones",
                    f"write a zone of it, such as {zone}-a",
                )
            elif _region(zone) != region:
                yield Problem(
                    path,
                    f"zone '{zone}' is outside the cluster's region {region} "
                    f"({c.path}.gke.location: {c.gke.location})",
                    f"use a zone of {region}, such as {region}-a, or move the cluster",
                )


# Compute Engine: which machine series each GPU attaches to ("GPU machine types",
# https://cloud.google.com/compute/docs/gpus): N1 takes attachable GPUs; the accelerator-
# optimized series come with their own. GKE refuses a node pool that pairs them otherwise.
GPU_MACHINE_SERIES: dict[str, tuple[str, ...]] = {
    "nvidia-tesla-t4": ("n1-",),
    "nvidia-tesla-p4": ("n1-",),
    "nvidia-tesla-v100": ("n1-",),
    "nvidia-tesla-p100": ("n1-",),
    "nvidia-l4": ("g2-",),
    "nvidia-tesla-a100": ("a2-highgpu-", "a2-megagpu-"),
    "nvidia-a100-80gb": ("a2-ultragpu-",),
    "nvidia-h100-80gb": ("a3-highgpu-", "a3-edgegpu-"),
    "nvidia-h100-mega-80gb": ("a3-megagpu-",),
    "nvidia-h200-141gb": ("a3-ultragpu-",),
}


def gke_gpu_machine_types(spec: FleetSpec) -> Iterator[Problem]:
    for c in spec.clusters:
        if c.gke is None or c.gke.gpu_pool is None:
            continue
        pool = c.gke.gpu_pool
        series = GPU_MACHINE_SERIES.get(pool.accelerator)
        if series and not pool.machine_type.startswith(series):
            yield Problem(
                key_path(c.path, "gke.gpuPool.machineType"),
                f"{pool.accelerator} attaches only to {' or '.join(s + '*' for s in series)} "
                f"machines, not {pool.machine_type}",
                f"set machineType to a {series[0]}* machine type",
            )


def is_graviton(instance_type: str) -> bool:
    return bool(_GRAVITON.match(instance_type.split(".", 1)[0]))


def eks_gpu_ami_architecture(spec: FleetSpec) -> Iterator[Problem]:
    """EKS CreateNodegroup refuses an AMI type whose architecture is not the instance
    type's (an arm64 Bottlerocket on x86 instances, or the reverse)."""
    for c in spec.clusters:
        if c.eks is None or c.eks.gpu_pool is None:
            continue
        pool = c.eks.gpu_pool
        arm = is_graviton(pool.instance_type)
        wanted = ARM_AMI if arm else X86_AMI
        if pool.ami_type != wanted:
            yield Problem(
                key_path(c.path, "eks.gpuPool.amiType"),
                f"{pool.ami_type} is for {'x86_64' if arm else 'arm64'} instances, and "
                f"{pool.instance_type} is {'arm64 (AWS Graviton)' if arm else 'x86_64'}",
                f"set amiType: {wanted}, or choose a "
                f"{'x86_64' if arm else 'Graviton'} GPU instance type",
            )


# GKE: "The name must start with a lowercase letter followed by up to 39 lowercase letters,
# numbers, or hyphens, and cannot end with a hyphen" (clusters.create, Cluster.name).
GKE_CLUSTER_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")
# EKS CreateCluster: name 1-100 characters, ^[0-9A-Za-z][A-Za-z0-9\-_]*$.
EKS_CLUSTER_NAME_MAX = 100


def cloud_cluster_names(spec: FleetSpec) -> Iterator[Problem]:
    """The name the stack gives a GKE or EKS cluster (<fleetName>-<name>), as the cloud's
    API takes it; refused there only after the other clusters were created."""
    for c in spec.clusters:
        physical = c.physical_name(spec.fleet_name)
        if c.gke is not None and not GKE_CLUSTER_NAME.match(physical):
            yield Problem(
                key_path(c.path, "name"),
                f"GKE cluster name '{physical}' (fleetName-name) is not one GKE takes: at most "
                "40 characters, starting with a letter",
                "shorten fleetName or the cluster name (and start fleetName with a letter)",
            )
        if c.eks is not None and len(physical) > EKS_CLUSTER_NAME_MAX:
            yield Problem(
                key_path(c.path, "name"),
                f"EKS cluster name '{physical[:40]}...' (fleetName-name) is {len(physical)} "
                f"characters; EKS takes at most {EKS_CLUSTER_NAME_MAX}",
                "shorten fleetName or the cluster name",
            )
