"""The Pulumi program for every stack under the mock engine, read as the engine records it:
the resource tree, one provider per cluster, what a preview lists (on a new stack, where
every provider-computed value is unknown, and after a change to `controller/`), the
dependency graph the engine creates in (and deletes in reverse), and the options that keep
a kind teardown from walking into Kueue's finalizers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

import components.resources.fleet as fleet_module
from components.checks.load import load_stack
from components.objects.dispatcher import NAME as DISPATCHER
from components.objects.fleet import build_fleet, bundles, object_key
from tests.helpers.pulumi_harness import (
    FAKE_KUEUE,
    ROOT,
    SECRET_SIG,
    STACKS,
    Monitor,
    Registration,
    Run,
    before,
    engine_config,
    kube_objects,
    prepare_environment,
    run_program,
    secret_value,
    synthetic_environment,
    unknown_paths,
)


def _run(stack: str, preview: bool) -> Run:
    config, secret = engine_config(ROOT / "stacks" / f"Pulumi.{stack}.yaml")
    return run_program(stack, config, secret, preview=preview)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    with synthetic_environment(tmp_path_factory.mktemp("pulumi")):
        return {stack: _run(stack, preview=False) for stack in STACKS}


@pytest.fixture(scope="module")
def previews(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    with synthetic_environment(tmp_path_factory.mktemp("preview")):
        return {stack: _run(stack, preview=True) for stack in STACKS}


def _spec(stack: str) -> Any:
    return load_stack(str(ROOT / "stacks" / f"Pulumi.{stack}.yaml"))[0]


def _provider_of(reg: Registration) -> str:
    urn = reg.provider or reg.providers.get("kubernetes", "")
    return urn.split("::")[-2] if urn else ""


def _cluster_of(reg: Registration, spec: Any) -> str | None:
    """Which cluster a registration belongs to, from its name: `<cluster>:<Kind>:...` for an
    object, `<cluster>-...` for a group, `manager-...` for what the manager gets."""
    if ":" in reg.name:
        return reg.name.split(":")[0]
    for cluster in sorted(spec.clusters, key=lambda c: -len(c.name)):
        if reg.name == cluster.name or reg.name.startswith(f"{cluster.name}-"):
            return cluster.name
    return spec.manager.name if reg.name.startswith("manager-") else None


def _object(reg: Registration) -> dict[str, Any]:
    """An object as the engine received it, secret wrappers removed."""

    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            if SECRET_SIG in value:
                return plain(value["value"])
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value

    return plain(reg.inputs)


def _objects_by_cluster(monitor: Monitor) -> dict[str, dict[str, Registration]]:
    found: dict[str, dict[str, Registration]] = {}
    for reg in kube_objects(monitor):
        found.setdefault(reg.name.split(":")[0], {})[object_key(reg.inputs)] = reg
    return found


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
        installed = "Install" if spec.kueue.install == "managed" else "Existing"
        assert monitor.named(f"{cluster.name}-kueue").typ == f"multikueue-fleet:kueue:{installed}"
        assert (
            monitor.named(f"{cluster.name}-frameworks").typ == "multikueue-fleet:frameworks:Install"
        )
        assert monitor.named(f"{cluster.name}-queues").typ == "multikueue-fleet:objects:Queues"
    for worker in spec.workers:
        assert monitor.named(f"{worker.name}-access").typ == "multikueue-fleet:access:Worker"
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


# --- what a preview lists --------------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_a_new_stack_preview_lists_every_object_with_its_fields(
    previews: dict[str, Run], stack: str
) -> None:
    """On a new stack every kubeconfig, token and digest is unknown; still, each object the
    fleet writes is a resource of its own kind and name on its cluster's provider, and only
    the fields fed by such a value (credentials, a pushed image's digest, endpoints from a
    token) are unknown."""
    spec = _spec(stack)
    registered = _objects_by_cluster(previews[stack].monitor)
    upstream = {object_key(o) for o in FAKE_KUEUE} | {"ConfigMap kueue-system/kueue-manager-config"}
    for built in build_fleet(spec):
        name = built.cluster.name
        expected = {object_key(o): o for o in built.objects if object_key(o) not in upstream}
        assert set(registered.get(name, {})) == set(expected), name
        for key, reg in registered[name].items():
            unknown = unknown_paths(reg.inputs)
            identity = {k: reg.inputs[k] for k in ("apiVersion", "kind", "metadata")}
            assert not unknown_paths(identity), (name, key)
            # A team namespace on a cluster the stack does not create: patched, never owned.
            assert reg.typ.removesuffix("Patch").endswith(f":{reg.inputs['kind']}"), reg.typ
            obj = expected[key]
            if obj["kind"] == "Secret" and "stringData" in obj:
                (field,) = obj["stringData"]
                assert unknown == [f".stringData.{field}.value"], key
            elif DISPATCHER in key and obj["kind"] in ("ConfigMap", "Deployment"):
                continue  # the built image, the workers' endpoints: checked below
            else:
                assert not unknown, (key, unknown)
                written = json.loads(json.dumps(_object(reg)))
                if reg.typ.endswith("Patch"):  # the patch takes the fields over, as it says
                    annotations = written["metadata"].pop("annotations")
                    assert annotations == {"pulumi.com/patchForce": "true"}, key
                assert written == json.loads(json.dumps(obj)), key


@pytest.mark.parametrize("stack", ["dev", "ci", "tas"])
def test_on_kind_the_preview_knows_the_dispatcher_image(
    previews: dict[str, Run], stack: str
) -> None:
    # Loaded into kind under its source-hash tag: known before anything is built.
    deployment = _objects_by_cluster(previews[stack].monitor)["manager"][
        f"Deployment multikueue-fleet-system/{DISPATCHER}"
    ]
    assert not unknown_paths(deployment.inputs)
    image = deployment.inputs["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == f"{DISPATCHER}:{fleet_module.source_hash(ROOT)}"


def test_a_preview_after_a_controller_change_changes_only_the_deployment(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new `controller/` is a new image tag: the image resource and the dispatcher
    Deployment change; every other object's inputs stay as they were."""
    prepare_environment(tmp_path, monkeypatch)
    for stack in ("dev", "gke"):
        monkeypatch.setattr(fleet_module, "source_hash", lambda _root: "aaaa")
        old = {r.name: r.inputs for r in kube_objects(_run(stack, preview=False).monitor)}
        monkeypatch.setattr(fleet_module, "source_hash", lambda _root: "bbbb")
        monitor = _run(stack, preview=True).monitor
        new = {r.name: r.inputs for r in kube_objects(monitor)}
        assert set(new) == set(old), stack
        changed = {n for n in new if n in old and new[n] != old[n]}
        # Secrets hold tokens the mock gives back unknown in a preview: not a change in the
        # object list, and not what this test is about.
        changed = {n for n in changed if ":Secret:" not in n}
        assert changed == {f"manager:Deployment:multikueue-fleet-system/{DISPATCHER}"}, stack
        assert monitor.named("dispatcher-image").inputs["tag"] == "bbbb"


