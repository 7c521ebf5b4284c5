"""Faults, against emulated API servers that behave as real ones do
(tests/helpers/kube_emulator.py):
a controller restart in the middle of a backlog, a worker that goes away and returns, the
manager's API server restarting with its watch history gone, a storm of conflicts, a
malformed Workload among good ones, and a SIGTERM while workers cannot be reached."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import yaml

from loopback.processes import free_port
from tests.helpers.fleet_harness import NS, Fleet, K, reader_secret, until, workload

ROOT = Path(__file__).resolve().parents[2]

WORKLOADS = f"{K}/workloads"
ROOMY = {"w1": {"cpu": "100"}, "w2": {"cpu": "100"}}


def with_fleet(
    workers: dict[str, dict[str, Any]], test: Callable[[Fleet], Awaitable[None]]
) -> None:
    async def main() -> None:
        fleet = Fleet(workers)
        await fleet.start()
        try:
            await asyncio.wait_for(test(fleet), 90)
        finally:
            await fleet.stop()

    asyncio.run(main())


def nominating_writes(fleet: Fleet, name: str, landed: bool = False) -> list[Any]:
    """The nomination writes the manager got for `name`; with `landed`, only those it
    accepted (a write refused with 409 because it was decided on an old version changed
    nothing, and is how the API server keeps two replicas from both nominating)."""
    return [
        r
        for r in fleet.manager.writes(f"/workloads/{name}/status")
        if ((r.body or {}).get("status") or {}).get("nominatedClusterNames")
        and (not landed or 200 <= r.status < 300)
    ]


def test_a_restart_in_the_middle_of_a_backlog_loses_nothing_and_nominates_nothing_twice() -> None:
    names = [f"job-{i:02}" for i in range(40)]

    async def test(fleet: Fleet) -> None:
        for name in names:
            fleet.manager.put(WORKLOADS, workload(name, cpu="1"))
        stop, _ = await fleet.run_controller(identity="first")
        await until(lambda: sum(1 for n in names if fleet.nominations(n)) >= 5, what="a few")
        stop.set()  # mid-backlog: some written, some in flight, some not decided yet
        await asyncio.sleep(0.3)
        await fleet.run_controller(identity="second")
        await until(lambda: all(fleet.nominations(n) for n in names), timeout=30, what="all")
        await asyncio.sleep(1.0)  # a resync or two
        # No workload was sent to two different places: every nomination that landed (one,
        # or the same again from the new replica) names the same clusters. The old
        # replica's last writes may reach the server after the new one decided on what
        # it read: those carry the same resourceVersion, and only the first one lands.
        lists = {
            n: {
                tuple(w.body["status"]["nominatedClusterNames"])
                for w in nominating_writes(fleet, n, landed=True)
            }
            for n in names
        }
        assert {n: ls for n, ls in lists.items() if len(ls) != 1} == {}
        refused = {
            w.status
            for n in names
            for w in nominating_writes(fleet, n)
            if not 200 <= w.status < 300
        }
        assert refused <= {409}

    with_fleet(ROOMY, test)


def test_a_worker_that_goes_away_gets_nothing_and_is_used_again_when_back() -> None:
    # w1 has the most free quota: it is the choice whenever it can be reached.
    workers = {"w1": {"cpu": "100"}, "w2": {"cpu": "100", "reserved": "50"}}

    async def test(fleet: Fleet) -> None:
        await fleet.run_controller()
        fleet.manager.put(WORKLOADS, workload("before", cpu="1"))
        assert await until(lambda: fleet.nominations("before")) == ["w1"]
        await fleet.workers["w1"].stop()  # gone: connections refused
        await asyncio.sleep(7)  # more than two probe intervals: it is found unreachable
        fleet.manager.put(WORKLOADS, workload("during", cpu="1"))
        assert await until(lambda: fleet.nominations("during")) == ["w2"]
        await fleet.workers["w1"].start()  # back on the same address, with its objects
        await asyncio.sleep(7)  # a probe answers, the watches relist
        fleet.manager.put(WORKLOADS, workload("after", cpu="1"))
        assert await until(lambda: fleet.nominations("after")) == ["w1"]

    with_fleet(workers, test)


def test_the_manager_api_server_restarting_with_its_history_gone_is_relisted() -> None:
    async def test(fleet: Fleet) -> None:
        await fleet.run_controller()
        fleet.manager.put(WORKLOADS, workload("before", cpu="1"))
        assert await until(lambda: fleet.nominations("before"))
        await fleet.manager.stop()
        fleet.manager.compact()  # the watches' resourceVersions are now too old: 410 Gone
        fleet.manager.put(WORKLOADS, workload("while-down", cpu="1"))
        seen = len(fleet.manager.requests)
        await fleet.manager.start()
        assert await until(lambda: fleet.nominations("while-down"), timeout=30)
        fleet.manager.put(WORKLOADS, workload("after", cpu="1"))
        assert await until(lambda: fleet.nominations("after"))
        after = fleet.manager.requests[seen:]
        # Watches came back from their old resourceVersion, were told 410, and listed anew.
        assert any(
            r.path.endswith("/workloads") and "watch" not in r.query and "limit" in r.query
            for r in after
        )
        assert len(nominating_writes(fleet, "before", landed=True)) == 1

    with_fleet(ROOMY, test)


def test_a_storm_of_conflicts_ends_in_one_nomination_each() -> None:
    names = [f"job-{i}" for i in range(5)]

    async def test(fleet: Fleet) -> None:
        # Each injected 409 gives the workload a new resourceVersion first, as a real
        # conflict means someone else wrote it: the dispatcher decides again on that.
        fleet.manager.fail("PATCH", "/workloads/", 409, times=25)
        await fleet.run_controller()
        for name in names:
            fleet.manager.put(WORKLOADS, workload(name, cpu="1"))
        await until(lambda: all(fleet.nominations(n) for n in names), timeout=40, what="all")
        assert fleet.manager.faults[0].remaining == 0
        await asyncio.sleep(1.0)
        # Every write carried the version it was decided on; the one that landed names
        # each cluster once.
        for name in names:
            writes = nominating_writes(fleet, name)
            assert all(w.body["metadata"]["resourceVersion"] for w in writes)
            landed = fleet.nominations(name)
            assert landed and len(landed) == len(set(landed))

    with_fleet(ROOMY, test)


def test_a_malformed_workload_among_good_ones_stops_nothing() -> None:
    async def test(fleet: Fleet) -> None:
        await fleet.run_controller()
        # The API server accepts it (the CRD leaves queueName optional); the dispatcher
        # cannot read it.
        bad = workload("bad")
        del bad["spec"]["queueName"]
        fleet.manager.put(WORKLOADS, workload("good-0"))
        fleet.manager.put(WORKLOADS, bad)
        for i in range(1, 6):
            fleet.manager.put(WORKLOADS, workload(f"good-{i}"))
        await until(lambda: all(fleet.nominations(f"good-{i}") for i in range(6)), what="good")
        (event,) = await until(lambda: fleet.events("bad"))
        assert event["reason"] == "InvalidWorkload"
        assert fleet.nominations("bad") is None
        assert fleet.manager.get(WORKLOADS, "bad", NS) is not None

    with_fleet(ROOMY, test)


# `python -m controller` with a resolver whose DNS servers never answer for *.unresolvable.test
# (each lookup blocks its thread for a minute, as glibc's retries over unreachable servers
# and a pod's search domains can), every other name resolved as usual.
_UNRESOLVABLE = """
import socket, sys, time
resolve = socket.getaddrinfo
def getaddrinfo(host, *args, **kwargs):
    if isinstance(host, str) and host.endswith(".unresolvable.test"):
        sys.stderr.write(f"looking up {host}\\n")
        time.sleep(60)
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
    return resolve(host, *args, **kwargs)
