"""`__main__.py` under Pulumi's mock engine: config read through the SDK exactly as
`pulumi up` passes it, the stack's exports, and a bad config stopped before any
registration."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pulumi
import pytest
import yaml

from tests.helpers.fleet_config import KUBECONFIG
from tests.helpers.pulumi_harness import (
    ROOT,
    STACKS,
    engine_config,
    run_program,
    synthetic_environment,
)


@pytest.fixture(autouse=True)
def environment(tmp_path: Path) -> Iterator[None]:
    with synthetic_environment(tmp_path):
        yield


@pytest.mark.parametrize("stack", STACKS)
def test_program_exports_every_stack(stack: str) -> None:
    config, secret = engine_config(ROOT / "stacks" / f"Pulumi.{stack}.yaml")
    run = run_program(stack, config, secret)
    doc = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]
    workers = json.loads(config["multikueue-fleet:workers"])
    clusters, _ = run.resolve(run.exports["clusters"])
    assert run.exports["fleet"] == doc.get("multikueue-fleet:fleetName", stack)
    assert [c["role"] for c in clusters] == ["manager"] + ["worker"] * len(workers)
    assert [c["name"] for c in clusters[1:]] == [w["name"] for w in workers]
    assert all(c["context"] for c in clusters)
    checks, _ = run.resolve(run.exports["checks"])
    assert checks[0].startswith(f"kubectl --context {clusters[0]['context']} get ")


def test_program_stops_before_registering_anything_on_bad_config() -> None:
    config, secret = engine_config(ROOT / "stacks" / "Pulumi.dev.yaml")
    config["multikueue-fleet:kueue"] = json.dumps({"featureGates": {"Bogus": True}})
    config["multikueue-fleet:workers"] = json.dumps([{"name": "w1", "frameworks": ["batch"]}])
    # RunError: Pulumi prints its message alone, no traceback (pulumi v3.259.0
    # sdk/python/cmd/pulumi-language-python-exec); any other exception gets one.
    with pytest.raises(pulumi.RunError) as info:
        run_program("dev", config, secret)
    assert info.value.__suppress_context__
    text = str(info.value)
    assert "stack 'dev': 3 error(s)" in text
    assert "kueue.featureGates.Bogus: unknown feature gate 'Bogus'" in text
    assert "workers[0].frameworks: 'jobset' is enabled on the manager" in text
    assert "Nothing was changed on any cluster" in text


def test_program_reads_secret_kubeconfigs_through_the_sdk() -> None:
    config, _ = engine_config(ROOT / "stacks" / "Pulumi.dev.yaml")
    # Decrypted by the engine, flagged secret: accepted without the plain-text error.
    with_exec = copy.deepcopy(KUBECONFIG)
    with_exec["users"][0]["user"] = {"exec": {"command": "aws"}}
    config["multikueue-fleet:workerKubeconfigs"] = json.dumps(
        {"worker1": yaml.safe_dump(with_exec)}
    )
    with pytest.raises(pulumi.RunError) as info:
        run_program("dev", config, ["multikueue-fleet:workerKubeconfigs"])
    assert (
        "workerKubeconfigs.worker1: Kueue would reject this kubeconfig: user 'u' runs an "
        "exec credential plugin" in str(info.value)
    )
    assert "plain text" not in str(info.value)


def test_a_kubeconfig_the_user_supplies_is_the_one_registered() -> None:
    from tests.helpers.pulumi_harness import secret_value

    good = yaml.safe_dump(KUBECONFIG)
    config, _ = engine_config(ROOT / "stacks" / "Pulumi.dev.yaml")
    config["multikueue-fleet:workerKubeconfigs"] = json.dumps({"worker2": good})
    run = run_program("dev", config, ["multikueue-fleet:workerKubeconfigs"])
    secret = run.monitor.named("manager:Secret:kueue-system/worker2-kubeconfig")
    assert secret_value(secret.inputs["stringData"]["kubeconfig"]) == good


def _existing_run() -> tuple[dict, dict]:
    config, secret = engine_config(ROOT / "stacks" / "Pulumi.existing.yaml")
    run = run_program("existing", config, secret)
    providers = {p.name: p.inputs for p in run.monitor.of_type("pulumi:providers:kubernetes")}
    kubeconfigs, _ = run.resolve(run.exports["kubeconfigs"])
    return providers, kubeconfigs


def test_existing_clusters_keep_only_their_context(tmp_path: Path) -> None:
    """The stack keeps and exports the chosen context alone, current-context set to it; a
    new context, another current-context or a new user elsewhere in the user's file change
    no provider input."""
    providers, kubeconfigs = _existing_run()
    for name, text in kubeconfigs.items():
        config = yaml.safe_load(text)
        assert [c["name"] for c in config["contexts"]] == [config["current-context"]], name
        assert len(config["clusters"]) == 1 and len(config["users"]) == 1, name
    path = Path(os.environ["KUBECONFIG"])
    edited = yaml.safe_load(path.read_text())
    edited["current-context"] = "lab-b"
    edited["contexts"].append({"name": "elsewhere", "context": {"cluster": "x", "user": "y"}})
    edited["users"].append({"name": "y", "user": {"token": "other"}})
    path.write_text(yaml.safe_dump(edited))
    assert _existing_run()[0] == providers


def test_existing_cluster_providers_have_a_stable_identity() -> None:
    providers, _ = _existing_run()
    assert all(p["clusterIdentifier"].startswith("existing/https://") for p in providers.values())


def test_cloud_cluster_providers_have_a_stable_identity() -> None:
    """Known in a preview, where endpoint and CA are not: an in-place cluster update does not
    replace the provider, nor every object on the cluster."""
    from components.checks.load import load_stack

    for stack in ("gke", "eks"):
        spec = load_stack(str(ROOT / "stacks" / f"Pulumi.{stack}.yaml"))[0]
        config, secret = engine_config(ROOT / "stacks" / f"Pulumi.{stack}.yaml")
        run = run_program(stack, config, secret, preview=True)
        got = {
            p.name: p.inputs["clusterIdentifier"]
            for p in run.monitor.of_type("pulumi:providers:kubernetes")
        }
        expected = {}
        for c in spec.clusters:
            physical = c.physical_name(spec.fleet_name)
            if c.provider == "gke":
                expected[f"{c.name}-k8s"] = f"gke/{c.gke.project}/{c.gke.location}/{physical}"
            elif c.provider == "eks":
                expected[f"{c.name}-k8s"] = f"eks/{c.eks.region}/{physical}"
        assert expected and {k: got[k] for k in expected} == expected, stack


def test_a_context_missing_from_the_kubeconfig_is_one_line() -> None:
    config, secret = engine_config(ROOT / "stacks" / "Pulumi.existing.yaml")
    path = Path(os.environ["KUBECONFIG"])
    doc = yaml.safe_load(path.read_text())
    doc["contexts"] = [c for c in doc["contexts"] if c["name"] != "lab-a"]
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(pulumi.RunError) as info:
        run_program("existing", config, secret)
    message = str(info.value)
    assert "\n" not in message
    assert "has no context 'lab-a'" in message and ".existing.context" in message


PROVIDER_CHOICES = (
    "deleteUnreachable",
    "upsertExistingObjects",
    "enableServerSideApply",
    "kubeClientSettings",
)


def test_provider_choices_do_not_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pulumi_kubernetes 4.34.2 fills an unset provider option from PULUMI_K8S_* variables;
    each one the fleet relies on is set, so a user's environment cannot drop a lasting
    cluster's state on an outage or let a create take over an existing object."""
    from components.checks.load import load_stack

    monkeypatch.setenv("PULUMI_K8S_DELETE_UNREACHABLE", "true")
    monkeypatch.setenv("PULUMI_K8S_UPSERT_EXISTING_OBJECTS", "true")
    monkeypatch.setenv("PULUMI_K8S_ENABLE_SERVER_SIDE_APPLY", "false")
    monkeypatch.setenv("PULUMI_K8S_CLIENT_TIMEOUT", "5")
    for stack in ("dev", "gke"):
        spec = load_stack(str(ROOT / "stacks" / f"Pulumi.{stack}.yaml"))[0]
        config, secret = engine_config(ROOT / "stacks" / f"Pulumi.{stack}.yaml")
        run = run_program(stack, config, secret, preview=True)
        providers = {p.name: p.inputs for p in run.monitor.of_type("pulumi:providers:kubernetes")}
        for c in spec.clusters:
            inputs = providers[f"{c.name}-k8s"]
            got = {
                k: json.loads(v) if isinstance(v, str) else v
                for k, v in inputs.items()
                if k in PROVIDER_CHOICES
            }
            assert got == {
                "deleteUnreachable": c.provider == "kind",
                "upsertExistingObjects": False,
                "enableServerSideApply": True,
                # A just-restarted API server's OpenAPI document takes more than client-go's
                # 32 s on a loaded host; a provider that misses it fails the whole preview.
                "kubeClientSettings": {"timeout": 120},
            }, (stack, c.name, got)


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("", "the file is empty"),
        (None, "it is a directory, not a kubeconfig file"),
        ("contexts:\n- \nclusters:\n", "it has no context 'lab-manager' (it has: none)"),
        (
            "contexts:\n- name: lab-manager\n  context:\n",
            "its context 'lab-manager' names no cluster and user",
        ),
        ("- just\n- a list\n", "it is not a kubeconfig"),
        ("{", "it is not valid YAML"),
    ],
)
def test_an_unusable_kubeconfig_file_is_one_line_naming_it(content: str | None, said: str) -> None:
    """Not `TypeError: 'NoneType'...`, `AttributeError` or `IsADirectoryError` tracebacks:
    the file, what is wrong with it, and the keys that choose it."""
    config, secret = engine_config(ROOT / "stacks" / "Pulumi.existing.yaml")
    path = Path(os.environ["KUBECONFIG"])
    if content is None:
        path.unlink()
        path.mkdir()
    else:
        path.write_text(content)
    with pytest.raises(pulumi.RunError) as info:
        run_program("existing", config, secret)
    message = str(info.value)
    assert "\n" not in message, message
    assert f"cluster 'manager': kubeconfig {path}: {said}" in message, message
    assert "manager.existing" in message


