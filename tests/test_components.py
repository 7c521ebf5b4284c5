"""The Pulumi program for every stack under the mock engine: the resource tree, one provider
per cluster with every resource on the right one, the dependency order the fleet needs,
secrets kept secret, no duplicate URNs, and that what is registered equals what the
builders produce."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from components.config_source import load_stack
from components.fleet_objects import build_fleet, object_key
from tests.pulumi_harness import (
    FAKE_KUEUE,
    ROOT,
    STACKS,
    Registration,
    Run,
    engine_config,
    prepare_environment,
    run_program,
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    prepare_environment(tmp_path_factory.mktemp("pulumi"))
    out = {}
    for stack in STACKS:
        config, secret = engine_config(ROOT / "stacks" / f"Pulumi.{stack}.yaml")
        out[stack] = run_program(stack, config, secret)
    return out


SECRET_SIG = "4dabf18193072939515e22adb298388d"  # how a secret input reaches the engine


def secret_value(value: Any) -> Any:
    """The value inside Pulumi's secret wrapper; AssertionError when it is not secret."""
    assert isinstance(value, dict) and SECRET_SIG in value, f"not secret: {value!r}"
    return value["value"]


def _spec(stack: str) -> Any:
    return load_stack(str(ROOT / "stacks" / f"Pulumi.{stack}.yaml"))[0]


def _provider_of(reg: Registration) -> str:
    urn = reg.provider or reg.providers.get("kubernetes", "")
    return urn.split("::")[-2] if urn else ""


def _cluster_of(reg: Registration, spec: Any) -> str | None:
    """Which cluster a registration belongs to, from its name: `<cluster>-...`, and
    `manager-...` for what the manager gets about its workers."""
    for cluster in sorted(spec.clusters, key=lambda c: -len(c.name)):
        if reg.name == cluster.name or reg.name.startswith(f"{cluster.name}-"):
            return cluster.name
    return spec.manager.name if reg.name.startswith("manager-") else None


@pytest.mark.parametrize("stack", STACKS)
def test_resource_tree(runs: dict[str, Run], stack: str) -> None:
    monitor = runs[stack].monitor
    spec = _spec(stack)
    (fleet,) = monitor.of_type("multikueue-fleet:index:Fleet")
    kind = {"kind": "Kind", "existing": "Existing", "gke": "Gke", "eks": "Eks"}
    for cluster in spec.clusters:
        component = monitor.named(cluster.name)
        assert component.typ == f"multikueue-fleet:cluster:{kind[cluster.provider]}"
        assert component.parent == fleet.urn
        assert monitor.named(f"{cluster.name}-kueue").typ == "multikueue-fleet:kueue:Install"
        assert (
            monitor.named(f"{cluster.name}-frameworks").typ == "multikueue-fleet:frameworks:Install"
        )
    for worker in spec.workers:
        assert monitor.named(f"{worker.name}-access").typ == "multikueue-fleet:access:Worker"
    # Every resource hangs below the Fleet.
    by_urn = monitor.registered
    for reg in by_urn.values():
        if reg.typ in ("pulumi:pulumi:Stack", "multikueue-fleet:index:Fleet"):
            continue
        parent = reg.parent
        while parent and parent != fleet.urn:
            parent = by_urn[parent].parent
        assert parent == fleet.urn, reg.name


@pytest.mark.parametrize("stack", STACKS)
def test_one_provider_per_cluster_and_everything_on_its_own(
    runs: dict[str, Run], stack: str
) -> None:
    monitor = runs[stack].monitor
    spec = _spec(stack)
    providers = monitor.of_type("pulumi:providers:kubernetes")
    assert sorted(p.name for p in providers) == sorted(f"{c.name}-k8s" for c in spec.clusters)
    for reg in monitor.registered.values():
        if reg.typ.startswith("kubernetes:"):
            cluster = _cluster_of(reg, spec)
            assert cluster is not None, reg.name
            assert _provider_of(reg) == f"{cluster}-k8s", (reg.name, _provider_of(reg))


def _deps(monitor: Any, name: str) -> set[str]:
    return {d.split("::")[-1] for d in monitor.named(name).dependencies}