# --- the dependency graph --------------------------------------------------------------------


def _urn(monitor: Monitor, name: str) -> str:
    return monitor.named(name).urn


def _inside(monitor: Monitor, name: str) -> set[str]:
    """The resources a component holds (a dependency on it is one on each of them)."""
    parent = _urn(monitor, name)
    return {r.urn for r in monitor.registered.values() if r.parent == parent}


def _object_urn(monitor: Monitor, cluster: str, key: str) -> str:
    return _objects_by_cluster(monitor)[cluster][key].urn


@pytest.mark.parametrize("stack", STACKS)
def test_creation_order(runs: dict[str, Run], stack: str) -> None:
    """What the engine creates first (and so deletes last)."""
    monitor = runs[stack].monitor
    spec = _spec(stack)
    manager = spec.manager.name
    objects = _objects_by_cluster(monitor)
    for cluster in spec.clusters:
        # Kueue installed, or (kueue.install: existing) found served.
        managed = spec.kueue.install == "managed"
        kueue = _urn(monitor, f"{cluster.name}-kueue-{'manifests' if managed else 'api'}")
        # And Kueue's webhooks answering through the API server (kueue_webhooks.py).
        ready = _urn(monitor, f"{cluster.name}-kueue-webhooks") if managed else kueue
        assert kueue in before(monitor, ready) or ready == kueue
        for key, reg in objects[cluster.name].items():
            if reg.inputs["kind"] not in ("Namespace", "CustomResourceDefinition"):
                assert {kueue, ready} <= before(monitor, reg.urn), (cluster.name, key)
        # Every framework before Kueue: Kueue v0.19.2 sets up a framework's integration
        # from the CRDs it finds, and Trainer's fails for good when its CRDs come later
        # (fleet.py, Fleet._kueue_after_frameworks). A dependency of a component does not
        # hold back its children: checked on each.
        installs = _inside(monitor, f"{cluster.name}-frameworks")
        framework_bundles = [
            b for b in bundles(spec, cluster) if b.name not in ("kueue", "clusterprofile-crd")
        ]
        assert len(installs) == len(framework_bundles), cluster.name
        assert installs <= before(monitor, kueue), cluster.name
        for install in installs:
            assert kueue not in before(monitor, install), install
        # A LocalQueue after its ClusterQueue (and deleted before it).
        for lq in objects[cluster.name].values():
            if lq.inputs["kind"] == "LocalQueue":
                cq = objects[cluster.name][f"ClusterQueue {lq.inputs['spec']['clusterQueue']}"]
                assert cq.urn in before(monitor, lq.urn), lq.name
    for worker in spec.workers:
        # The token Secret after its ServiceAccount: the token controller deletes a Secret
        # whose ServiceAccount it cannot find.
        secret = _object_urn(monitor, worker.name, "Secret kueue-system/multikueue-token")
        account = _object_urn(monitor, worker.name, "ServiceAccount kueue-system/multikueue")
        assert account in before(monitor, secret)
        token = _urn(monitor, f"{worker.name}-access-multikueue-token")
        assert secret in before(monitor, token)
    for key, reg in objects[manager].items():
        if reg.inputs["kind"] in ("MultiKueueCluster", "MultiKueueConfig", "AdmissionCheck"):
            after = before(monitor, reg.urn)
            for worker in spec.workers:
                assert _urn(monitor, f"{worker.name}-access-multikueue-token") in after, key
                assert _inside(monitor, f"{worker.name}-frameworks") <= after, key
    for worker in spec.workers:
        # A MultiKueueCluster after what it points at: its kubeconfig Secret, or its
        # ClusterProfile (whose token Secret the access plugin finds by label).
        cluster_urn = _object_urn(monitor, manager, f"MultiKueueCluster {worker.name}")
        pointed = "ClusterProfile" if spec.credentials.mode == "clusterProfile" else "Secret"
        (target,) = [
            r.urn
            for r in objects[manager].values()
            if r.inputs["kind"] == pointed
            and r.inputs["metadata"]["name"] in (worker.name, f"{worker.name}-kubeconfig")
        ]
        assert target in before(monitor, cluster_urn)
    if spec.credentials.mode == "clusterProfile":
        crd = _urn(monitor, f"{manager}-clusterprofile-crd")
        assert crd in before(monitor, _urn(monitor, f"{manager}-kueue-manifests"))
    if spec.dispatcher.enabled:
        policy = _object_urn(monitor, manager, "DispatchPolicy default")
        crds = [
            r for r in objects[manager].values() if r.inputs["kind"] == "CustomResourceDefinition"
        ]
        assert {r.urn for r in crds} <= before(monitor, policy)
    if spec.dispatcher.enabled and spec.dispatcher.run == "local":
        # The token read once its Secret exists, the Secret after its ServiceAccount.
        token = _urn(monitor, "manager-dispatcher-token")
        secret = f"Secret multikueue-fleet-system/{DISPATCHER}-token"
        assert _object_urn(monitor, manager, secret) in before(monitor, token)
        assert _object_urn(
            monitor, manager, f"ServiceAccount multikueue-fleet-system/{DISPATCHER}"
        ) in before(monitor, _object_urn(monitor, manager, secret))
    elif spec.dispatcher.enabled:
        deployment = _object_urn(
            monitor, manager, f"Deployment multikueue-fleet-system/{DISPATCHER}"
        )
        after = before(monitor, deployment)
        for key in ("ServiceAccount {}", "ConfigMap {}"):
            named = key.format(f"multikueue-fleet-system/{DISPATCHER}")
            assert _object_urn(monitor, manager, named) in after
        if not spec.dispatcher.image:
            assert _urn(monitor, "dispatcher-image") in after


