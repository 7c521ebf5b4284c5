"""A stack's clusters as loopback control planes, each with Kueue v0.19.2 running with the
Configuration and gate flags the project renders for that cluster; and the `down` that
stops exactly what `up` started and removes its state.

State, in the folder given (default .fleet/loopback, ignored by git):
  fleet.json                    what runs: every process (pid, program, log) and cluster
  <cluster>/admin.kubeconfig    cluster-admin, client certificate and CA inline
  <cluster>/kueue-config.yaml   the Configuration Kueue runs with; the changes beside it
  <cluster>/*.log               each process's log
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from components.checks.load import load_stack
from components.model.spec import ClusterSpec, FleetSpec
from components.model.stack_file import stack_path
from components.model.versions import clusterprofile_crd_bundle, kueue_bundle
from components.objects.fleet import bundles
from components.objects.kueue_install import kueue_objects
from components.objects.manifests import documents
from components.upstream import gomodule, releases, toolchain
from loopback.client import Client
from loopback.controlplane import ADMIN, ControlPlane, StartError
from loopback.kueue import VISIBILITY_CERT_DIR, Kueue, ensure_visibility_certs
from loopback.kwok import NodeShape, start_nodes
from loopback.operators import OPERATORS, OperatorProcess, install_manifest
from loopback.processes import Started, others_running, stop_all

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_STATE = ROOT / ".fleet" / "loopback"
RECORD = "fleet.json"
# controller-runtime's leader-election renew deadline (10 s by default, which Kueue and LWS
# keep), and a margin: how long controllers must keep running after a restart is ready.
SETTLE_SECONDS = 12.0

Log = Callable[[str], object]
# The pinned releases' source: the download cache, the release URL, the Go module.
Fetch = Callable[[str], str]


class FleetError(Exception):
    """A one-line reason the command cannot go on, saying what to do."""


# Marks a state folder as one `up` made: `down` removes it whole, so `up` writes only into a
# new or empty folder, or one it marked before (a failed `up` leaves its logs there).
MARK = ".loopback-state"


def claim(state: Path) -> None:
    """Refuses a state folder that holds files `up` did not put there."""
    if state.exists() and not state.is_dir():
        raise FleetError(f"--state {state}: a file, not a folder; give a new or empty folder")
    if state.is_dir() and any(state.iterdir()) and not (state / MARK).exists():
        raise FleetError(
            f"--state {state}: a folder with files of its own, which `down` would remove with "
            "the fleet's state; give a new or empty folder"
        )


def read_record(state: Path) -> dict[str, Any] | None:
    try:
        return json.loads((state / RECORD).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise FleetError(
            f"{state / RECORD} cannot be read ({exc}); remove {state} by hand"
        ) from None


def _save(state: Path, record: dict[str, Any], planes: list[ControlPlane]) -> None:
    record["processes"] = [p.as_dict() for plane in planes for p in plane.started]
    (state / RECORD).write_text(json.dumps(record, indent=2))


class Fleet:
    """A stack's control planes as `up` leaves them. The processes themselves (`planes`,
    `kueues`, `operators`) are known only to the command that started them: there a test can
    stop a cluster's API server and start it again."""

    def __init__(
        self,
        state: Path,
        record: dict[str, Any],
        planes: dict[str, ControlPlane] | None = None,
        kueues: dict[str, Kueue] | None = None,
        operators: dict[str, list[OperatorProcess]] | None = None,
    ) -> None:
        self.state = state
        self.record = record
        self.planes = planes or {}
        self.kueues = kueues or {}
        self.operators = operators or {}

    @property
    def clusters(self) -> dict[str, dict[str, Any]]:
        return self.record["clusters"]

    def kubeconfig(self, cluster: str) -> Path:
        return Path(self.clusters[cluster]["kubeconfig"])

    def _plane(self, cluster: str) -> ControlPlane:
        if cluster not in self.planes:
            raise FleetError(
                f"cluster {cluster!r} was not started by this process: only the command that "
                "ran `up` can stop and restart its API server"
            )
        return self.planes[cluster]

    def _save(self) -> None:
        _save(self.state, self.record, list(self.planes.values()))

    def record_process(self, cluster: str, started: Started) -> None:
        """A process started beside the cluster (a controller run locally), recorded so that
        `down` stops it with the rest."""
        self._plane(cluster).started.append(started)
        self._save()

    def stop_apiserver(self, cluster: str, grace: float = 5.0) -> None:
        """The cluster's API server stopped (its etcd, controller manager and Kueue keep
        running); `down` still stops everything."""
        self._plane(cluster).stop_apiserver(grace)
        self._save()

    def restart_apiserver(self, cluster: str, timeout: float = 120) -> None:
        """The cluster's API server started again on the same address with the same state;
        then, as a kubelet restarts a pod's container, every controller of the cluster that
        exited meanwhile (Kueue and controller-runtime managers exit when they cannot renew
        their leader lease for the renew deadline, 10 s by default), until all are ready."""
        plane = self._plane(cluster)
        plane.restart_apiserver(timeout)
        self._save()
        supervised: list[Kueue | OperatorProcess] = [
            *([self.kueues[cluster]] if cluster in self.kueues else []),
            *self.operators.get(cluster, []),
        ]
        client = Client(plane.kubeconfig_path(ADMIN))
        deadline = time.monotonic() + timeout
        while True:
            for controller in supervised:
                if not controller.running():
                    controller.relaunch(client)
            self._save()
            try:
                for controller in supervised:
                    controller.wait_ready(client, max(deadline - time.monotonic(), 1))
                # Ready is not yet settled: a manager whose lease renewals failed while the
                # server came back (10 s renew deadline) exits a little later. Only once all
                # ran a whole renew deadline past ready is the restart over, as a kubelet's
                # restarts would have settled by then.
                settled = time.monotonic() + SETTLE_SECONDS
                while time.monotonic() < settled and all(c.running() for c in supervised):
                    time.sleep(0.5)
                if all(c.running() for c in supervised):
                    return
                if time.monotonic() > deadline:
                    raise StartError(
                        f"{cluster}: a controller keeps exiting after the API server came back"
                    )
            except StartError:
                # One may exit after it was looked at: its lease ran out as the server came
                # back. Started again, unless nothing exited or the time is up.
                if all(c.running() for c in supervised) or time.monotonic() > deadline:
                    raise


