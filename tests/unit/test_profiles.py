"""ClusterProfile status as the dispatcher keeps it (controller/profiles.py), against a
profile store that takes each write back as the watch would: every write is a reconcile of
the worker's clients in Kueue v0.19.2 (multikueuecluster.go: any ClusterProfile update
event rebuilds them), so a write happens only for a stable change. A flapping probe writes
at most once per change that held, a new error text writes nothing, an unchanged sample
writes nothing, and what others wrote in the lists survives. Time is a fake clock."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from typing import Any

from controller.kube import ApiError
from controller.profiles import (
    CONTROL_PLANE_HEALTHY,
    HOLD_SECONDS,
    SAMPLE_SECONDS,
    HealthHold,
    desired_status,
    sync_profiles,
)
from controller.settings import DeclaredProfile

NS = "kueue-system"
PROFILE = DeclaredProfile("w1", "https://w1.example:6443", "Q0E=", "w1-token")
OLD_TIME = "2026-01-02T03:04:05Z"
JOINED = {
    "type": "Joined",
    "status": "True",
    "reason": "Registered",
    "message": "joined by the platform team's inventory",
    "lastTransitionTime": OLD_TIME,
}
THEIR_PROVIDER = {"name": "gcp", "cluster": {"server": "https://w1.gke.example"}}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386, as the API server applies application/merge-patch+json."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


@dataclass
class Worker:
    version: str = "v1.36.4"


@dataclass
class Store:
    store: dict[str, dict[str, Any]] = field(default_factory=dict)


class Fleet:
    """What sync_profiles reads of FleetState, and the manager it writes to: a status
    write lands in the store at once (the watch's echo), with a new resourceVersion only
    when something changed, as the API server stores it."""

    def __init__(self, status: dict[str, Any] | None = None) -> None:
        obj: dict[str, Any] = {"metadata": {"name": "w1", "namespace": NS, "resourceVersion": "1"}}
        if status is not None:
            obj["status"] = status
        self.profiles = Store({f"{NS}/w1": obj})
        self.workers = {"w1": Worker()}
        self.health: tuple[bool, str, float] = (True, "", 0.5)
        self.patches: list[dict[str, Any]] = []
        self.refuse: int | None = None  # status code of the next write

    def worker_health(self) -> dict[str, tuple[bool, str, float]]:
        return {"w1": self.health}

    async def merge_patch(
        self,
        kind: Any,
        name: str,
        patch: dict[str, Any],
        namespace: str | None = None,
        status: bool = False,
    ) -> dict[str, Any]:
        assert status and namespace == NS and name == "w1"
        self.patches.append(copy.deepcopy(patch))
        if self.refuse is not None:
            code, self.refuse = self.refuse, None
            raise ApiError(code, "refused by the test")
        obj = self.profiles.store[f"{NS}/w1"]
        given = (patch.get("metadata") or {}).get("resourceVersion")
        if given and given != obj["metadata"]["resourceVersion"]:
            raise ApiError(409, "the object has been modified")
        new = copy.deepcopy(obj)
        new["status"] = merge_patch(obj.get("status"), patch["status"])
        if new != obj:
            new["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
            self.profiles.store[f"{NS}/w1"] = new
        return new

    @property
    def status(self) -> dict[str, Any]:
        return self.profiles.store[f"{NS}/w1"].get("status") or {}

    def condition(self, kind: str = CONTROL_PLANE_HEALTHY) -> dict[str, Any]:
        return next(c for c in self.status["conditions"] if c["type"] == kind)


def sample(fleet: Fleet, hold: HealthHold) -> int:
    return asyncio.run(sync_profiles(fleet, fleet, (PROFILE,), NS, hold))  # type: ignore[arg-type]


def settled(
    healthy: bool = True, status: dict[str, Any] | None = None
) -> tuple[Fleet, HealthHold, Clock]:
    """A profile (with `status` at first) whose status was written once, for a worker
    `healthy` or not."""
    fleet, clock = Fleet(status), Clock()
    hold = HealthHold(clock=clock)
    fleet.health = (True, "", 0.5) if healthy else (False, "GET /version failed: 503", 9.0)
    assert sample(fleet, hold) == 1
    fleet.patches.clear()
    return fleet, hold, clock


def test_a_flapping_probe_writes_at_most_once_per_stable_change() -> None:
    fleet, hold, clock = settled(healthy=True)
    # Ten minutes of a probe that flips every sample, then every second and third sample.
    for step in range(200):
        clock.now += SAMPLE_SECONDS
        up = step % 2 == 0 if step < 100 else step % 3 != 0
        fleet.health = (True, "", 0.5) if up else (False, f"GET /version failed: #{step}", 4.0)
        assert sample(fleet, hold) == 0, step
    assert fleet.condition()["status"] == "True"
    # Down for good: written once, after the hold, not before.
    writes = []
    for step in range(40):
        clock.now += SAMPLE_SECONDS
        fleet.health = (False, f"GET /version failed: attempt {step}", 4.0 + step)
        writes.append(sample(fleet, hold))
    assert sum(writes) == 1
    assert writes.index(1) * SAMPLE_SECONDS >= HOLD_SECONDS
    assert fleet.condition()["status"] == "False"
    # Flapping again around the new state writes nothing more.
    for step in range(100):
        clock.now += SAMPLE_SECONDS
        fleet.health = (True, "", 0.5) if step % 4 == 0 else (False, "connection refused", 9.0)
        assert sample(fleet, hold) == 0, step
    assert len(fleet.patches) == 1


def test_a_change_only_in_the_reason_text_writes_nothing() -> None:
    fleet, hold, clock = settled(healthy=False)
    written = copy.deepcopy(fleet.status)
    for reason in (
        "GET /version failed: 503: Service Unavailable",
        "GET /version failed: no answer in time",
        "watch of clusterqueues: connection refused",
        "GET /version has not answered for more than 60s",
    ):
        clock.now += SAMPLE_SECONDS
        fleet.health = (False, reason, 70.0)
        assert sample(fleet, hold) == 0, reason
    assert fleet.patches == []
    assert fleet.status == written
    assert "GET /version" not in fleet.condition()["message"]


def test_an_unchanged_reconcile_writes_nothing() -> None:
    fleet, hold, clock = settled(healthy=True, status={"conditions": [JOINED]})
    written = copy.deepcopy(fleet.status)
    for _ in range(20):
        clock.now += 60  # the wall clock moves too: nothing of it is written again
        assert sample(fleet, hold) == 0
    assert fleet.patches == []
    assert fleet.status == written
    assert fleet.condition("Joined") == JOINED


def test_a_condition_owned_by_someone_else_survives() -> None:
    fleet, clock = Fleet({"conditions": [JOINED], "accessProviders": [THEIR_PROVIDER]}), Clock()
    hold = HealthHold(clock=clock)
    assert sample(fleet, hold) == 1
    assert fleet.status["conditions"][0] == JOINED
    assert [c["type"] for c in fleet.status["conditions"]] == ["Joined", CONTROL_PLANE_HEALTHY]
    assert [p["name"] for p in fleet.status["accessProviders"]] == ["gcp", "secretreader"]
    assert fleet.status["accessProviders"][0] == THEIR_PROVIDER
    # Someone else changes their condition: not ours to compare, so no write of ours ...
    obj = fleet.profiles.store[f"{NS}/w1"]
    obj["status"]["conditions"][0] = {**JOINED, "status": "False", "reason": "Left"}
    obj["metadata"]["resourceVersion"] = "7"
    assert sample(fleet, hold) == 0
    # ... and when ours changes, theirs is written back as it is now, not as it was.
    fleet.health = (False, "GET /version failed: 503", 9.0)
    for _ in range(int(HOLD_SECONDS / SAMPLE_SECONDS) + 1):
        clock.now += SAMPLE_SECONDS
        sample(fleet, hold)
    assert fleet.condition()["status"] == "False"
    assert fleet.condition("Joined") == {**JOINED, "status": "False", "reason": "Left"}
    assert fleet.status["accessProviders"][0] == THEIR_PROVIDER


def test_the_first_status_is_written_at_once_and_the_write_is_conditional() -> None:
    fleet, clock = Fleet(), Clock()
    hold = HealthHold(clock=clock)
    fleet.health = (False, "GET /version failed: 503", 9.0)
    assert sample(fleet, hold) == 1  # nothing of ours yet: no flip to hold back
    assert fleet.patches[0]["metadata"] == {"resourceVersion": "1"}
    assert fleet.condition()["status"] == "False"
    assert fleet.status["version"] == {"kubernetes": "v1.36.4"}


def test_a_write_refused_is_tried_again_without_a_new_hold() -> None:
    fleet, hold, clock = settled(healthy=True)
    fleet.health = (False, "GET /version failed: 503", 9.0)
    for _ in range(int(HOLD_SECONDS / SAMPLE_SECONDS)):
        clock.now += SAMPLE_SECONDS
        assert sample(fleet, hold) == 0
    clock.now += SAMPLE_SECONDS
    fleet.refuse = 409  # someone wrote the profile meanwhile
    assert sample(fleet, hold) == 0
    clock.now += SAMPLE_SECONDS
    assert sample(fleet, hold) == 1
    assert fleet.condition()["status"] == "False"


def test_a_gap_in_sampling_starts_the_hold_over() -> None:
    """A replica that stopped leading and leads again has not seen what happened meanwhile."""
    fleet, hold, clock = settled(healthy=True)
    fleet.health = (False, "GET /version failed: 503", 9.0)
    clock.now += SAMPLE_SECONDS
    assert sample(fleet, hold) == 0
    clock.now += 10 * HOLD_SECONDS
    assert sample(fleet, hold) == 0
    clock.now += HOLD_SECONDS
    assert sample(fleet, hold) == 1


def test_last_transition_time_is_kept_while_the_state_holds() -> None:
    """A status an older dispatcher wrote, with the probe's text in it: rewritten once to
    the fixed text, its transition time kept; a real transition gets a new one."""
    ours = {
        "type": CONTROL_PLANE_HEALTHY,
        "status": "False",
        "reason": "Unreachable",
        "message": "GET /version failed: 503: Service Unavailable",
        "lastTransitionTime": OLD_TIME,
    }
    current = {"conditions": [JOINED, ours]}
    status = desired_status(PROFILE, False, "", current, "2026-05-06T07:08:09Z")
    assert status["conditions"][1]["lastTransitionTime"] == OLD_TIME
    assert status["conditions"][1]["message"] != ours["message"]
    assert status["conditions"][0] == JOINED
    assert "version" not in status  # not known: what is there stays
    status = desired_status(PROFILE, True, "", current, "2026-05-06T07:08:09Z")
    assert status["conditions"][1]["lastTransitionTime"] == "2026-05-06T07:08:09Z"