def test_trainer_runtimes_wait_for_the_trainer_manager(runs: dict[str, Run]) -> None:
    # Trainer's ClusterTrainingRuntimes pass its validating webhook (failurePolicy: Fail).
    monitor = runs["gke"].monitor
    for cluster in _spec("gke").clusters:
        if "trainer" not in cluster.frameworks:
            continue
        runtimes = _urn(monitor, f"{cluster.name}-frameworks-kubeflow-trainer-runtimes")
        trainer = _urn(monitor, f"{cluster.name}-frameworks-kubeflow-trainer")
        assert trainer in before(monitor, runtimes)
        # Trainer's controller runs every TrainJob as a JobSet: JobSet's install first, as
        # Kueue's own e2e does (hack/testing/e2e-common.sh).
        assert _urn(monitor, f"{cluster.name}-frameworks-jobset") in before(monitor, trainer)


# --- teardown on clusters the stack creates ---------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_objects_go_with_the_cluster_the_stack_created(runs: dict[str, Run], stack: str) -> None:
    """Deleting (or replacing) a kind, GKE or EKS cluster the stack created takes everything
    on it: the engine never calls Delete for a resource whose `deletedWith` resource is
    deleted in the same run (pulumi/pulumi v3.259.0 pkg/resource/deploy/step.go,
    isDeletedWith), so no object waits on a Kueue finalizer. Only `existing` clusters, which
    outlive the fleet, keep per-object deletion."""
    monitor = runs[stack].monitor
    spec = _spec(stack)
    for reg in monitor.registered.values():
        cluster_name = _cluster_of(reg, spec)
        if cluster_name is None or not (reg.custom or reg.transforms):
            continue
        if reg.typ.startswith("pulumi:providers:") or reg.typ.endswith("kind:Cluster"):
            continue
        if reg.typ.startswith(("gcp:", "aws:", "eks:")) or reg.name.endswith("-eks"):
            continue
        provider = next(c.provider for c in spec.clusters if c.name == cluster_name)
        created = {"kind": f"{cluster_name}-kind", "gke": f"{cluster_name}-gke"}
        created["eks"] = f"{cluster_name}-eks"
        kind = monitor.named(created[provider]).urn if provider in created else ""
        if reg.custom:
            assert reg.deleted_with == kind, (reg.name, reg.deleted_with)
        if reg.typ.startswith("kubernetes:") and not reg.custom:
            # A provider-side group: its children get the option through the transform, and
            # on kind the transform that fits upstream controllers to a kind node.
            expected = (1 if kind else 0) + (1 if provider == "kind" else 0)
            assert reg.transforms == expected, reg.name
    if spec.dispatcher.enabled and not spec.dispatcher.image and spec.manager.provider == "kind":
        assert monitor.named("dispatcher-image").deleted_with == monitor.named("manager-kind").urn


