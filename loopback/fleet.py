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
from collections.abc import Callable
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
from loopback.controlplane import ADMIN, ControlPlane
from loopback.kueue import VISIBILITY_CERT_DIR, Kueue, ensure_visibility_certs
from loopback.processes import others_running, stop_all

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_STATE = ROOT / ".fleet" / "loopback"
RECORD = "fleet.json"

Log = Callable[[str], object]
# The pinned releases' source: the download cache, the release URL, the Go module.
Fetch = Callable[[str], str]


class FleetError(Exception):
    """A one-line reason the command cannot go on, saying what to do."""


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
    """A stack's control planes as `up` leaves them."""

    def __init__(self, state: Path, record: dict[str, Any]) -> None:
        self.state = state
        self.record = record

    @property
    def clusters(self) -> dict[str, dict[str, Any]]:
        return self.record["clusters"]

    def kubeconfig(self, cluster: str) -> Path:
        return Path(self.clusters[cluster]["kubeconfig"])


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
    log: Log = print,
    fetch: Fetch = releases.fetch,
) -> Fleet:
    """Starts a control plane and Kueue for each cluster of the stack (or of `spec`), and
    returns once every Kueue serves its webhooks. Anything started is stopped again when a
    step fails; the logs stay in `state` until `down`."""
    began = time.monotonic()
    if read_record(state) is not None:
        raise FleetError(
            f"a loopback fleet is already up in {state}: run `python -m loopback down` first"
        )
    if spec is None:
        spec, _ = load_stack(stack if stack.endswith(".yaml") else str(stack_path(stack)))
    binaries = toolchain.require(list(toolchain.CONTROL_PLANE))
    manifest = fetch(kueue_bundle(spec.kueue.version).url)
    state.mkdir(parents=True, exist_ok=True)
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
        for kueue, client in kueues:
            kueue.wait_ready(client, timeout)
        _save(state, record, planes)
    except BaseException:
        stop_all([p.as_dict() for plane in planes for p in plane.started])
        record["processes"] = []
        (state / RECORD).write_text(json.dumps(record, indent=2))
        raise
    log(f"  Kueue ready on {len(planes)} clusters in {time.monotonic() - began:.1f} s")
    return Fleet(state, record)


def down(state: Path = DEFAULT_STATE, *, log: Log = print) -> bool:
    """Stops the processes `up` recorded in `state` and removes the folder; False when no
    fleet was recorded there (nothing is touched then)."""
    record = read_record(state)
    if record is None:
        return False
    stopped = stop_all(record.get("processes") or [])
    log(f"  stopped {len(stopped)} processes")
    # The visibility certificate folder is shared by every Kueue on the machine: it goes with
    # the last of them.
    if not others_running("kueue"):
        for made in record.get("made") or []:
            shutil.rmtree(made, ignore_errors=True)
    shutil.rmtree(state)
    return True