def cluster_crds(
    spec: FleetSpec, cluster: ClusterSpec, fetch: Fetch = releases.fetch
) -> list[dict[str, Any]]:
    """The CRDs a cluster of the stack serves besides Kueue's: the ClusterProfile CRD where
    the stack uses that mode (the pinned release, or its Go module), and each enabled
    framework's kinds from the framework's Go module. Framework controllers do not run here:
    their objects are accepted and watched, never reconciled."""
    crds: list[dict[str, Any]] = []
    for bundle in bundles(spec, cluster):
        if bundle.name == clusterprofile_crd_bundle().name:
            crds += documents(fetch(bundle.url))
    for key in cluster.frameworks or ():
        crds += gomodule.framework_crds(key)
    return crds


def up(
    stack: str,
    state: Path = DEFAULT_STATE,
    *,
    spec: FleetSpec | None = None,
    timeout: float = 180,
    framework_controllers: bool = False,
    kwok: NodeShape | None = None,
    log: Log = print,
    fetch: Fetch = releases.fetch,
) -> Fleet:
    """Starts a control plane and Kueue for each cluster of the stack (or of `spec`), and
    returns once every Kueue serves its webhooks; with `framework_controllers`, also the
    controller of each framework a cluster enables that has one here (loopback/operators.py),
    once Kueue is ready (its webhooks admit their kinds too); with `kwok`, simulated nodes of
    that shape on every worker, with a scheduler and KWOK running their pods
    (loopback/kwok.py). Anything started is stopped
    again when a step fails; the logs stay in `state` until `down`."""
    began = time.monotonic()
    if read_record(state) is not None:
        raise FleetError(
            f"a loopback fleet is already up in {state}: run `python -m loopback down` first"
        )
    claim(state)
    if spec is None:
        spec, _ = load_stack(stack if stack.endswith(".yaml") else str(stack_path(stack)))
    binaries = toolchain.require(list(toolchain.CONTROL_PLANE))
    operators: dict[str, list[OperatorProcess]] = {}
    manifest = fetch(kueue_bundle(spec.kueue.version).url)
    state.mkdir(parents=True, exist_ok=True)
    (state / MARK).touch()
    record: dict[str, Any] = {"stack": spec.stack or stack, "clusters": {}, "processes": []}
    planes: list[ControlPlane] = []
    try:
        for cluster in spec.clusters:
            plane = ControlPlane(cluster.name, state / cluster.name, binaries)
            plane.prepare()
            planes.append(plane)
            plane.start_etcd()
            plane.start_egress(sys.executable)
            plane.start_apiserver()
            record["clusters"][cluster.name] = {
                "role": cluster.role,
                "server": plane.server,
                "kubeconfig": str(plane.kubeconfig_path(ADMIN)),
            }
            _save(state, record, planes)
        for plane in planes:
            plane.wait_serving(timeout)
            plane.start_controller_manager()
            _save(state, record, planes)
        for plane in planes:
            plane.wait_controllers(timeout)
        log(f"  control planes ready in {time.monotonic() - began:.1f} s")
        if ensure_visibility_certs():
            record["made"] = [str(VISIBILITY_CERT_DIR)]
        kueues: list[tuple[Kueue, Client]] = []
        for plane, cluster in zip(planes, spec.clusters, strict=True):
            kueue = Kueue(plane, kueue_objects(manifest, spec, cluster), binaries["kueue"])
            client = Client(plane.kubeconfig_path(ADMIN))
            kueue.apply_install(client, cluster_crds(spec, cluster, fetch))
            kueue.start(client)
            _save(state, record, planes)
            record["clusters"][cluster.name]["kueueConfigChanges"] = kueue.changes
            kueues.append((kueue, client))
        wait_all_ready(kueues, timeout)
        _save(state, record, planes)
        if framework_controllers:
            operators = _start_operators(spec, planes, timeout)
            _save(state, record, planes)
        if kwok is not None:
            workers = {c.name for c in spec.workers}
            start_nodes([p for p in planes if p.name in workers], kwok, timeout)
            _save(state, record, planes)
            log(f"  simulated nodes ready on {len(workers)} workers")
    except BaseException:
        stop_all([p.as_dict() for plane in planes for p in plane.started])
        record["processes"] = []
        (state / RECORD).write_text(json.dumps(record, indent=2))
        raise
    log(f"  Kueue ready on {len(planes)} clusters in {time.monotonic() - began:.1f} s")
    return Fleet(
        state,
        record,
        {plane.name: plane for plane in planes},
        {kueue.plane.name: kueue for kueue, _ in kueues},
        operators,
    )


