"""ClusterProfile status against the emulated manager (the ClusterProfile CRD's schema
applied, every write recorded), with the worker's real prober asked by the test: Kueue
v0.19.2 rebuilds a worker's clients on every ClusterProfile update event
(pkg/controller/admissionchecks/multikueue/multikueuecluster.go), so the count of status
writes at the server is the count of reconnects a flapping probe would cause. The hold's
clock is a fake one the test moves; a probe is one call."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from controller.fleet_state import FleetState
from controller.profiles import (
    CONTROL_PLANE_HEALTHY,
    HOLD_SECONDS,
    SAMPLE_SECONDS,
    HealthHold,
    sync_profiles,
)
from controller.settings import DeclaredProfile
from tests.helpers.fleet_harness import Fleet, dispatcher_on, until

PROFILES = "multicluster.x-k8s.io/clusterprofiles"
NS = "kueue-system"
DECLARED = (DeclaredProfile("w1", "https://w1.example:6443", "Q0E=", "w1-token"),)
JOINED = {
    "type": "Joined",
    "status": "True",
    "reason": "Registered",
    "message": "joined by the platform team's inventory",
    "lastTransitionTime": "2026-01-02T03:04:05Z",
}
THEIRS = {"name": "gcp", "cluster": {"server": "https://w1.gke.example"}}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def put_profile(fleet: Fleet) -> None:
    """The profile as the stack creates it, with what another inventory controller wrote."""
    fleet.manager.put(
        PROFILES,
        {
            "metadata": {"name": "w1", "namespace": NS},
            "spec": {"clusterManager": {"name": "multikueue-fleet"}},
            "status": {"conditions": [JOINED], "accessProviders": [THEIRS]},
        },
    )


def status(fleet: Fleet) -> dict[str, Any]:
    return (fleet.manager.get(PROFILES, "w1", NS) or {}).get("status") or {}


def condition(fleet: Fleet, kind: str = CONTROL_PLANE_HEALTHY) -> dict[str, Any]:
    return next((c for c in status(fleet).get("conditions") or [] if c["type"] == kind), {})


def writes(fleet: Fleet) -> int:
    return len(fleet.manager.writes("clusterprofiles/w1/status"))


def test_a_flapping_probe_writes_once_per_stable_change_and_keeps_others_conditions() -> None:
    async def main() -> None:
        async with dispatcher_on(
            {"w1": {"cpu": "8"}}, [], before=put_profile, cluster_profiles=DECLARED
        ) as (fleet, dispatcher):
            state: FleetState = dispatcher.state
            worker, prober = fleet.workers["w1"], state.workers["w1"].prober
            # From here on the test asks: the prober's loop sleeps once its probe is done.
            asked = prober.probes
            prober.interval = 3600
            await until(lambda: prober.probes > asked, what="the prober's last own probe")
            clock = Clock()
            hold = HealthHold(clock=clock)
            errors = iter([503, 500, 502, 504] * 50)  # a different error text each time
            verdicts: list[bool] = []

            async def step(answers: bool) -> int:
                """One probe, then one sample SAMPLE_SECONDS later; the status writes."""
                if not answers:
                    worker.fail("GET", "/version", next(errors))
                await prober.probe_once()
                verdicts.append(state.worker_health()["w1"][0])
                clock.now += SAMPLE_SECONDS
                before = writes(fleet)
                await sync_profiles(state.manager, state, DECLARED, NS, hold)
                server = fleet.manager.get(PROFILES, "w1", NS) or {}
                version = server["metadata"]["resourceVersion"]
                # The next sample reads what the watch brought back, as 3 s later it would.
                await until(
                    lambda: (
                        (state.profiles.store.get(f"{NS}/w1") or {})
                        .get("metadata", {})
                        .get("resourceVersion")
                        == version
                    ),
                    what="the profile's watch",
                )
                return writes(fleet) - before

            assert await step(True) == 1  # the first status: at once
            assert condition(fleet)["status"] == "True"
            written_at = condition(fleet)["lastTransitionTime"]
            # The worker's server answers one probe in three for two minutes: the prober
            # (one failure forgiven) flips its verdict every few seconds.
            verdicts.clear()
            flapping = [await step(n % 3 == 2) for n in range(40)]
            assert sum(flapping) == 0
            flips = sum(a != b for a, b in itertools.pairwise(verdicts))
            assert flips >= 20, verdicts  # it did flap: each flip was a write before
            # Down for good, a different error each probe: one write, once it has held.
            down = [await step(False) for _ in range(int(HOLD_SECONDS / SAMPLE_SECONDS) + 5)]
            assert sum(down) == 1
            assert down.index(1) * SAMPLE_SECONDS >= HOLD_SECONDS - SAMPLE_SECONDS
            assert condition(fleet)["status"] == "False"
            assert "GET /version" not in condition(fleet)["message"]
            assert condition(fleet)["lastTransitionTime"] >= written_at
            # Flapping around the new state, then back for good: one write more.
            assert sum([await step(n % 3 == 0) for n in range(20)]) == 0
            up = [await step(True) for _ in range(int(HOLD_SECONDS / SAMPLE_SECONDS) + 5)]
            assert sum(up) == 1
            assert condition(fleet)["status"] == "True"
            assert writes(fleet) == 3
            # What another controller wrote in the same lists is there still.
            assert condition(fleet, "Joined") == JOINED
            assert status(fleet)["accessProviders"][0] == THEIRS
            assert [p["name"] for p in status(fleet)["accessProviders"]] == [
                "gcp",
                "secretreader",
            ]

    asyncio.run(asyncio.wait_for(main(), 60))


def test_the_running_dispatcher_writes_a_profile_once_and_keeps_others_entries() -> None:
    async def main() -> None:
        fleet = Fleet({"w1": {"cpu": "8"}})
        await fleet.start()
        try:
            put_profile(fleet)
            await fleet.run_controller(profiles=DECLARED)
            await until(lambda: status(fleet).get("version"), what="w1's profile status")
            assert condition(fleet)["status"] == "True"
            assert condition(fleet, "Joined") == JOINED
            assert status(fleet)["accessProviders"][0] == THEIRS
            # Another controller changes its condition: nothing of ours to write back.
            fleet.manager.put(
                PROFILES,
                {
                    **(fleet.manager.get(PROFILES, "w1", NS) or {}),
                    "status": {
                        **status(fleet),
                        "conditions": [
                            {**JOINED, "status": "False", "reason": "Left"},
                            condition(fleet),
                        ],
                    },
                },
            )
            count = writes(fleet)
            await asyncio.sleep(2.0)  # the harness samples every 0.5 s
            assert writes(fleet) == count
            assert condition(fleet, "Joined")["reason"] == "Left"
        finally:
            await fleet.stop()

    asyncio.run(asyncio.wait_for(main(), 60))
