"""The replace-on-change table (components/objects/immutable.py) against what Kueue's real CRDs,
from the pinned release, enforce."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.checks.crd_schema import CrdSchemas
from components.checks.immutable import (
    IMMUTABLE,
)
from components.objects.fleet import build_fleet
from tests.helpers.fleet_config import base, load, tas


def test_the_table_is_what_the_real_crds_enforce(upstream_crds: CrdSchemas) -> None:
    """Each listed field is refused by the CRD's CEL on update, and the flavor's nodeTaints
    are not (kueue v0.19.2 CRDs, cluster-inventory-api ClusterProfile CRD)."""
    changed_values: dict[tuple[str, str], Any] = {
        ("LocalQueue", "clusterQueue"): "other",
        ("Topology", "levels"): ["kubernetes.io/hostname"],
        ("ResourceFlavor", "nodeLabels"): {"pool": "b"},
        ("ResourceFlavor", "tolerations"): [{"key": "k", "operator": "Exists"}],
        ("ResourceFlavor", "topologyName"): "other",
        ("AdmissionCheck", "controllerName"): "example.com/other",
    }
    for rule in IMMUTABLE:
        if rule.kind == "ClusterProfile":
            continue
        old = _manager_object(tas(), rule.kind)
        new = _changed(old, rule.field, changed_values[(rule.kind, rule.field)])
        assert upstream_crds.problems(old) == [], rule
        assert upstream_crds.problems(new, old=old), rule
    flavor = _manager_object(tas(), "ResourceFlavor")
    tainted = _changed(flavor, "nodeTaints", [{"key": "k", "effect": "NoSchedule"}])
    assert upstream_crds.problems(tainted, old=flavor) == []


def test_cluster_profile_manager_is_immutable_in_its_crd(upstream_crds: CrdSchemas) -> None:
    config = base()
    config["credentials"] = {"mode": "clusterProfile"}
    config["manager"]["kubernetesVersion"] = "1.36"
    profile = _manager_object(config, "ClusterProfile")
    if not upstream_crds.knows(profile["apiVersion"], "ClusterProfile"):
        pytest.skip("the ClusterProfile CRD is not among the upstream files")
    new = _changed(profile, "clusterManager", {"name": "someone-else"})
    assert upstream_crds.problems(new, old=profile)


def _manager_object(config: dict[str, Any], kind: str) -> dict[str, Any]:
    spec, problems = load(config)
    assert not [p for p in problems if p.severity == "error"], problems
    return next(o for o in build_fleet(spec)[0].objects if o["kind"] == kind)


def _changed(obj: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
    new = copy.deepcopy(obj)
    new["spec"][field] = value
    return new