@pytest.mark.parametrize("stack", STACKS)
def test_dependency_order(runs: dict[str, Run], stack: str) -> None:
    monitor = runs[stack].monitor
    spec = _spec(stack)
    manager = spec.manager.name
    for cluster in spec.clusters:
        kueue = f"{cluster.name}-kueue-manifests"
        assert kueue in _deps(monitor, f"{cluster.name}-queues")
        assert kueue in _deps(monitor, f"{cluster.name}-frameworks")
    for worker in spec.workers:
        assert f"{worker.name}-kueue-manifests" in _deps(monitor, f"{worker.name}-access")
        token = f"{worker.name}-access-multikueue-token"
        assert f"{worker.name}-access-identities" in _deps(monitor, token)
        assert token in _deps(monitor, "manager-multikueue") or any(
            token in _deps(monitor, s.name) for s in monitor.of_type("core/v1:Secret")
        )
    multikueue = _deps(monitor, "manager-multikueue")
    assert f"{manager}-kueue-manifests" in multikueue
    secrets = [
        s.name
        for s in monitor.of_type("core/v1:Secret")
        if s.name
        in {f"manager-{w.name}-kubeconfig" for w in spec.workers}
        | {f"manager-{w.name}-token" for w in spec.workers}
    ]
    assert secrets and set(secrets) <= multikueue  # credentials before their clusters
    if spec.credentials.mode == "clusterProfile":
        assert f"{manager}-clusterprofile-crd" in {
            d.split("::")[-1] for d in monitor.named(f"{manager}-kueue").dependencies
        }
    dispatcher = _deps(monitor, "manager-dispatcher")
    assert {f"manager-{w.name}-reader-kubeconfig" for w in spec.workers} <= dispatcher


def _objs(reg: Registration) -> list[dict[str, Any]]:
    return reg.inputs.get("objs") or []


def _registered_objects(monitor: Any, cluster: str) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for reg in monitor.of_type("yaml/v2:ConfigGroup"):
        if reg.name.startswith(f"{cluster}-") or (
            cluster == "MANAGER" and reg.name.startswith("manager-")
        ):
            found.update({object_key(o): o for o in _objs(reg)})
    for reg in monitor.of_type("core/v1:Secret"):
        if cluster == "MANAGER":
            obj = {"kind": "Secret", "metadata": reg.inputs["metadata"]}
            found[object_key(obj)] = {**reg.inputs, "kind": "Secret"}
    return found


@pytest.mark.parametrize("stack", STACKS)
def test_registered_objects_are_the_builders_objects(runs: dict[str, Run], stack: str) -> None:
    monitor = runs[stack].monitor
    spec = _spec(stack)
    upstream = {object_key(o) for o in FAKE_KUEUE}
    for built in build_fleet(spec):
        name = built.cluster.name
        registered = _registered_objects(monitor, name)
        if built.cluster.role == "manager":
            registered.update(_registered_objects(monitor, "MANAGER"))
        expected = {object_key(o): o for o in built.objects}
        assert set(registered) - upstream == set(expected) - upstream, name
        for key, obj in expected.items():
            got = registered[key]
            if obj["kind"] == "Secret" and "stringData" in obj:
                assert set(secret_value(got["stringData"])) == set(obj["stringData"]), key
                continue  # the content is a credential known at deploy time
            if obj["kind"] in ("ConfigMap", "Deployment") and "dispatcher" in key:
                continue  # hold the built image and endpoints; checked below
            if key == "ConfigMap kueue-system/kueue-manager-config":
                assert got["data"] == obj["data"], key  # our config replaced the shipped one
                continue
            assert json.loads(json.dumps(got)) == json.loads(json.dumps(obj)), key


@pytest.mark.parametrize("stack", STACKS)
def test_secrets_are_secret(runs: dict[str, Run], stack: str) -> None:
    run = runs[stack]
    kubeconfigs, secret = run.resolve(run.exports["kubeconfigs"])
    assert secret
    assert set(kubeconfigs) == {c.name for c in _spec(stack).clusters}
    for reg in run.monitor.of_type("core/v1:Secret"):
        (value,) = secret_value(reg.inputs["stringData"]).values()
        assert value and "<secret:" not in value, reg.name
    for reg in run.monitor.of_type("yaml/v2:ConfigGroup"):
        for obj in _objs(reg):
            assert not (obj["kind"] == "Secret" and obj.get("stringData")), reg.name