def _start_operators(
    spec: FleetSpec, planes: list[ControlPlane], timeout: float
) -> dict[str, list[OperatorProcess]]:
    manifests: dict[str, list[dict[str, Any]]] = {}
    started: dict[str, list[OperatorProcess]] = {}
    for plane, cluster in zip(planes, spec.clusters, strict=True):
        client = Client(plane.kubeconfig_path(ADMIN))
        for key in cluster.frameworks or ():
            operator = OPERATORS.get(key)
            if operator is None:
                continue
            if key not in manifests:
                manifests[key] = install_manifest(operator)
            process = OperatorProcess(plane, operator, manifests[key])
            process.apply_install(client)
            process.start(client)
            started.setdefault(cluster.name, []).append(process)
    wait_all_ready(
        [
            (process, Client(next(p for p in planes if p.name == name).kubeconfig_path(ADMIN)))
            for name, processes in started.items()
            for process in processes
        ],
        timeout,
    )
    return started


def wait_all_ready(
    started: Sequence[tuple[Kueue | OperatorProcess, Client]], timeout: float
) -> None:
    """Until each of the controllers started is ready, in turn, mounting every one's
    certificates meanwhile, as each pod's kubelet would on its own, not only the one waited
    for: a controller's cert-controller looks for them with a backoff doubling from 1 s over
    ten tries (open-policy-agent/cert-controller v0.16.0 pkg/rotator/rotator.go,
    ensureCertsMounted, in Kueue v0.19.2 and the LeaderWorkerSet controller alike), so
    certificates mounted a minute late are seen up to two minutes later still, and after ten
    tries (seventeen minutes or more) never: ten workers did not start before."""

    def mount_all(_client: Client) -> None:
        for controller, client in started:
            controller.mount_cert_secret(client)

    for controller, client in started:
        controller.wait_ready(client, timeout, mount=mount_all)


def down(state: Path = DEFAULT_STATE, *, log: Log = print) -> bool:
    """Stops the processes `up` recorded in `state` and removes the folder; False when no
    fleet was recorded there (nothing is touched then)."""
    record = read_record(state)
    if record is None:
        return False
    # The record alone does not make the folder ours: a copied or hand-written fleet.json in
    # a user's folder would have `down` stop what it names and remove the folder whole.
    if not (state / MARK).exists():
        raise FleetError(
            f"--state {state}: not a folder `python -m loopback up` made (it has no {MARK}), "
            "so nothing was stopped or removed; stop its processes and remove it by hand"
        )
    stopped = stop_all(record.get("processes") or [])
    log(f"  stopped {len(stopped)} processes")
    # The visibility certificate folder is shared by every Kueue on the machine: it goes with
    # the last of them.
    if not others_running("kueue"):
        for made in record.get("made") or []:
            shutil.rmtree(made, ignore_errors=True)
    shutil.rmtree(state)
    return True
