"""The dispatchers the simulation compares: Kueue v0.19.2's AllAtOnce and Incremental, and
the project's policy through one adapter, `policy_nominate` (see bench/dq_sim.py for the
rules and their upstream files)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dq_sim import CQ, Dispatcher, Sim, Wl

from controller import policy as real_policy
from controller.model import (
    InFlight,
    Policy,
    WorkerView,
    WorkloadView,
)
from controller.policy import InFlightIndex

STEP = 3  # pkg/controller/workloaddispatcher/incrementaldispatcher.go DefaultStepSize
ROUND = 300.0  # the same file, incrementalDispatcherRoundTimeout
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


class AllAtOnce(Dispatcher):
    name = "AllAtOnce"

    def nominate(self, sim: Sim, wl: Wl) -> tuple[str, ...]:
        return tuple(sim.clusters)


class Incremental(Dispatcher):
    name = "Incremental"

    def nominate(self, sim: Sim, wl: Wl) -> tuple[str, ...]:
        rest = sorted(c for c in sim.clusters if c not in wl.nominated)
        if rest:
            wl.round += 1
            sim.at(sim.now + ROUND, "round", (wl, wl.round))
        return wl.nominated + tuple(rest[:STEP])


def policy_nominate(
    view: WorkloadView,
    clusters: list[str],
    workers: dict[str, WorkerView],
    policy: Policy,
    in_flight: InFlightIndex,
    now: datetime,
) -> tuple[str, ...]:
    """The one call into the project's policy: `controller.policy.decide`, and the in-flight
    demand recorded the way controller/dispatcher.py `_record_in_flight` does. Returns the
    clusters to nominate."""
    decision = real_policy.decide(view, clusters, workers, policy, in_flight, now)
    if not decision.nominate:
        return ()  # the controller writes nothing (a NoFeasibleCluster Event)
    in_flight.replace(
        view.key,
        [
            InFlight(view.key, v.cluster, CQ, v.flavors, view.requests)
            for v in decision.verdicts
            if v.cluster in decision.nominate
        ],
    )
    return decision.nominate


class OurPolicy(Dispatcher):
    refreshes = True

    def __init__(self, policy: Policy | None = None, name: str = "policy") -> None:
        self.policy = policy or Policy()
        self.name = name
        self.widen_after = self.policy.widen_after_seconds
        self.in_flight = InFlightIndex()

    def nominate(self, sim: Sim, wl: Wl) -> tuple[str, ...]:
        # A LeaderWorkerSet group's demand is the sum of its workloads.
        requests = {r: a * wl.job.parts for r, a in wl.requests.items()}
        view = WorkloadView(
            f"team/{wl.key}",
            "user-queue",
            requests,
            wl.nominated,
            EPOCH + timedelta(seconds=wl.nominated_at) if wl.nominated_at is not None else None,
            wl.job.priority,
        )
        now = EPOCH + timedelta(seconds=sim.now)
        chosen = policy_nominate(view, sim.clusters, sim.snapshot, self.policy, self.in_flight, now)
        return chosen or wl.nominated

    def done(self, wl: Wl) -> None:
        self.in_flight.remove(f"team/{wl.key}")