def test_the_transform_sets_deleted_with_on_what_it_reaches() -> None:
    import pulumi

    cluster = object.__new__(pulumi.CustomResource)
    transform = fleet_module.deleted_with_transform(cluster)
    args = pulumi.ResourceTransformArgs(
        custom=True,
        type_="kubernetes:apps/v1:Deployment",
        name="manager-kueue-manifests:kueue-system/kueue-controller-manager",
        props={"kind": "Deployment"},
        opts=pulumi.ResourceOptions(protect=False),
    )
    result = transform(args)
    assert result.opts.deleted_with is cluster
    assert result.props == {"kind": "Deployment"}


# --- credentials and images ------------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_secrets_are_secret(runs: dict[str, Run], stack: str) -> None:
    run = runs[stack]
    kubeconfigs, secret = run.resolve(run.exports["kubeconfigs"])
    assert secret
    assert set(kubeconfigs) == {c.name for c in _spec(stack).clusters}
    for reg in kube_objects(run.monitor):
        if reg.inputs["kind"] == "Secret" and "stringData" in reg.inputs:
            (field,) = reg.inputs["stringData"].values()
            value = secret_value(field)
            assert value and "<secret:" not in value, reg.name


def test_dev_kubeconfigs_for_multikueue_are_internal_and_token_based(runs: dict[str, Run]) -> None:
    secret = _objects_by_cluster(runs["dev"].monitor)["manager"][
        "Secret kueue-system/worker1-kubeconfig"
    ]
    text = secret_value(secret.inputs["stringData"]["kubeconfig"])
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
    assert not image.get("platform")  # the provider asks Docker (tests/emulated/test_providers.py)
    assert len(image["kind_cluster_ids"]) == 1 and image["kind_cluster_ids"][0]
    assert image["dockerfile"].endswith("controller/Dockerfile")
    deployment = _objects_by_cluster(monitor)["manager"][
        f"Deployment multikueue-fleet-system/{DISPATCHER}"
    ]
    container = deployment.inputs["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == f"multikueue-fleet-dispatcher:{image['tag']}"
    assert container["imagePullPolicy"] == "IfNotPresent"


def test_cloud_dispatcher_is_pulled_by_digest(runs: dict[str, Run]) -> None:
    deployment = _objects_by_cluster(runs["gke"].monitor)["manager"][
        f"Deployment multikueue-fleet-system/{DISPATCHER}"
    ]
    image = deployment.inputs["spec"]["template"]["spec"]["containers"][0]["image"]
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
    objs = monitor.named("manager-kueue-manifests").inputs["objs"]
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
    groups = [r for r in monitor.of_type("yaml/v2:ConfigGroup")]
    owned = [(r, o) for r in groups for o in r.inputs.get("objs") or []]
    owned += [(r, r.inputs) for r in kube_objects(monitor)]
    for reg, obj in owned:
        key = (_cluster_of(reg, spec) or "", object_key(obj))
        assert key not in seen, f"{key} in both {seen[key]} and {reg.name}"
        seen[key] = reg.name


# --- objects with deploy-time fields ---------------------------------------------------------


def _config_map(name: str, data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"k": data},
    }


