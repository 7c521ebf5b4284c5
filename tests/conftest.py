"""Shared helpers: a small valid fleet config to vary, and loading it like a stack file."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.checks.crd_schema import CrdSchemas
from components.checks.validate import validate
from components.model.problems import Problem
from components.model.spec import FleetSpec, load_spec
from components.objects.fleet import ClusterObjects, build_fleet
from tests.envtest import apiserver  # noqa: F401 (the real-API-server fixture, for all tests)
from tests.upstream_data import find_upstream_crds

BASE: dict[str, Any] = {
    "manager": {"name": "manager", "provider": "kind"},
    "workers": [
        {"name": "worker1", "labels": {"region": "a"}},
        {"name": "worker2", "labels": {"region": "b"}},
    ],
    "frameworks": ["batch", "jobset", "leaderworkerset"],
    # Acknowledges that the manager does not wait for PodsReady with LeaderWorkerSets on it,
    # so that a test sees only the problems it provokes (tests/test_kueue_config.py has the
    # warning this silences).
    "kueue": {"waitForPodsReady": {"onManager": False}},
    "queues": {
        "flavors": [{"name": "default-flavor"}],
        "clusterQueues": [
            {
                "name": "cq",
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {"name": "default-flavor", "resources": {"cpu": 4, "memory": "8Gi"}}
                        ],
                    }
                ],
            }
        ],
        "localQueues": [{"namespace": "team-a", "name": "lq", "clusterQueue": "cq"}],
    },
}


def base() -> dict[str, Any]:
    return copy.deepcopy(BASE)


def load(
    config: dict[str, Any], stack: str = "t", secret_keys: frozenset[str] = frozenset()
) -> tuple[FleetSpec, list[Problem]]:
    """Like load_checked, but returns problems instead of raising."""
    spec, problems = load_spec(config, stack, secret_keys)
    return spec, problems + (validate(spec) if spec is not None else [])  # type: ignore[return-value]


def problems_of(config: dict[str, Any], **kw: Any) -> list[Problem]:
    return load(config, **kw)[1]


def only(problems: list[Problem], path: str) -> Problem:
    """The single problem at `path`, failing with the whole list when it is not there."""
    found = [p for p in problems if p.path == path]
    assert len(found) == 1, f"expected one problem at {path}, got:\n" + "\n".join(
        map(str, problems)
    )
    return found[0]


def fleet(config: dict[str, Any]) -> dict[str, ClusterObjects]:
    spec, problems = load(config)
    assert not [p for p in problems if p.severity == "error"], problems
    return {c.directory: c for c in build_fleet(spec)}


def find(cluster: ClusterObjects, kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [
        o
        for o in cluster.objects
        if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]


@pytest.fixture
def config() -> dict[str, Any]:
    return base()


@pytest.fixture(scope="session")
def upstream_crds() -> CrdSchemas:
    """Kueue's (and ClusterProfile's) real CRDs; the test skips, saying why, without them."""
    schemas, where = find_upstream_crds()
    if schemas is None:
        pytest.skip(where)
    return schemas


# The real tier's fixtures (tests/real_fleet.py), for every test module.
from tests.real_fleet import dev_fleet, kueue_plane  # noqa: E402, F401
