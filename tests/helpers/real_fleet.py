"""The real tier's fixtures: binaries built from tools/go.mod (a test skips, saying why, only
where Go is absent), one loopback control plane that Kueue is started on again and again with
each configuration the project renders, a whole loopback fleet of a stack, and that fleet
joined by MultiKueue with exactly the credentials and RBAC the project generates."""

from __future__ import annotations

import base64
import copy
import os
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from components.checks.dispatcher import BUILTIN_DISPATCHERS as KUEUE_DISPATCHERS
from components.checks.load import load_stack
from components.model.spec import ClusterSpec, FleetSpec
from components.model.stack_file import stack_path
from components.objects.dispatcher import NAME as DISPATCHER
from components.objects.fleet import cluster_objects
from components.objects.kubeconfig import worker_kubeconfig
from components.objects.kueue_config import KUEUE_NAMESPACE
from components.objects.kueue_install import kueue_objects
from components.objects.labels import FLEET_NAMESPACE
from components.objects.worker_access import MULTIKUEUE_TOKEN, READER_TOKEN
from components.upstream import releases, toolchain
from loopback import fleet as loopback_fleet
from loopback.client import Client
from loopback.controlplane import ADMIN, ControlPlane
from loopback.dispatcher import TOKEN_SECONDS, LocalDispatcher, rendered_settings
from loopback.fleet import cluster_crds
from loopback.kueue import VISIBILITY_CERT_DIR, Kueue, ensure_visibility_certs, split_install
from loopback.processes import log_tail, others_running, stop_all
from tests.helpers.ambient import as_a_user
from tests.helpers.upstream_data import real_kueue_manifest, why_missing

ROOT = Path(__file__).resolve().parents[2]
STACKS = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in (ROOT / "stacks").glob("*.yaml"))


def go_missing() -> str:
    if shutil.which("go") is None:
        return (
            "Go is not on PATH: the real tier builds kube-apiserver, etcd, "
            "kube-controller-manager and Kueue v0.19.2 from tools/go.mod (install Go 1.26.8 "
            "or later)"
        )
    return ""


def binaries(tools: tuple[str, ...] = toolchain.CONTROL_PLANE) -> dict[str, Path]:
    if why := go_missing():
        pytest.skip(why)
    return toolchain.build(list(tools), log=lambda _line: None)


def manifest() -> str:
    text = real_kueue_manifest()
    if text is None:
        pytest.skip(why_missing())
    return text


def pulumi_env(tmp: Path, passphrase: str) -> dict[str, str]:
    """An environment for the built Pulumi engine that reaches no network: the engine first
    on PATH, then this interpreter's environment (which has the pinned SDKs; the language
    host runs the first python3 on PATH), a fresh PULUMI_HOME, a file backend in `tmp`; no
    cloud token, no ambient plugins, no test's synthetic release cache, no KUBECONFIG."""
    (tmp / "state").mkdir(exist_ok=True)
    # pulumi-kubernetes leaves each provider's kubeconfig in $TMPDIR (engine_tmp.py): here,
    # in the test's folder, not the machine's /tmp.
    (tmp / "tmp").mkdir(exist_ok=True)
    env = {
        **os.environ,
        "TMPDIR": str(tmp / "tmp"),
        "PATH": os.pathsep.join([str(toolchain.BIN_DIR), str(Path(sys.executable).parent)])
        + os.pathsep
        + os.environ.get("PATH", ""),
        "PULUMI_HOME": str(tmp / "pulumi-home"),
        "PULUMI_BACKEND_URL": f"file://{tmp / 'state'}",
        "PULUMI_CONFIG_PASSPHRASE": passphrase,
        "PULUMI_SKIP_UPDATE_CHECK": "1",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
    }
    return as_a_user(env, "PULUMI_IGNORE_AMBIENT_PLUGINS", "PULUMI_ACCESS_TOKEN")


def real_fetch(url: str) -> str:
    """The pinned release itself, never the synthetic one the mock-engine tests point
    MKF_UPSTREAM_CACHE at (tests/helpers/pulumi_harness.py)."""
    return releases.fetch(url, cache_dir=releases.DEFAULT_CACHE)


def spec_of(stack: str) -> FleetSpec:
    spec, _ = load_stack(str(stack_path(stack)))
    return spec


def kueue_key(objects: list[dict[str, Any]]) -> str:
    """What Kueue reads at start from its install: its Configuration and its flags."""
    config, args, _ = split_install(objects)
    return yaml.safe_dump(config, sort_keys=True) + "\n".join(args)