def test_only_the_fields_a_deploy_time_value_reaches_wait_for_it() -> None:
    """In a preview one value is unknown and one secret: the object list, the names and the
    fields neither reaches are plain; the field the unknown one reaches is unknown; the one
    the secret reaches is secret and nothing else is."""
    import asyncio

    import pulumi
    from pulumi.runtime import settings

    from components.resources.kube_objects import with_deploy_time_values

    def build(v: Any) -> list[dict[str, Any]]:
        return [
            _config_map("fixed", "plain"),
            _config_map("a", v["image"]),
            _config_map("b", v["token"]),
        ]

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    settings.SETTINGS.dry_run = True
    try:
        unknown = pulumi.Output(set(), asyncio.ensure_future(_value("x")), _value(False))
        token = pulumi.Output.secret("t")
        fixed, image, secret = with_deploy_time_values(build, {"image": unknown, "token": token})
        assert fixed == _config_map("fixed", "plain")
        assert image["metadata"] == {"name": "a"} and isinstance(image["data"]["k"], pulumi.Output)
        assert secret["metadata"] == {"name": "b"}

        async def read() -> tuple[bool, bool, Any, bool]:
            field = secret["data"]["k"]
            return (
                await image["data"]["k"].is_known(),
                await field.is_secret(),
                await field.future(),
                await image["data"]["k"].is_secret(),
            )

        known, is_secret, value, image_secret = loop.run_until_complete(read())
        assert (known, is_secret, value, image_secret) == (False, True, "t", False)
    finally:
        settings.SETTINGS.dry_run = False
        loop.close()


async def _value(value: Any) -> Any:
    return value


def test_objects_whose_names_depend_on_a_value_are_refused() -> None:
    from components.resources.kube_objects import with_deploy_time_values

    with pytest.raises(ValueError, match="depend on the value of name"):
        with_deploy_time_values(lambda v: [_config_map(v["name"], "x")], {"name": "n"})