def test_the_loopback_stack_before_its_fleet_is_up_says_to_start_it(tmp_path: Path) -> None:
    """Its kubeconfigs are the launcher's: missing, the fleet is not up, and the fix is that
    command, not another kubeconfig."""
    config, secret = engine_config(ROOT / "stacks" / "Pulumi.loopback.yaml")
    manager = json.loads(config["multikueue-fleet:manager"])
    missing = tmp_path / ".fleet" / "loopback" / "manager" / "admin.kubeconfig"
    manager["existing"]["kubeconfigPath"] = str(missing)
    config["multikueue-fleet:manager"] = json.dumps(manager)
    with pytest.raises(pulumi.RunError) as info:
        run_program("loopback", config, secret)
    message = str(info.value)
    assert "\n" not in message, message
    assert message == (
        f"cluster 'manager': kubeconfig {missing}: no such file; start the loopback fleet "
        "first: python -m loopback up --stack loopback"
    )


@pytest.mark.parametrize(("stack", "plugin"), [("gke", "gke-gcloud-auth-plugin"), ("eks", "aws")])
def test_a_plain_pulumi_up_without_the_credential_plugin_stops_before_any_cluster(
    stack: str, plugin: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pulumi up` (not mkf, not up.sh) of a cloud stack on a machine without the plugin its
    kubeconfigs run: one line naming it and how to install it, before a cluster is
    registered; `pulumi preview` says the same as a warning and goes on."""
    bare = tmp_path / "bare-bin"
    bare.mkdir()
    monkeypatch.setenv("PATH", str(bare))
    warned: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *_a, **_k: warned.append(message))
    config, secret = engine_config(ROOT / "stacks" / f"Pulumi.{stack}.yaml")
    with pytest.raises(Exception, match=f"cannot create the fleet: missing {plugin}, ") as info:
        run_program(stack, config, secret)
    assert "install" in str(info.value) and "\n" not in str(info.value).strip()
    run = run_program(stack, config, secret, preview=True)
    assert [w for w in warned if f"missing {plugin}" in w and "`pulumi up` stops here" in w]
    assert run.exports["fleet"]