class KueuePlane:
    """One control plane on which Kueue runs with one configuration at a time."""

    def __init__(self, folder: Path) -> None:
        self.plane = ControlPlane("real-tier", folder, binaries())
        self.plane.prepare()
        self.plane.start_etcd()
        self.plane.start_egress(sys.executable)
        self.plane.start_apiserver()
        self.plane.wait_serving(120)
        self.plane.start_controller_manager()
        self.plane.wait_controllers(120)
        self.client = Client(self.plane.kubeconfig_path(ADMIN))
        self.made_visibility = ensure_visibility_certs()
        self.kueue: Kueue | None = None
        self.kueue_key: str | None = None  # what the running Kueue was started with

    def start_kueue(
        self,
        objects: list[dict[str, Any]],
        timeout: float = 120,
        crds: list[dict[str, Any]] | None = None,
    ) -> Kueue:
        self.stop_kueue()
        kueue = Kueue(self.plane, objects, self.plane.binaries["kueue"])
        kueue.apply_install(self.client, crds or [])
        kueue.start(self.client)
        self.kueue = kueue
        kueue.wait_ready(self.client, timeout)
        return kueue

    def start_kueue_for(self, spec: FleetSpec, cluster: ClusterSpec) -> Kueue:
        """Kueue as `cluster` runs it; the one running already where it was started with the
        same configuration, gate flags and CRDs (another stack's cluster often is: a restart
        would judge nothing new, and each costs most of a minute on two cores)."""
        objects = kueue_objects(manifest(), spec, cluster)
        crds = cluster_crds(spec, cluster, real_fetch)
        key = kueue_key(objects) + "\n".join(sorted(c["metadata"]["name"] for c in crds))
        running = [p for p in self.plane.started if p.name.endswith("/kueue")]
        if (
            self.kueue is not None
            and key == self.kueue_key
            and not any(p.exited() for p in running)
        ):
            return self.kueue
        kueue = self.start_kueue(objects, crds=crds)
        self.kueue_key = key
        return kueue

    def stop_kueue(self) -> None:
        kueue_records = [p for p in self.plane.started if p.name.endswith("/kueue")]
        stop_all([p.as_dict() for p in kueue_records])  # Kueue's own grace (loopback/kueue.py)
        self.plane.started = [p for p in self.plane.started if p not in kueue_records]
        self.kueue = None
        self.kueue_key = None

    def close(self) -> None:
        self.stop_kueue()
        stop_all([p.as_dict() for p in self.plane.started])
        if self.made_visibility and not others_running("kueue"):
            shutil.rmtree(VISIBILITY_CERT_DIR, ignore_errors=True)


@pytest.fixture(scope="module")
def kueue_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KueuePlane]:
    plane = KueuePlane(tmp_path_factory.mktemp("plane"))
    try:
        yield plane
    finally:
        plane.close()


@pytest.fixture(scope="session")
def dev_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[loopback_fleet.Fleet]:
    """The dev stack's manager and two workers, each with Kueue running as rendered and the
    LeaderWorkerSet controller (loopback/operators.py says why not JobSet's); one for the
    whole run: bringing it up costs three minutes on two cores, and every module that uses
    it leaves it as it found it (a worker stopped is started again)."""
    binaries(toolchain.CONTROL_PLANE + toolchain.FRAMEWORK_CONTROLLERS)
    manifest()
    state = tmp_path_factory.mktemp("fleet")
    started = loopback_fleet.up(
        "dev",
        state,
        framework_controllers=True,
        log=lambda _line: None,
        fetch=real_fetch,
    )
    try:
        yield started
    finally:
        keep_logs(state, tmp_path_factory.mktemp("fleet-logs"))
        loopback_fleet.down(state, log=lambda _line: None)


def keep_logs(state: Path, into: Path) -> None:
    """Every process's log, copied before `down` removes the state folder: pytest keeps its
    last runs' temporary folders, so a failure can be read whole afterwards."""
    for log in state.glob("*/*.log"):
        (into / log.parent.name).mkdir(exist_ok=True)
        shutil.copyfile(log, into / log.parent.name / log.name)


# --- MultiKueue across a whole loopback fleet -------------------------------------------

K = "kueue.x-k8s.io"


def apply_all(client: Client, objects: tuple[dict[str, Any], ...]) -> list[str]:
    """Server-side apply of each object in order; what the server refused, one line each."""
    refused = []
    for obj in objects:
        try:
            client.apply(copy.deepcopy(obj))
        except ApiException as exc:
            refused.append(f"{obj['kind']} {obj['metadata'].get('name')}: {exc.status} {exc.body}")
        if obj["kind"] == "CustomResourceDefinition":
            client.wait_established(obj["metadata"]["name"])
    return refused


def filled_token(client: Client, secret: str, namespace: str, timeout: float = 60) -> str:
    """A service-account-token Secret's token, once the token controller has filled it."""
    deadline = time.monotonic() + timeout
    while True:
        found = client.get("v1", "Secret", secret, namespace) or {}
        token = (found.get("data") or {}).get("token")
        if token:
            return base64.b64decode(token).decode()
        assert time.monotonic() < deadline, f"the token controller never filled {secret}"
        time.sleep(0.3)


