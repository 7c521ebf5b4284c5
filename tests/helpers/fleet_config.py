"""A small valid fleet config to vary, and loading it as a stack file is loaded."""

from __future__ import annotations

import base64
import copy
from typing import Any

import yaml

from components.checks.validate import validate
from components.model.problems import Problem
from components.model.spec import FleetSpec, load_spec
from components.objects.fleet import ClusterObjects, build_fleet
from components.objects.kueue_config import CONFIG_KEY, CONFIG_MAP
from components.objects.kueue_install import KUEUE_CONTAINER, KUEUE_DEPLOYMENT

BASE: dict[str, Any] = {
    "manager": {"name": "manager", "provider": "kind"},
    "workers": [
        {"name": "worker1", "labels": {"region": "a"}},
        {"name": "worker2", "labels": {"region": "b"}},
    ],
    "frameworks": ["batch", "jobset", "leaderworkerset"],
    # Acknowledges that the manager does not wait for PodsReady with LeaderWorkerSets on it,
    # so that a test sees only the problems it provokes (tests/unit/test_kueue_config.py has the
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


def tas() -> dict[str, Any]:
    config = base()
    config["queues"]["topologies"] = [
        {"name": "default", "levels": ["example.com/block", "kubernetes.io/hostname"]}
    ]
    config["queues"]["flavors"] = [
        {"name": "default-flavor", "nodeLabels": {"pool": "a"}, "topology": "default"}
    ]
    return config


KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "current-context": "w",
    "clusters": [
        {
            "name": "w",
            "cluster": {"server": "https://w.example:6443", "certificate-authority-data": "Q0E="},
        }
    ],
    "users": [{"name": "u", "user": {"token": "t0k3n"}}],
    "contexts": [{"name": "w", "context": {"cluster": "w", "user": "u"}}],
}


def checked_spec(config: dict[str, Any]) -> FleetSpec:
    """The spec of `config`, which must have no error."""
    spec, problems = load(config)
    assert not [p for p in problems if p.severity == "error"], problems
    return spec


PEM = "-----BEGIN CERTIFICATE-----\nMIIBdzCCAR2gAwIBAgIBADAK\n-----END CERTIFICATE-----\n"


def as_deployed(text: str) -> str:
    """The settings as `pulumi up` writes them: each worker's endpoint, which render shows as
    a placeholder (components/objects/multikueue.py), filled in with one of its form."""
    settings = yaml.safe_load(text)
    for profile in settings.get("clusterProfiles") or ():
        if profile["server"].startswith("<secret: "):
            profile["server"] = f"https://{profile['name']}.example:6443"
        if profile.get("certificateAuthorityData", "").startswith("<secret: "):
            profile["certificateAuthorityData"] = base64.b64encode(PEM.encode()).decode()
    return yaml.safe_dump(settings)


# The two objects of Kueue's release manifest that the fleet edits (its ConfigMap and its
# Deployment), as small as kueue_objects takes: the unit tier's stand-in for the release.
KUEUE_SKELETON = f"""apiVersion: v1
kind: ConfigMap
metadata: {{name: {CONFIG_MAP}, namespace: kueue-system}}
data: {{{CONFIG_KEY}: ""}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {KUEUE_DEPLOYMENT}, namespace: kueue-system}}
spec:
  template:
    spec:
      containers: [{{name: {KUEUE_CONTAINER}, image: kueue, args: []}}]
"""
