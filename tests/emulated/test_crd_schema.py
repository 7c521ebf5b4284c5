"""components/checks/crd_schema.py against Kueue v0.19.2's real CRDs (the pinned release or
its Go module, tests/helpers/upstream_data.py): what a kube-apiserver prunes, defaults and refuses.
The rules checked here are read from the CRDs themselves (config/components/crd/bases)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.checks.crd_schema import CrdSchemas

V1B2 = "kueue.x-k8s.io/v1beta2"


def workload(**status: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": V1B2,
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "team-a"},
        "spec": {
            "queueName": "lq",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                }
            ],
        },
    }
    if status:
        obj["status"] = status
    return obj


def cluster_queue(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": V1B2,
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": 4}]}],
                }
            ],
            **spec,
        },
    }


def test_a_valid_workload_is_defaulted_and_passes(upstream_crds: CrdSchemas) -> None:
    stored = upstream_crds.with_defaults(workload())
    assert stored["spec"]["active"] is True  # the CRD's default
    assert upstream_crds.problems(stored) == []


def test_cluster_name_and_nominated_names_are_exclusive(upstream_crds: CrdSchemas) -> None:
    both = workload(clusterName="worker1", nominatedClusterNames=["worker1"])
    assert any("mutually exclusive" in p for p in upstream_crds.problems(both))


def test_cluster_name_is_immutable_on_update_only(upstream_crds: CrdSchemas) -> None:
    before = workload(clusterName="worker1")
    after = workload(clusterName="worker2")
    assert upstream_crds.problems(after) == []  # a create has no old value to compare
    assert any("immutable" in p for p in upstream_crds.problems(after, old=before))
    assert upstream_crds.problems(before, old=before) == []


def test_at_most_twenty_nominated_clusters(upstream_crds: CrdSchemas) -> None:
    names = [f"worker{i}" for i in range(21)]
    problems = upstream_crds.problems(workload(nominatedClusterNames=names))
    assert problems == ["status.nominatedClusterNames: Too many: 21: must have at most 20 items"]
    assert upstream_crds.problems(workload(nominatedClusterNames=names[:20])) == []


def test_unknown_fields_are_pruned_and_reported(upstream_crds: CrdSchemas) -> None:
    cq = cluster_queue(bogus=1)
    assert upstream_crds.pruned_paths(cq) == ["spec.bogus"]
    assert "bogus" not in upstream_crds.prune(cq)["spec"]
    assert upstream_crds.prune(cq)["metadata"] == {"name": "cq"}


def test_types_and_enums_are_checked(upstream_crds: CrdSchemas) -> None:
    wrong = cluster_queue(queueingStrategy="Fastest")
    assert any(
        p.startswith("spec.queueingStrategy: Unsupported value")
        for p in upstream_crds.problems(wrong)
    )
    typed = cluster_queue()
    typed["spec"]["resourceGroups"][0]["coveredResources"] = "cpu"
    assert any("must be of type array" in p for p in upstream_crds.problems(typed))


def test_local_queue_cluster_queue_cannot_change(upstream_crds: CrdSchemas) -> None:
    lq = {
        "apiVersion": V1B2,
        "kind": "LocalQueue",
        "metadata": {"name": "lq", "namespace": "team-a"},
        "spec": {"clusterQueue": "cq"},
    }
    moved = copy.deepcopy(lq)
    moved["spec"]["clusterQueue"] = "other"
    assert upstream_crds.problems(moved, old=lq) != []
    assert upstream_crds.problems(moved) == []


def test_null_in_a_non_nullable_field_is_pruned(upstream_crds: CrdSchemas) -> None:
    cq = cluster_queue(cohortName=None)
    assert "cohortName" not in upstream_crds.prune(cq)["spec"]
    assert upstream_crds.problems(cq) == ["spec.cohortName: Invalid value: null"]


def _crd(rule: str) -> CrdSchemas:
    return CrdSchemas.from_documents(
        [
            {
                "kind": "CustomResourceDefinition",
                "spec": {
                    "group": "example.com",
                    "names": {"kind": "Thing"},
                    "versions": [
                        {
                            "name": "v1",
                            "served": True,
                            "schema": {
                                "openAPIV3Schema": {
                                    "type": "object",
                                    "properties": {
                                        "spec": {
                                            "type": "object",
                                            "properties": {"size": {"type": "string"}},
                                            "x-kubernetes-validations": [
                                                {"rule": rule, "message": "bad size"}
                                            ],
                                        }
                                    },
                                }
                            },
                        }
                    ],
                },
            }
        ]
    )


def thing(size: str) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Thing",
        "metadata": {"name": "t"},
        "spec": {"size": size},
    }


def test_a_rule_the_engine_cannot_run_is_reported_not_skipped() -> None:
    schemas = _crd("quantity(self.size).isGreaterThan(quantity('1'))")
    problems = schemas.problems(thing("2"))
    assert len(problems) == 1 and problems[0].startswith("spec: unchecked rule")


@pytest.mark.parametrize(("size", "ok"), [("small", True), ("huge", False)])
def test_a_failing_rule_reports_its_message(size: str, ok: bool) -> None:
    schemas = _crd("self.size != 'huge'")
    assert (schemas.problems(thing(size)) == []) is ok
    if not ok:
        assert schemas.problems(thing(size)) == ["spec: Invalid value: bad size"]


def test_a_rule_that_fails_to_evaluate_is_a_problem() -> None:
    schemas = _crd("self.missing == 'x'")
    (problem,) = schemas.problems(thing("1"))
    assert problem.startswith("spec: Invalid value: evaluation error")