def active_condition(client: Client, name: str) -> dict[str, Any] | None:
    """The Active condition of the manager's MultiKueueCluster `name`."""
    found = client.get(f"{K}/v1beta2", "MultiKueueCluster", name)
    for condition in ((found or {}).get("status") or {}).get("conditions") or []:
        if condition["type"] == "Active":
            return condition
    return None


@dataclass
class MultiKueueFleet:
    """A loopback fleet with every cluster's objects applied as the project renders them,
    the workers' generated credentials filled in on the manager."""

    fleet: loopback_fleet.Fleet
    spec: FleetSpec
    manager: Client
    workers: dict[str, Client]
    manager_objects: tuple[dict[str, Any], ...]
    # The Active condition of each worker's MultiKueueCluster when connect() returned.
    states: dict[str, dict[str, Any] | None]
    # How much each cluster's Kueue had logged by then: from its start to every worker
    # connected, what its RBAC and the credentials decided. The fleet is shared by the run,
    # and a later test that restarts a worker's API server makes Kueue's watches there
    # forbidden for a moment, until the new server's authorizer has loaded its RBAC.
    logged: dict[str, int] = field(default_factory=dict)

    def kueue_log(self, cluster: str) -> Path:
        return self.fleet.state / cluster / "kueue.log"

    def connection_log(self, cluster: str) -> str:
        """What `cluster`'s Kueue logged until every worker was connected."""
        text = self.kueue_log(cluster).read_bytes()[: self.logged.get(cluster)]
        return text.decode(errors="replace")

    def all_active(self) -> bool:
        return all(s and s["status"] == "True" for s in self.states.values())

    def wait_active(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            self.states = {w: active_condition(self.manager, w) for w in self.workers}
            if self.all_active() or time.monotonic() > deadline:
                return
            time.sleep(1)


def connect_multikueue(
    fleet: loopback_fleet.Fleet, spec: FleetSpec, timeout: float = 120
) -> MultiKueueFleet:
    """What `pulumi up` does across the fleet, with the project's builders: each worker's
    objects (queues, MultiKueue's identity and the dispatcher's read-only one), the tokens
    the token controller fills, the kubeconfigs built from them
    (components/objects/kubeconfig.worker_kubeconfig, as components/resources/fleet.py
    does), then the manager's objects with those kubeconfigs; and waits up to `timeout`
    for every MultiKueueCluster to be Active (the caller asserts it)."""
    credentials: dict[str, str] = {}
    readers: dict[str, str] = {}
    workers: dict[str, Client] = {}
    for worker in spec.workers:
        client = Client(fleet.kubeconfig(worker.name))
        workers[worker.name] = client
        refused = apply_all(client, cluster_objects(spec, worker).objects)
        assert not refused, f"{worker.name}: the API server refused\n" + "\n".join(refused)
        admin = yaml.safe_load(fleet.kubeconfig(worker.name).read_text())
        cluster = admin["clusters"][0]["cluster"]

        def kubeconfig(token: str, name: str = worker.name, at: dict[str, Any] = cluster) -> str:
            server, ca = at["server"], at["certificate-authority-data"]
            return yaml.safe_dump(worker_kubeconfig(name, server, ca, token))

        credentials[worker.name] = kubeconfig(
            filled_token(client, MULTIKUEUE_TOKEN, KUEUE_NAMESPACE)
        )
        readers[worker.name] = kubeconfig(filled_token(client, READER_TOKEN, FLEET_NAMESPACE))
    manager = Client(fleet.kubeconfig(spec.manager.name))
    objects = cluster_objects(spec, spec.manager, credentials, readers).objects
    refused = apply_all(manager, objects)
    assert not refused, "manager: the API server refused\n" + "\n".join(refused)
    connected = MultiKueueFleet(fleet, spec, manager, workers, objects, {})
    connected.wait_active(timeout)
    connected.logged = {
        name: connected.kueue_log(name).stat().st_size
        for name in fleet.clusters
        if connected.kueue_log(name).exists()
    }
    return connected


@pytest.fixture(scope="session")
def dev_multikueue(dev_fleet: loopback_fleet.Fleet) -> MultiKueueFleet:
    """The dev fleet joined by MultiKueue, once per run; its `states` say whether every
    worker became Active (the test asserts it, with the manager's Kueue log)."""
    return connect_multikueue(dev_fleet, spec_of("dev"))


def start_dispatcher(connected: MultiKueueFleet) -> LocalDispatcher:
    """The project's dispatcher as a local process against the manager (loopback/dispatcher.py):
    the settings the project renders and a token of its own ServiceAccount, so it has exactly
    the pod's rights. Started, not yet ready (its wait_ready says when)."""
    fleet = connected.fleet
    manager = connected.spec.manager.name
    local = LocalDispatcher(fleet.state / manager)
    local.prepare(
        rendered_settings(connected.manager_objects),
        fleet.kubeconfig(manager),
        connected.manager.service_account_token(DISPATCHER, FLEET_NAMESPACE, TOKEN_SECONDS),
    )
    fleet.record_process(manager, local.start())
    return local


def not_active_message(connected: MultiKueueFleet) -> str:
    log = connected.kueue_log(connected.spec.manager.name)
    return f"{connected.states}; manager Kueue log ends: {log_tail(log, 20)}"


LOOPBACK_STACK = Path(__file__).resolve().parents[2] / "stacks" / "Pulumi.loopback.yaml"


def loopback_document(workers: int) -> dict[str, Any]:
    """stacks/Pulumi.loopback.yaml as a document with `workers` workers: the first ones as
    listed, then copies of the last, each named and in a region of its own."""
    document = yaml.safe_load(LOOPBACK_STACK.read_text())
    document.pop("encryptionsalt", None)
    listed = document["config"]["multikueue-fleet:workers"]
    while len(listed) < workers:
        extra = copy.deepcopy(listed[-1])
        number = len(listed) + 1
        extra["name"] = f"worker{number}"
        extra["labels"] = {"region": f"local-{chr(ord('a') + number - 1)}"}
        extra["existing"] = {"context": extra["name"], "kubeconfigPath": "unused.kubeconfig"}
        listed.append(extra)
    del listed[workers:]
    return document


def without_our_dispatcher(document: dict[str, Any]) -> dict[str, Any]:
    """The same stack with no dispatcher of ours: Kueue's default, AllAtOnce."""
    theirs = copy.deepcopy(document)
    theirs["config"]["multikueue-fleet:dispatcher"] = {"enabled": False}
    return theirs


@dataclass
class DispatchedFleet:
    """A loopback fleet joined by MultiKueue, dispatched by ours (`local`) or by Kueue."""

    connected: MultiKueueFleet
    local: LocalDispatcher | None

    @property
    def fleet(self) -> loopback_fleet.Fleet:
        return self.connected.fleet

    def down(self) -> None:
        if self.local is not None:
            self.local.stop()
        loopback_fleet.down(self.fleet.state, log=lambda _line: None)


def dispatched_fleet(
    document: dict[str, Any], folder: Path, *, dispatcher: str = "policy", **up_options: Any
) -> DispatchedFleet:
    """The loopback fleet of a stack document (with our dispatcher enabled in it), up in
    `folder`, every worker Active, dispatched by `dispatcher`: "policy" (ours, started and
    ready), or Kueue's "AllAtOnce" (its default) or "Incremental". The objects are always
    those of the fleet with our dispatcher (its reader identity on the workers included),
    which Kueue's ignore; Kueue runs as the dispatcher's stack renders it. A step that fails
    brings the fleet down again; the options go to loopback.fleet.up."""
    if dispatcher not in ("policy", *KUEUE_DISPATCHERS):
        raise ValueError(f"{dispatcher!r}: not policy, AllAtOnce or Incremental")

    def written(name: str, content: dict[str, Any]) -> Path:
        stack = folder / name / "Pulumi.bench.yaml"
        stack.parent.mkdir(parents=True, exist_ok=True)
        stack.write_text(yaml.safe_dump(content, sort_keys=False))
        return stack

    ours_stack = written("ours", document)
    objects_spec = load_stack(str(ours_stack))[0]
    stack, spec = ours_stack, objects_spec
    if dispatcher == "AllAtOnce":
        stack = written("kueue", without_our_dispatcher(document))
        spec = load_stack(str(stack))[0]
    elif dispatcher == "Incremental":
        # A name no stack may give (components/checks/dispatcher.py refuses a built-in one,
        # as a user's mistake); here on purpose, after the checks, so that Kueue's
        # configuration names its Incremental dispatcher. Nothing of ours is started.
        named = spec.dispatcher.model_copy(update={"name": KUEUE_DISPATCHERS[dispatcher]})
        spec = spec.model_copy(update={"dispatcher": named})
    up_options.setdefault("log", lambda _line: None)
    fleet = loopback_fleet.up(str(stack), folder / "fleet", spec=spec, **up_options)
    local = None
    try:
        connected = connect_multikueue(fleet, objects_spec)
        if not connected.all_active():
            raise RuntimeError(f"MultiKueue not Active: {not_active_message(connected)}")
        if dispatcher == "policy":
            local = start_dispatcher(connected)
            local.wait_ready(120)
        return DispatchedFleet(connected, local)
    except BaseException:
        if local is not None:
            local.stop()
        loopback_fleet.down(folder / "fleet", log=lambda _line: None)
        raise
