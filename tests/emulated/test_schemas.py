"""Every object the builders write for every shipped stack, checked against the real Kueue
v0.19.2 (and ClusterProfile) CRDs: OpenAPI v3 value rules, CEL rules, pruning. And the same
check in `validate`/`render`, offline, once the pinned release is in the download cache."""

from __future__ import annotations

import copy
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import yaml

from components.checks.crd_schema import CrdSchemas, schema_problems
from components.checks.load import load_stack
from components.model.versions import KUEUE_VERSION, kueue_bundle
from components.objects.fleet import build_fleet
from components.upstream.releases import cache_key
from tests.helpers.stack_texts import cli
from tests.helpers.upstream_data import real_crd_documents, real_kueue_manifest, why_missing

ROOT = Path(__file__).resolve().parents[2]
STACKS = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in (ROOT / "stacks").glob("*.yaml"))


@pytest.mark.parametrize("stack", STACKS)
def test_every_object_of_every_stack_matches_its_crd(
    stack: str, upstream_crds: CrdSchemas, tmp_path: Path
) -> None:
    # The stack file is only read: a copy, so nothing can write beside the real one.
    copy = tmp_path / f"Pulumi.{stack}.yaml"
    shutil.copy(ROOT / "stacks" / f"Pulumi.{stack}.yaml", copy)
    spec, _ = load_stack(str(copy))
    assert schema_problems(spec, upstream_crds) == []
    checked = Counter(
        o["kind"]
        for c in build_fleet(spec)
        for o in c.objects
        if upstream_crds.knows(o["apiVersion"], o["kind"])
    )
    # not vacuous: the queue objects and the MultiKueue objects are all there
    for kind in ("ResourceFlavor", "ClusterQueue", "LocalQueue", "AdmissionCheck"):
        assert checked[kind] >= 1, (stack, kind)
    assert checked["MultiKueueConfig"] == 1
    assert checked["MultiKueueCluster"] == len(spec.workers) or checked["ClusterProfile"] == len(
        spec.workers
    )


def test_a_schema_error_is_reported_at_the_object(upstream_crds: CrdSchemas) -> None:
    spec, _ = load_stack(str(ROOT / "stacks" / "Pulumi.dev.yaml"))
    crds = copy.deepcopy(
        next(d for d in real_crd_documents() if d["spec"]["names"]["kind"] == "LocalQueue")
    )
    # A LocalQueue CRD that allows only another ClusterQueue name: the dev stack breaks it.
    for version in crds["spec"]["versions"]:
        props = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        props["clusterQueue"]["enum"] = ["elsewhere"]
    tightened = upstream_crds.merged(CrdSchemas.from_documents([crds]))
    problems = schema_problems(spec, tightened)
    assert problems and {p.severity for p in problems} == {"error"}
    assert problems[0].path == "manager: LocalQueue default/user-queue"
    assert "clusterQueue" in problems[0].message


def _cli(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    return cli(*args, env={"MKF_UPSTREAM_CACHE": str(cache)})


def test_validate_checks_schemas_offline_from_the_download_cache(tmp_path: Path) -> None:
    manifest = real_kueue_manifest()
    if manifest is None:
        pytest.skip(why_missing())
    cache = tmp_path / "cache"
    cache.mkdir()
    assert _cli("validate", "--stack", "dev", cache=cache).returncode == 0  # nothing cached
    # The cached release, with its LocalQueue CRD tightened so the dev stack breaks it.
    docs = list(yaml.load_all(manifest, Loader=yaml.CSafeLoader))
    for doc in docs:
        if (
            doc
            and doc["kind"] == "CustomResourceDefinition"
            and (doc["metadata"]["name"] == "localqueues.kueue.x-k8s.io")
        ):
            for version in doc["spec"]["versions"]:
                spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
                spec["properties"]["clusterQueue"]["enum"] = ["elsewhere"]
    url = kueue_bundle(KUEUE_VERSION).url
    (cache / cache_key(url)).write_text(yaml.dump_all(docs, Dumper=yaml.CSafeDumper))
    result = _cli("validate", "--stack", "dev", cache=cache)
    assert result.returncode == 1
    assert "manager: LocalQueue default/user-queue" in result.stderr
    rendered = _cli("render", "--stack", "dev", "--out", str(tmp_path / "out"), cache=cache)
    assert rendered.returncode == 1 and not (tmp_path / "out").exists()