def test_a_deployed_stack_adopts_its_objects_where_they_were(runs: dict[str, Run]) -> None:
    """Each object carries an alias to the URN the grouped layout gave it, so `up` on a stack
    deployed before moves it in state instead of creating it again ("already exists")."""
    objects = _objects_by_cluster(runs["dev"].monitor)
    expected = {
        ("manager", "ClusterQueue cluster-queue"): (
            "manager-queues:cluster-queue",
            "manager-queues",
        ),
        ("worker1", "ServiceAccount kueue-system/multikueue"): (
            "worker1-access-identities:kueue-system/multikueue",
            "worker1-access-identities",
        ),
        ("manager", "MultiKueueCluster worker1"): (
            "manager-multikueue:worker1",
            "manager-multikueue",
        ),
        ("manager", "Namespace multikueue-fleet-system"): (
            "manager-dispatcher-namespace:multikueue-fleet-system",
            "manager-dispatcher-namespace",
        ),
        ("manager", f"Deployment multikueue-fleet-system/{DISPATCHER}"): (
            f"manager-dispatcher:multikueue-fleet-system/{DISPATCHER}",
            "manager-dispatcher",
        ),
    }
    for (cluster, key), (name, group) in expected.items():
        (alias,) = [a["spec"] for a in objects[cluster][key].aliases]
        assert alias["name"] == name
        assert alias["parentUrn"].endswith(f"kubernetes:yaml/v2:ConfigGroup::{group}")
    (secret,) = objects["manager"]["Secret kueue-system/worker1-kubeconfig"].aliases
    assert secret["spec"]["name"] == "manager-worker1-kubeconfig"
    assert secret["spec"]["parentUrn"].endswith("multikueue-fleet:index:Fleet::fleet")
    assert all(len(r.aliases) == 1 for r in kube_objects(runs["dev"].monitor))


@pytest.mark.parametrize("stack", STACKS)
def test_tokens_know_their_cluster_by_its_identity(runs: dict[str, Run], stack: str) -> None:
    spec = _spec(stack)
    monitor = runs[stack].monitor
    for worker in spec.workers:
        cluster = monitor.named(f"{worker.name}-access-multikueue-token").inputs["cluster"]
        if worker.provider == "kind":
            assert len(cluster) == 16  # a hash of the CA kind made for this cluster
        else:
            assert cluster.startswith(f"{worker.provider}/"), cluster


@pytest.mark.parametrize("stack", STACKS)
def test_a_token_is_replaced_with_the_secret_it_is_read_from(
    runs: dict[str, Run], stack: str
) -> None:
    """Rotating a worker's credentials is `pulumi up --replace` of its ServiceAccount
    (docs/operations.md): its token Secret is replaced with it (a legacy token is the
    account's UID, signed), and each Token that reads a Secret with that Secret
    (replaceWith), so the kubeconfigs on the manager carry the new token, never the old."""
    monitor = runs[stack].monitor
    objects = kube_objects(monitor)
    secrets = {r.name: r.urn for r in objects if r.typ.endswith(":Secret")}
    accounts = {r.name: r.urn for r in objects if r.typ.endswith(":ServiceAccount")}
    checked = 0
    for reg in objects:
        if reg.typ.endswith(":Secret") and reg.inputs.get("type") == (
            "kubernetes.io/service-account-token"
        ):
            cluster, _, rest = reg.name.partition(":Secret:")
            namespace = rest.split("/")[0]
            owner = reg.inputs["metadata"]["annotations"]["kubernetes.io/service-account.name"]
            account = accounts[f"{cluster}:ServiceAccount:{namespace}/{owner}"]
            assert reg.replace_with == [account], reg.name
            checked += 1
    assert checked >= len(_spec(stack).workers)
    tokens = monitor.of_type("multikueue-fleet:Token")
    assert tokens
    for token in tokens:
        namespace, secret = token.inputs["namespace"], token.inputs["secret"]
        cluster = token.name.split("-access-")[0] if "-access-" in token.name else "manager"
        urn = secrets[f"{cluster}:Secret:{namespace}/{secret}"]
        assert token.replace_with == [urn], (token.name, token.replace_with)


def test_the_engine_is_asked_to_replace_exactly_the_objects_with_immutable_fields(
    runs: dict[str, Run],
) -> None:
    """LocalQueue spec.clusterQueue is immutable (CEL self == oldSelf in Kueue v0.19.2's
    CRD): the engine gets replaceOnChanges for that path; a ClusterQueue, whose fields may
    change in place, does not. Every object is deleted first when replaced (its name is
    fixed)."""
    objects = kube_objects(runs["dev"].monitor)
    local_queues = [r for r in objects if r.typ.endswith(":LocalQueue")]
    assert local_queues
    for reg in local_queues:
        assert reg.replace_on_changes == ["spec.clusterQueue"]
        assert reg.delete_before_replace
    for reg in objects:
        if reg.typ.endswith(":ClusterQueue"):
            assert reg.replace_on_changes == []
        # A fixed name: any replacement (a user's --replace too) must delete first.
        assert reg.delete_before_replace, reg.name


