"""The test tiers, by folder, and what every tier shares.

A test's tier is the folder it is in, and its marker follows (`pytest -m unit`):
- tests/unit: plain Python; no network, no Go-built server, no Docker, no Pulumi CLI (a
  connection to anything but this machine fails the test);
- tests/emulated: the in-process API emulator, Pulumi's mock engine, and Kueue's pinned
  release data (CRDs, install manifest: digest-checked, fetched once into .cache/upstream);
- tests/real: kube-apiserver, etcd, Kueue and the Pulumi CLI built from tools/ with Go;
- tests/kind: kind fleets with pods, on a Docker engine.
A test whose prerequisite is missing skips with one line naming it; under CI (CI=true, or
MKF_REQUIRE_ALL_TIERS=1) every tier is required and such a skip fails the run instead.
Shared harnesses live in tests/helpers; no test file imports another.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from components.checks.crd_schema import CrdSchemas
from tests.helpers.envtest import apiserver  # noqa: F401 (the real-API-server fixture)
from tests.helpers.fleet_config import base
from tests.helpers.upstream_data import find_upstream_crds

# A contributor's own host settings for a stack (stacks/local/, written by `kindnode build
# --for-stack`) must not change what the tests read; a test that runs the project as a user
# does drops this again (tests/helpers/ambient.py).
os.environ["MKF_HOST_SETTINGS"] = "off"

# pytester: tests/unit/test_tiers.py runs pytest on small trees made like this one.
pytest_plugins = ["pytester", "tests.helpers.sigterm"]
TESTS = Path(__file__).resolve().parent
TIERS = {
    "unit": "plain Python: no network, no Go-built server, no Docker, no Pulumi CLI",
    "emulated": "the API emulator, Pulumi's mock engine and Kueue's pinned release data",
    "real": "kube-apiserver, etcd, Kueue and the Pulumi CLI built from tools/ with Go",
    "kind": "kind fleets with pods on a Docker engine",
}


def tiers_required() -> bool:
    """CI runs every tier: a skip there is a missing prerequisite, and fails the run."""
    return os.environ.get("CI", "").lower() == "true" or os.environ.get(
        "MKF_REQUIRE_ALL_TIERS", ""
    ) not in ("", "0")


# What a run must not leave in the machine's temporary folder: a kubeconfig the Pulumi
# engine wrote there (pulumi-kubernetes; components/cli/engine_tmp.py), a loopback plane's
# egress socket, a test's environment or stack copy. Under CI a new one fails the run.
LEFTOVERS = ("kubeconfig*", "mkf-egress-*.sock", "mkf-e2e-venv-*", "render-tests-*")
_BEFORE = pytest.StashKey[set[str]]()


def temp_leftovers() -> set[str]:
    folder = Path(tempfile.gettempdir())
    return {p.name for pattern in LEFTOVERS for p in folder.glob(pattern)}


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_BEFORE] = temp_leftovers()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput"):  # an xdist worker: its controller checks
        return
    new = sorted(temp_leftovers() - session.config.stash.get(_BEFORE, set()))
    if not new:
        return
    shown = ", ".join(new[:8]) + (f" and {len(new) - 8} more" if len(new) > 8 else "")
    message = (
        f"left in {tempfile.gettempdir()} while the tests ran (by them or by another process "
        f"on this machine): {shown}; a test or command that writes there must remove it"
    )
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(("error: " if tiers_required() else "warning: ") + message)
    if tiers_required() and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_configure(config: pytest.Config) -> None:
    for tier, what in TIERS.items():
        config.addinivalue_line("markers", f"{tier}: the {tier} tier ({what}); set by folder")


def tier_of(path: Path) -> str | None:
    try:
        folder = path.resolve().relative_to(TESTS).parts[0]
    except (ValueError, IndexError):
        return None
    return folder if folder in TIERS else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tier = tier_of(Path(str(item.path)))
        if tier is None:
            raise pytest.UsageError(
                f"{item.nodeid} is in no tier folder: move it under tests/{{{','.join(TIERS)}}}/"
            )
        item.add_marker(getattr(pytest.mark, tier))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.skipped and tiers_required() and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        reason = str(reason).removeprefix("Skipped: ")
        report.outcome = "failed"
        report.longrepr = (
            f"skipped under CI, where every tier is required: {reason}. Provide it (the "
            "README's per-tier prerequisites) or run outside CI to let it skip."
        )
    return report


def _local(address: Any) -> bool:
    """A Unix socket, or an address on this machine."""
    if not isinstance(address, tuple):
        return True
    host = str(address[0])
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def _unit_tests_stay_on_this_machine(request: pytest.FixtureRequest) -> Iterator[None]:
    """The unit tier never reaches the network: a connection elsewhere fails the test,
    naming where it went (that test belongs to a tier that may download)."""
    if request.node.get_closest_marker("unit") is None:
        yield
        return
    connect = socket.socket.connect
    connect_ex = socket.socket.connect_ex

    def refuse(address: Any) -> None:
        if not _local(address):
            raise AssertionError(
                f"a unit test connected to {address!r}: the unit tier stays offline; move the "
                "test to the tier that needs the network (tests/emulated or tests/real)"
            )

    def guarded_connect(self: socket.socket, address: Any) -> None:
        refuse(address)
        return connect(self, address)

    def guarded_connect_ex(self: socket.socket, address: Any) -> int:
        refuse(address)
        return connect_ex(self, address)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", guarded_connect)
        patch.setattr(socket.socket, "connect_ex", guarded_connect_ex)
        yield


@pytest.fixture
def config() -> dict[str, Any]:
    return base()


@pytest.fixture(scope="session")
def upstream_crds() -> CrdSchemas:
    """Kueue's (and ClusterProfile's) real CRDs; the test skips, saying why, without them."""
    schemas, where = find_upstream_crds()
    if schemas is None:
        pytest.skip(where)
    return schemas


# The real tier's fixtures (tests/helpers/real_fleet.py), for every test module.
from tests.helpers.real_fleet import dev_fleet, dev_multikueue, kueue_plane  # noqa: E402, F401
