"""Running `__main__.py` under Pulumi's mock engine: per-type fake outputs for what a
provider would return (kind kubeconfigs, tokens, the built image, cloud endpoints), a
synthetic Kueue release in place of the download, and a monitor that records every
registration with its parent, provider, dependencies, options and inputs.

In preview mode (a dry run, `set_mocks(..., preview=True)`), a resource being created gets
back only its inputs, as the real engine gives a preview: what a provider computes (a kind
cluster's kubeconfig, a token, an image digest, a cloud endpoint) stays unknown, as on a
new stack (pulumi/pulumi v3.272.0, sdk/python/lib/pulumi/runtime/rpc.py resolve_properties:
in a dry run a missing or null output is unknown)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import runpy
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml
from google.protobuf import json_format
from pulumi.runtime.mocks import MockMonitor

from components.model.frameworks import FRAMEWORKS
from components.model.versions import (
    PINNED_SHA256,
    Bundle,
    clusterprofile_crd_bundle,
    kueue_bundle,
)
from components.resources.program_env import CREDENTIAL_PLUGINS
from components.upstream import gomodule
from components.upstream.gomodule import KUSTOMIZATIONS
from components.upstream.releases import cache_key

ROOT = Path(__file__).resolve().parents[2]
STACKS = sorted(
    p.name[len("Pulumi.") : -len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml")
)

# A stand-in for Kueue's release manifests: the objects the edits look for, and a few more.
FAKE_KUEUE = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}},
    {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "workloads.kueue.x-k8s.io"},
        "spec": {},
    },
    {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "kueue-controller-manager", "namespace": "kueue-system"},
    },
    {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
        "data": {"controller_manager_config.yaml": "shipped: default\n"},
    },
    {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "kueue-controller-manager", "namespace": "kueue-system"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "manager",
                            "image": "registry.k8s.io/kueue/kueue:v0.19.2",
                            "args": [
                                "--config=/controller_manager_config.yaml",
                                "--zap-log-level=2",
                            ],
                        }
                    ]
                }
            }
        },
    },
    {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "kueue-webhook-service", "namespace": "kueue-system"},
    },
]

# The contexts the `existing` stack names, and the `loopback` stack's (whose kubeconfig files
# the launcher writes: engine_config points them here instead).
EXISTING_CONTEXTS = ("lab-manager", "lab-a", "lab-b", "manager", "worker1", "worker2")
FAKE_KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "current-context": "lab-manager",
    "clusters": [
        {
            "name": n,
            "cluster": {"server": f"https://{n}.local:6443", "certificate-authority-data": "Q0E="},
        }
        for n in EXISTING_CONTEXTS
    ],
    "users": [{"name": "me", "user": {"token": "t"}}],
    "contexts": [{"name": n, "context": {"cluster": n, "user": "me"}} for n in EXISTING_CONTEXTS],
}


def _kind_kubeconfig(name: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": f"kind-{name}",
            "clusters": [
                {
                    "name": f"kind-{name}",
                    "cluster": {
                        "server": "https://127.0.0.1:40000",
                        "certificate-authority-data": "S0lORA==",
                    },
                }
            ],
            "users": [{"name": f"kind-{name}", "user": {"client-key-data": "a2V5"}}],
            "contexts": [
                {
                    "name": f"kind-{name}",
                    "context": {"cluster": f"kind-{name}", "user": f"kind-{name}"},
                }
            ],
        }
    )


def fake_outputs(typ: str, inputs: dict[str, Any]) -> dict[str, Any]:
    if typ == "pulumi-python:dynamic/kind:Cluster":
        name = inputs["name"]
        return {
            "kubeconfig": _kind_kubeconfig(name),
            "context": f"kind-{name}",
            "ca_data": "S0lORA==",
            "internal_server": f"https://{name}-control-plane:6443",
        }
    if typ == "pulumi-python:dynamic/multikueue-fleet:Token":
        return {"token": f"token-of-{inputs['secret']}", "ca_data": "V09SS0VSLUNB"}
    if typ == "pulumi-python:dynamic/multikueue-fleet:Image":
        image = f"{inputs['repository']}:{inputs['tag']}"
        if inputs.get("registry"):
            image = f"{inputs['registry']}/{inputs['repository']}@sha256:{'0' * 64}"
        return {"image": image}
    if typ == "gcp:container/cluster:Cluster":
        return {"endpoint": "34.1.2.3", "masterAuth": {"clusterCaCertificate": "R0tFLUNB"}}
    if typ == "eks:index:Cluster":
        server = f"https://{inputs['name']}.eks.example.com"
        return {
            "kubeconfigJson": json.dumps({"clusters": [{"cluster": {"server": server}}]}),
            "kubeconfig": {},
        }
    return {}


# How the engine passes an unknown value (pulumi/pulumi v3.272.0,
# sdk/python/lib/pulumi/runtime/rpc.py, UNKNOWN).
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"


@dataclass
class Registration:
    typ: str
    name: str
    urn: str
    parent: str
    provider: str
    providers: dict[str, str]
    dependencies: list[str]
    inputs: dict[str, Any]
    custom: bool
    deleted_with: str
    transforms: int
    aliases: list[dict[str, Any]]
    replace_on_changes: list[str]
    delete_before_replace: bool
    replace_with: list[str]


class Mocks(pulumi.runtime.Mocks):
    def __init__(self, preview: bool = False) -> None:
        self.preview = preview

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        computed = {} if self.preview else fake_outputs(args.typ, args.inputs)
        return (f"{args.name}_id" if args.custom else ""), {**args.inputs, **computed}

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
        return {}


class Monitor(MockMonitor):
    def __init__(self, mocks: Mocks) -> None:
        super().__init__(mocks)
        self.registered: dict[str, Registration] = {}

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)
        assert response.urn not in self.registered, f"duplicate URN {response.urn}"
        self.registered[response.urn] = Registration(
            request.type,
            request.name,
            response.urn,
            request.parent,
            request.provider,
            dict(request.providers),
            list(request.dependencies),
            json_format.MessageToDict(request.object),
            request.custom,
            request.deletedWith,
            len(request.transforms),
            [json_format.MessageToDict(a) for a in request.aliases],
            list(request.replaceOnChanges),
            request.deleteBeforeReplace,
            list(request.replace_with),
        )
        return response

    def of_type(self, suffix: str) -> list[Registration]:
        return [r for r in self.registered.values() if r.typ.endswith(suffix)]

    def named(self, name: str) -> Registration:
        (found,) = [r for r in self.registered.values() if r.name == name]
        return found


@dataclass
class Run:
    monitor: Monitor
    exports: dict[str, Any] = field(default_factory=dict)
    loop: asyncio.AbstractEventLoop | None = None

    def resolve(self, exported: Any) -> tuple[Any, bool]:
        """(value, is it secret) of an export (an Output, or a structure of them)."""
        assert self.loop is not None
        asyncio.set_event_loop(self.loop)  # the loop this program's Outputs live on
        output = pulumi.Output.from_input(exported)

        async def read() -> tuple[Any, bool]:
            return await output.future(), await output.is_secret()

        return self.loop.run_until_complete(read())


def engine_config(stack_file: Path) -> tuple[dict[str, str], list[str]]:
    """Config as the engine hands it to the program: one string per key, objects as JSON."""
    doc = yaml.safe_load(stack_file.read_text())
    config, secret = {}, []
    for key, value in (doc.get("config") or {}).items():
        for cluster in value if key.endswith(":workers") else [value]:
            if isinstance(cluster, dict) and isinstance(cluster.get("existing"), dict):
                # Files only a running loopback fleet has: KUBECONFIG's stand-in instead.
                cluster["existing"].pop("kubeconfigPath", None)
        config[key] = value if isinstance(value, str) else json.dumps(value)
        if "secure" in json.dumps(value):
            secret.append(key)
    return config, secret


@contextlib.contextmanager
def synthetic_environment(tmp: Path) -> Iterator[None]:
    """prepare_environment for the length of the block, then the process as it was: later
    tests (and the fleets they start) never see the synthetic files or their pins."""
    with pytest.MonkeyPatch.context() as patch:
        prepare_environment(tmp, patch)
        yield


def prepare_environment(tmp: Path, patch: pytest.MonkeyPatch) -> None:
    """The synthetic Kueue release and every other manifest bundle in a private upstream
    cache, pinned (in this process only) as what they are, each kustomize bundle as a
    synthetic folder, and a kubeconfig with the contexts the `existing` stack names: set
    by `patch` (a test's monkeypatch, or synthetic_environment's), undone with it."""
    cache = tmp / "upstream"
    cache.mkdir(parents=True, exist_ok=True)

    def seed(url: str, text: str) -> None:
        (cache / cache_key(url)).write_text(text)
        patch.setitem(PINNED_SHA256, url, hashlib.sha256(text.encode()).hexdigest())

    seed(kueue_bundle("v0.19.2").url, yaml.safe_dump_all(FAKE_KUEUE))
    # Every other manifest bundle the fleet applies (the provider no longer downloads them:
    # the program reads them through the verified cache), as one synthetic object each.
    others = [b for f in FRAMEWORKS.values() for b in f.bundles if b.method == "manifests"]
    for bundle in [*others, clusterprofile_crd_bundle()]:
        synthetic = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"synthetic-{bundle.name}", "namespace": "default"},
        }
        seed(bundle.url, yaml.safe_dump(synthetic))

    # Every kustomize bundle as an empty kustomization, in place of its checked copy of the
    # Go module (components/upstream/gomodule.py, kustomization_source): no module here.
    def kustomization_source(bundle: Bundle, into: Path) -> Path:
        entry = into / f"synthetic-{bundle.name}" / KUSTOMIZATIONS[bundle.name].entry
        entry.mkdir(parents=True, exist_ok=True)
        (entry / "kustomization.yaml").write_text("resources: []\n")
        return entry

    patch.setattr(gomodule, "kustomization_source", kustomization_source)
    # The cloud stacks' credential plugins, as stubs: the program asks for them on PATH.
    plugins = tmp / "plugins"
    plugins.mkdir(exist_ok=True)
    for command, _how in CREDENTIAL_PLUGINS.values():
        stub = plugins / command
        stub.write_text("#!/bin/sh\nexit 1\n")
        stub.chmod(0o755)
    patch.setenv("PATH", f"{plugins}{os.pathsep}{os.environ.get('PATH', '')}")
    patch.setenv("MKF_UPSTREAM_CACHE", str(cache))
    kubeconfig = tmp / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(FAKE_KUBECONFIG))
    patch.setenv("KUBECONFIG", str(kubeconfig))


def run_program(
    stack: str, config: dict[str, str], secret: list[str], preview: bool = False
) -> Run:
    mocks = Mocks(preview)
    monitor = Monitor(mocks)
    # Pulumi's test decorator runs on the current event loop; asyncio.run() in other tests
    # leaves none behind, so each program gets a fresh one.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    pulumi.runtime.set_all_config(config, secret)
    pulumi.runtime.set_mocks(
        mocks, project="multikueue-fleet", stack=stack, preview=preview, monitor=monitor
    )
    result = Run(monitor, loop=loop)

    @pulumi.runtime.test
    def program() -> None:
        runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")
        result.exports.update(pulumi.runtime.get_root_resource().outputs)  # type: ignore[union-attr]

    program()
    return result


def kube_objects(monitor: Monitor) -> list[Registration]:
    """The Kubernetes objects registered one resource each (not the upstream groups)."""
    return [r for r in monitor.registered.values() if r.custom and r.typ.startswith("kubernetes:")]


def before(monitor: Monitor, urn: str) -> set[str]:
    """Every URN the engine creates before `urn` (and deletes after it): its dependencies,
    theirs, and so on; depending on a component means depending on all it contains."""
    children: dict[str, list[str]] = {}
    for reg in monitor.registered.values():
        children.setdefault(reg.parent, []).append(reg.urn)
    seen: set[str] = set()
    todo = list(monitor.registered[urn].dependencies)
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        todo += children.get(current, [])
        todo += monitor.registered[current].dependencies
    return seen


def unknown_paths(value: Any, path: str = "") -> list[str]:
    """Where an input holds a value unknown at preview."""
    if value == UNKNOWN:
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in unknown_paths(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in unknown_paths(v, f"{path}[{i}]")]
    return []


SECRET_SIG = "4dabf18193072939515e22adb298388d"  # how a secret input reaches the engine


def secret_value(value: Any) -> Any:
    """The value inside Pulumi's secret wrapper; AssertionError when it is not secret."""
    assert isinstance(value, dict) and SECRET_SIG in value, f"not secret: {value!r}"
    return value["value"]