def test_the_dispatcher_image_is_built_for_the_platform_the_stack_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The image resource gets `dispatcher.platform` (docker build --platform), whatever
    machine runs pulumi up; without it, a kind manager's image is built for the Docker
    engine's machine (the provider asks it), another's for linux/amd64."""
    prepare_environment(tmp_path, monkeypatch)
    config, secret = engine_config(ROOT / "stacks" / "Pulumi.dev.yaml")
    default = run_program("dev", config, secret).monitor.named("dispatcher-image")
    assert not default.inputs.get("platform")
    dispatcher = json.loads(config.get("multikueue-fleet:dispatcher", "{}"))
    config["multikueue-fleet:dispatcher"] = json.dumps({**dispatcher, "platform": "linux/arm64"})
    arm = run_program("dev", config, secret).monitor.named("dispatcher-image")
    assert arm.inputs["platform"] == "linux/arm64"


def test_team_namespaces_on_existing_clusters_are_used_never_owned(
    tmp_path: Path, runs: dict[str, Run], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A LocalQueue's namespace on an `existing` cluster may be a team's, with its work in
    it: it is a Patch resource there (applied whether it exists or not, never deleted:
    pulumi-kubernetes v4.32.0 await.go 190-206, 958-962), aliased to the Namespace resource
    an older stack registered; on a cluster the stack creates it stays an owned Namespace."""
    config, secret = engine_config(ROOT / "stacks" / "Pulumi.existing.yaml")
    queues = json.loads(config["multikueue-fleet:queues"])
    queues["localQueues"].append(
        {"namespace": "team-a", "name": "lq", "clusterQueue": "cluster-queue"}
    )
    config["multikueue-fleet:queues"] = json.dumps(queues)
    prepare_environment(tmp_path, monkeypatch)
    monitor = run_program("existing", config, secret).monitor
    spec = _spec("existing")
    for cluster in spec.clusters:
        (ns,) = [r for r in kube_objects(monitor) if r.name == f"{cluster.name}:Namespace:team-a"]
        assert ns.typ == "kubernetes:core/v1:NamespacePatch"
        assert ns.inputs["metadata"]["annotations"]["pulumi.com/patchForce"] == "true"
        assert any(a.get("spec", {}).get("type") == "kubernetes:core/v1:Namespace"
                   for a in ns.aliases), ns.aliases  # fmt: skip
        # The LocalQueue still waits for its namespace.
        (lq,) = [
            r for r in kube_objects(monitor) if r.name == f"{cluster.name}:LocalQueue:team-a/lq"
        ]
        assert ns.urn in before(monitor, lq.urn)
    dev = [r for r in kube_objects(runs["dev"].monitor) if r.name.endswith(":Namespace:team-a")]
    assert dev and {r.typ for r in dev} == {"kubernetes:core/v1:Namespace"}


@pytest.mark.parametrize("stack", STACKS)
def test_the_queues_are_drained_before_they_are_deleted(runs: dict[str, Run], stack: str) -> None:
    """Deleted before what it was created after: each cluster's drain before its queues, the
    manager's before its MultiKueue objects and before the workers' drains (while MultiKueue
    still reaches them); only on `existing` clusters (on one the stack creates, the queues
    go with it)."""
    monitor = runs[stack].monitor
    spec = _spec(stack)
    drains = {
        r.name: r.urn for r in monitor.of_type("pulumi-python:dynamic/multikueue-fleet:QueueDrain")
    }
    lasting = [c for c in spec.clusters if c.provider == "existing"]
    assert set(drains) == {f"{c.name}-queue-drain" for c in lasting}
    objects = _objects_by_cluster(monitor)
    for cluster in lasting:
        after = before(monitor, drains[f"{cluster.name}-queue-drain"])
        queues = {
            r.urn for r in objects[cluster.name].values() if r.inputs["kind"] == "ClusterQueue"
        }
        assert queues and queues <= after, cluster.name
        if cluster.role == "manager":
            multikueue = {
                r.urn
                for r in objects[cluster.name].values()
                if r.inputs["kind"] in ("AdmissionCheck", "MultiKueueCluster", "MultiKueueConfig")
            }
            assert multikueue <= after
            workers = {drains[f"{w.name}-queue-drain"] for w in spec.workers if w in lasting}
            assert workers <= after