socket.getaddrinfo = getaddrinfo
from controller.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_sigterm_stops_the_controller_promptly_while_a_worker_cannot_be_reached() -> None:
    """A pod has 30 s from SIGTERM to SIGKILL. w1's name never resolves and w2 hangs (it
    takes requests and answers none): the process still exits at once. It used to wait
    for the lookup under way (asyncio.run and the interpreter's exit join the executor's
    threads, and getaddrinfo cannot be cancelled)."""

    async def test(fleet: Fleet) -> None:
        unreachable = fleet.workers["w1"].kubeconfig()
        unreachable["clusters"][0]["cluster"]["server"] = (
            f"http://w1.unresolvable.test:{fleet.workers['w1'].port}"
        )
        fleet.manager.put("secrets", reader_secret("w1", unreachable, fleet.settings.namespace))
        fleet.workers["w2"].stalled = True
        with tempfile.TemporaryDirectory() as tmp:
            kubeconfig, settings, log = (Path(tmp) / n for n in ("kc", "settings", "log"))
            kubeconfig.write_text(yaml.safe_dump(fleet.manager.kubeconfig()))
            # Below the ephemeral range: no outgoing connection takes it before the bind.
            port = free_port()
            settings.write_text(yaml.safe_dump({"metricsPort": port, "resyncSeconds": 0.5}))
            with log.open("w") as err:
                process = await asyncio.create_subprocess_exec(
                    *(sys.executable, "-c", _UNRESOLVABLE, "--kubeconfig", str(kubeconfig)),
                    *("--config", str(settings), "run"),
                    cwd=ROOT,
                    env={**os.environ, "PYTHONPATH": str(ROOT), "POD_NAME": "replica-a"},
                    stderr=err,
                )
            try:
                await until(lambda: "looking up w1" in log.read_text(), 20, "w1 lookup")
                await until(lambda: fleet.workers["w2"].requests, 20, "requests to w2")
                process.send_signal(signal.SIGTERM)
                started = asyncio.get_running_loop().time()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(process.wait(), 10)
                took = asyncio.get_running_loop().time() - started
                assert process.returncode == 0 and took < 5, (process.returncode, took)
            finally:
                if process.returncode is None:
                    process.kill()
                    await process.wait()

    with_fleet(ROOMY, test)
