"""The real tier's fixtures: binaries built from tools/go.mod (a test skips, saying why, only
where Go is absent), one loopback control plane that Kueue is started on again and again with
each configuration the project renders, and a whole loopback fleet of a stack."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from components.checks.load import load_stack
from components.model.spec import ClusterSpec, FleetSpec
from components.model.stack_file import stack_path
from components.objects.kueue_install import kueue_objects
from components.upstream import releases, toolchain
from loopback import fleet as loopback_fleet
from loopback.client import Client
from loopback.controlplane import ADMIN, ControlPlane
from loopback.fleet import cluster_crds
from loopback.kueue import VISIBILITY_CERT_DIR, Kueue, ensure_visibility_certs
from loopback.processes import others_running, stop_all
from tests.upstream_data import real_kueue_manifest, why_missing

ROOT = Path(__file__).resolve().parent.parent
STACKS = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in (ROOT / "stacks").glob("*.yaml"))


def go_missing() -> str:
    if shutil.which("go") is None:
        return (
            "Go is not on PATH: the real tier builds kube-apiserver, etcd, "
            "kube-controller-manager and Kueue v0.19.2 from tools/go.mod (install Go 1.26+)"
        )
    return ""


def binaries() -> dict[str, Path]:
    if why := go_missing():
        pytest.skip(why)
    return toolchain.build(list(toolchain.CONTROL_PLANE), log=lambda _line: None)


def manifest() -> str:
    text = real_kueue_manifest()
    if text is None:
        pytest.skip(why_missing())
    return text


def real_fetch(url: str) -> str:
    """The pinned release itself, never the synthetic one the mock-engine tests point
    MKF_UPSTREAM_CACHE at (tests/pulumi_harness.py)."""
    return releases.fetch(url, cache_dir=releases.DEFAULT_CACHE)


def spec_of(stack: str) -> FleetSpec:
    spec, _ = load_stack(str(stack_path(stack)))
    return spec


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
        return self.start_kueue(
            kueue_objects(manifest(), spec, cluster),
            crds=cluster_crds(spec, cluster, real_fetch),
        )

    def stop_kueue(self) -> None:
        kueue_records = [p for p in self.plane.started if p.name.endswith("/kueue")]
        stop_all([p.as_dict() for p in kueue_records])
        self.plane.started = [p for p in self.plane.started if p not in kueue_records]
        self.kueue = None

    def close(self) -> None:
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


@pytest.fixture(scope="module")
def dev_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[loopback_fleet.Fleet]:
    """The dev stack's manager and two workers, each with Kueue running as rendered."""
    binaries()
    manifest()
    state = tmp_path_factory.mktemp("fleet")
    started = loopback_fleet.up("dev", state, log=lambda _line: None, fetch=real_fetch)
    try:
        yield started
    finally:
        loopback_fleet.down(state, log=lambda _line: None)