@pytest.mark.parametrize("stack", ["dev", "tas"])
def test_kueue_objects_wait_for_the_immutable_fields_check(
    runs: dict[str, Run], stack: str
) -> None:
    """The fields Kueue refuses to change are checked against the deployed state by one
    resource per cluster (components/resources/immutable.py); every Kueue object there is
    applied after it, so a refused change leaves the cluster as it was."""
    monitor = runs[stack].monitor
    spec = _spec(stack)
    guarded = {"Topology", "ResourceFlavor", "AdmissionCheck", "ClusterQueue", "LocalQueue"}
    for cluster, objects in _objects_by_cluster(monitor).items():
        guard = _urn(monitor, f"{cluster}-immutable-fields")
        inputs = monitor.registered[guard].inputs
        if cluster == spec.manager.name:
            assert any(k.startswith("AdmissionCheck ") for k in inputs["objects"])
        # What is deployed is read from the cluster itself (the state may be ahead of it
        # after an `up` that failed past the guard): it gets the cluster's kubeconfig.
        assert inputs.get("kubeconfig"), (cluster, sorted(inputs))
        for key, reg in objects.items():
            if key.split(" ")[0] in guarded:
                assert guard in before(monitor, reg.urn), (cluster, key)


# --- GPU node pools on GKE and EKS -----------------------------------------------------------


def test_gke_gpu_pool_is_provisioned_and_kueue_waits_for_it(runs: dict[str, Run]) -> None:
    """The gke stack's T4 worker gets a GPU node pool: the accelerators, the driver GKE
    installs, the GPU taint, the zone; Kueue's install on that cluster waits for both of
    its node pools (a Deployment before any node would wait out the provider's timeout)."""
    monitor = runs["gke"].monitor
    pool = monitor.named("ew4-t4-gpu-nodes")
    assert pool.typ == "gcp:container/nodePool:NodePool"
    config = pool.inputs["nodeConfig"]
    assert config["guestAccelerators"] == [
        {
            "type": "nvidia-tesla-t4",
            "count": 4,
            "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"},
        }
    ]
    assert config["taints"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}
    ]
    assert config["machineType"] == "n1-standard-32"
    assert pool.inputs["nodeLocations"] == ["europe-west4-b"]
    assert pool.inputs["nodeCount"] == 1
    # Only the cluster that asks for one has a GPU pool.
    assert [r.name for r in monitor.of_type("container/nodePool:NodePool") if "gpu" in r.name] == [
        "ew4-t4-gpu-nodes"
    ]
    for cluster in _spec("gke").clusters:
        kueue = _inside(monitor, f"{cluster.name}-kueue")
        pools = {_urn(monitor, f"{cluster.name}-nodes")}
        if cluster.name == "ew4-t4":
            pools.add(pool.urn)
        for urn in kueue:
            assert pools <= before(monitor, urn), (cluster.name, urn)


def test_eks_gpu_node_group_is_provisioned_and_kueue_waits_for_it() -> None:
    config, secret = engine_config(ROOT / "stacks" / "Pulumi.eks.yaml")
    workers = json.loads(config["multikueue-fleet:workers"])
    workers[0]["eks"]["gpuPool"] = {
        "instanceType": "g4dn.12xlarge",
        "nodeCount": 2,
        "nodeLabels": {"example.com/accelerator": "nvidia-tesla-t4"},
    }
    config["multikueue-fleet:workers"] = json.dumps(workers)
    monitor = run_program("eks", config, secret).monitor
    (group,) = monitor.of_type("eks:index:ManagedNodeGroup")
    assert group.name == "euw1-gpu-nodes"
    assert group.inputs["amiType"] == "BOTTLEROCKET_x86_64_NVIDIA"
    assert group.inputs["instanceTypes"] == ["g4dn.12xlarge"]
    assert group.inputs["scalingConfig"] == {"desiredSize": 2, "minSize": 2, "maxSize": 2}
    assert group.inputs["labels"] == {"example.com/accelerator": "nvidia-tesla-t4"}
    assert group.inputs["taints"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}
    ]
    for urn in _inside(monitor, "euw1-kueue"):
        assert {group.urn, _urn(monitor, "euw1-eks")} <= before(monitor, urn)