def test_dev_kubeconfigs_for_multikueue_are_internal_and_token_based(runs: dict[str, Run]) -> None:
    monitor = runs["dev"].monitor
    secret = monitor.named("manager-worker1-kubeconfig")
    text = secret_value(secret.inputs["stringData"])["kubeconfig"]
    config = yaml.safe_load(text)
    assert config["clusters"][0]["cluster"] == {
        "server": "https://dev-worker1-control-plane:6443",
        "certificate-authority-data": "V09SS0VSLUNB",
    }
    assert config["users"][0]["user"] == {"token": "token-of-multikueue-token"}


def test_dev_dispatcher_runs_the_image_built_from_controller(runs: dict[str, Run]) -> None:
    monitor = runs["dev"].monitor
    image = monitor.named("dispatcher-image").inputs
    assert image["kind_clusters"] == ["dev-manager"]
    assert image["dockerfile"].endswith("controller/Dockerfile")
    deployment = next(
        o for o in _objs(monitor.named("manager-dispatcher")) if o["kind"] == "Deployment"
    )
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == f"multikueue-fleet-dispatcher:{image['tag']}"
    assert container["imagePullPolicy"] == "IfNotPresent"


def test_cloud_dispatcher_is_pulled_by_digest(runs: dict[str, Run]) -> None:
    deployment = next(
        o
        for o in _objs(runs["gke"].monitor.named("manager-dispatcher"))
        if o["kind"] == "Deployment"
    )
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image.startswith("europe-west4-docker.pkg.dev/my-gcp-project/multikueue-fleet/")
    assert "@sha256:" in image


def test_kind_clusters_get_the_generated_config(runs: dict[str, Run]) -> None:
    monitor = runs["tas"].monitor
    config = yaml.safe_load(monitor.named("worker1-kind").inputs["config"])
    assert config["name"] == "tas-worker1"
    workers = [n for n in config["nodes"] if n["role"] == "worker"]
    assert len(workers) == 2
    assert workers[0]["labels"]["cloud.provider.com/topology-rack"] == "rack-1"
    assert "@sha256:" in workers[0]["image"]


def test_kueue_is_installed_with_our_configuration(runs: dict[str, Run]) -> None:
    monitor = runs["existing"].monitor
    objs = _objs(monitor.named("manager-kueue-manifests"))
    config = next(o for o in objs if o["kind"] == "ConfigMap")
    assert "MultiKueueClusterProfile: true" in config["data"]["controller_manager_config.yaml"]
    deployment = next(o for o in objs if o["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    # Kubernetes 1.35 on the manager: the plugin arrives as an image volume.
    assert pod["volumes"] == [
        {
            "name": "access-provider-plugins",
            "image": {
                "reference": "registry.k8s.io/cluster-inventory-api/secretreader:v0.1.3",
                "pullPolicy": "IfNotPresent",
            },
        }
    ]


def test_cloud_clusters_use_their_providers(runs: dict[str, Run]) -> None:
    gke = runs["gke"].monitor
    cluster = gke.named("ew4-t4-gke")
    assert cluster.typ == "gcp:container/cluster:Cluster"
    assert cluster.inputs["name"] == "prod-ew4-t4"
    assert gke.named("ew4-t4-nodes").inputs["nodeCount"] == 2
    eks = runs["eks"].monitor
    assert eks.named("use1-eks").typ == "eks:index:Cluster"
    assert eks.named("use1-aws").inputs["region"] == "us-east-1"


@pytest.mark.parametrize("stack", STACKS)
def test_no_object_is_registered_twice_on_a_cluster(runs: dict[str, Run], stack: str) -> None:
    # Two Pulumi resources owning one Kubernetes object would fight over it on every up.
    monitor = runs[stack].monitor
    spec = _spec(stack)
    seen: dict[tuple[str, str], str] = {}
    for reg in monitor.of_type("yaml/v2:ConfigGroup"):
        cluster = _cluster_of(reg, spec)
        for obj in _objs(reg):
            key = (cluster or "", object_key(obj))
            assert key not in seen, f"{key} in both {seen[key]} and {reg.name}"
            seen[key] = reg.name
