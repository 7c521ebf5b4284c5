"""A MultiKueue fleet made of API emulators: a manager with the MultiKueue objects and the
dispatcher's reader Secrets, and workers with ClusterQueues and LocalQueues. Also the
objects Kueue would write (workloads in their states), for the controller tests."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import yaml

from controller.app import run
from controller.dispatcher import Dispatcher
from controller.kube import Kube
from controller.metrics import Metrics
from controller.model import Policy
from controller.settings import DeclaredProfile, Settings
from tests.helpers.kube_emulator import Emulator

K = "kueue.x-k8s.io"
NS = "team-a"


def workload(
    name: str,
    cpu: str = "1",
    memory: str = "1Gi",
    *,
    queue: str = "user-queue",
    state: str = "Pending",
    reserved: bool = True,
    cluster: str | None = None,
    annotations: dict[str, str] | None = None,
    other_checks: dict[str, str] | None = None,
    namespace: str = NS,
) -> dict[str, Any]:
    """A manager-side Workload as Kueue leaves it once the manager reserved quota (now)."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    checks = [{"name": "multikueue", "state": state, "lastTransitionTime": now, "message": ""}]
    checks += [
        {"name": n, "state": s, "lastTransitionTime": now, "message": ""}
        for n, s in (other_checks or {}).items()
    ]
    status: dict[str, Any] = {
        "admissionChecks": checks,
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "True" if reserved else "False",
                "reason": "QuotaReserved",
                "message": "",
                "lastTransitionTime": now,
            }
        ],
    }
    if reserved:
        status["admission"] = {
            "clusterQueue": "cluster-queue",
            "podSetAssignments": [
                {
                    "name": "main",
                    "count": 1,
                    "flavors": {"cpu": "default-flavor", "memory": "default-flavor"},
                    "resourceUsage": {"cpu": cpu, "memory": memory},
                }
            ],
        }
    if cluster:
        status["clusterName"] = cluster
    return {
        "apiVersion": f"{K}/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations or {}},
        "spec": {
            "queueName": queue,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "busybox",
                                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                                }
                            ]
                        }
                    },
                }
            ],
        },
        "status": status,
    }


def cluster_queue(
    cpu: str,
    memory: str,
    reserved_cpu: str = "0",
    reserved_memory: str = "0",
    queueing: str = "BestEffortFIFO",
) -> dict[str, Any]:
    return {
        "apiVersion": f"{K}/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cluster-queue"},
        "spec": {
            "namespaceSelector": {},
            "queueingStrategy": queueing,
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {
                            "name": "default-flavor",
                            "resources": [
                                {"name": "cpu", "nominalQuota": cpu},
                                {"name": "memory", "nominalQuota": memory},
                            ],
                        }
                    ],
                }
            ],
        },
        "status": {
            "conditions": [
                {
                    "type": "Active",
                    "status": "True",
                    "reason": "Ready",
                    "message": "Can admit new workloads",
                    "lastTransitionTime": "2026-11-22T00:00:00Z",
                }
            ],
            "flavorsReservation": [
                {
                    "name": "default-flavor",
                    "resources": [
                        {"name": "cpu", "total": reserved_cpu, "borrowed": "0"},
                        {"name": "memory", "total": reserved_memory, "borrowed": "0"},
                    ],
                }
            ],
        },
    }


def admission_check() -> dict[str, Any]:
    return {
        "apiVersion": f"{K}/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": "multikueue"},
        "spec": {
            "controllerName": "kueue.x-k8s.io/multikueue",
            "parameters": {"apiGroup": K, "kind": "MultiKueueConfig", "name": "multikueue"},
        },
    }


def multikueue_config(workers: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": f"{K}/v1beta2",
        "kind": "MultiKueueConfig",
        "metadata": {"name": "multikueue"},
        "spec": {"clusters": list(workers)},
    }


ACTIVE = {
    "conditions": [
        {
            "type": "Active",
            "status": "True",
            "reason": "Active",
            "message": "Connected",
            "lastTransitionTime": "2026-11-22T00:00:00Z",
        }
    ]
}


def multikueue_cluster(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """Without status: an emulator takes `status` inline, a real server only on /status."""
    return {
        "apiVersion": f"{K}/v1beta2",
        "kind": "MultiKueueCluster",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": {"clusterSource": {"kubeConfig": {"location": f"{name}-kubeconfig"}}},
    }


def _reader(name: str, secret_name: str, key: str, value: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": secret_name,
            "namespace": namespace,
            "labels": {"multikueue-fleet/worker": name},
        },
        "data": {key: base64.b64encode(value.encode()).decode()},
    }


def reader_secret(
    name: str, kubeconfig: dict[str, Any], namespace: str = "multikueue-fleet-system"
) -> dict[str, Any]:
    """The dispatcher's read-only kubeconfig for a worker, as the stack writes it."""
    return _reader(name, f"{name}-reader", "kubeconfig", yaml.safe_dump(kubeconfig), namespace)


def reader_token_secret(
    name: str, token: str, namespace: str = "multikueue-fleet-system"
) -> dict[str, Any]:
    """The dispatcher's read-only token for a worker reached through its ClusterProfile."""
    return _reader(name, f"{name}-reader-token", "token", token, namespace)


def seed_worker(emulator: Emulator, spec: dict[str, Any]) -> None:
    """A worker's ClusterQueue (quota and reservation from `spec`) and the LocalQueue
    `user-queue` in NS that points at it."""
    emulator.put(
        f"{K}/clusterqueues",
        cluster_queue(
            spec.get("cpu", "8"),
            spec.get("memory", "32Gi"),
            spec.get("reserved", "0"),
            queueing=spec.get("queueing", "BestEffortFIFO"),
        ),
    )
    emulator.put(
        f"{K}/localqueues",
        {
            "metadata": {"name": "user-queue", "namespace": NS},
            "spec": {"clusterQueue": "cluster-queue"},
        },
    )


class Fleet:
    def __init__(self, workers: dict[str, dict[str, Any]]) -> None:
        """workers: name -> {"cpu": nominal, "reserved": cpu reserved, "labels": {...},
        "queueing": the ClusterQueue's queueingStrategy}."""
        self.spec = workers
        self.manager = Emulator("manager")
        self.workers = {name: Emulator(name) for name in workers}
        self.settings = Settings(
            identity="test-dispatcher",
            resync_seconds=0.5,
            stale_after_seconds=30,
            lease_duration_seconds=2,
            lease_renew_seconds=0.3,
            # Spreading: the emulated tests were written for it (which worker takes a
            # workload); the default's packing is the unit tier's and the real tier's.
            default_policy=Policy(strategy="MostFreeQuota"),
        )
        self._runs: list[tuple[asyncio.Event, asyncio.Task]] = []
        self.ports: list[int] = []

    async def start(self) -> None:
        await self.manager.start()
        m = self.manager
        m.put(f"{K}/admissionchecks", admission_check())
        m.put(f"{K}/multikueueconfigs", multikueue_config(list(self.workers)))
        await self.start_workers()
        for name in self.workers:
            m.put(
                f"{K}/multikueueclusters",
                {**multikueue_cluster(name, self.spec[name].get("labels")), "status": ACTIVE},
            )
            self.put_reader_secret(name)

    async def start_workers(self) -> None:
        """The worker emulators, each with its ClusterQueue and LocalQueue."""
        for name, emulator in self.workers.items():
            await emulator.start()
            seed_worker(emulator, self.spec[name])

    def put_reader_secret(self, name: str) -> None:
        self.manager.put(
            "secrets", reader_secret(name, self.workers[name].kubeconfig(), self.settings.namespace)
        )

    async def run_controller(
        self,
        identity: str = "test-dispatcher",
        profiles: tuple[DeclaredProfile, ...] = (),
        **settings_: Any,
    ) -> tuple[asyncio.Event, Metrics]:
        """A controller replica in this loop; `settings_` replace fields of the fleet's
        Settings. Set the returned event to stop it (stop_controller waits for it)."""
        settings = Settings(
            **{
                **self.settings.__dict__,
                "identity": identity,
                "cluster_profiles": profiles,
                **settings_,
            }
        )
        kube = await Kube.from_kubeconfig(self.manager.kubeconfig(), "manager")
        stop, metrics = asyncio.Event(), Metrics()

        async def main() -> None:
            try:
                await run(kube, settings, stop, metrics, port=0, on_listening=self.ports.append)
            finally:
                await kube.close()

        self._runs.append((stop, asyncio.create_task(main())))
        return stop, metrics

    async def stop_controller(self, stop: asyncio.Event) -> None:
        """Stops the replica `stop` belongs to, and waits until it has stopped."""
        stop.set()
        for event, task in self._runs:
            if event is stop:
                await asyncio.wait_for(task, 10)

    async def stop(self) -> None:
        for stop, task in self._runs:
            stop.set()
            await asyncio.wait_for(task, 10)
        for emulator in [self.manager, *self.workers.values()]:
            await emulator.stop()

    def nominations(self, name: str) -> list[str] | None:
        obj = self.manager.get(f"{K}/workloads", name, NS)
        return ((obj or {}).get("status") or {}).get("nominatedClusterNames")

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        return [
            e
            for e in self.manager.items("events")
            if name is None or e["involvedObject"]["name"] == name
        ]


@contextlib.asynccontextmanager
async def dispatcher_on(
    workers: dict[str, dict[str, Any]],
    workloads: list[dict[str, Any]],
    before: Callable[[Fleet], None] | None = None,
    **settings: Any,
) -> AsyncIterator[tuple[Fleet, Dispatcher]]:
    """A started fleet holding `workloads`, and a Dispatcher whose snapshot has synced and
    reached every worker, but whose loop does not run: the test drives it step by step.
    `before(fleet)` runs before the dispatcher first reads the fleet (faults to inject);
    `settings` replace fields of the fleet's Settings."""
    fleet = Fleet(workers)
    await fleet.start()
    if before is not None:
        before(fleet)
    kube = await Kube.from_kubeconfig(fleet.manager.kubeconfig(), "manager")
    dispatcher = Dispatcher(
        kube, replace(fleet.settings, **settings), Metrics(), Kube.from_kubeconfig
    )
    try:
        for wl in workloads:
            fleet.manager.put(f"{K}/workloads", wl)
        await dispatcher.state.start()
        await dispatcher.state.wait_synced(10)
        await dispatcher.state.wait_workers(10)
        yield fleet, dispatcher
    finally:
        await dispatcher.state.stop()
        await kube.close()
        await fleet.stop()


class BenchFleet:
    """A manager and workers as bare emulators (no CRD schemas) with a client for each: what
    the real-fleet scripts (bench/fleet_*.py) talk to."""

    def __init__(self, workers: tuple[str, ...]) -> None:
        self.manager = Emulator("manager", crds=None)
        self.workers = {n: Emulator(n, crds=None) for n in workers}
        self.kube: Kube
        self.kubes: dict[str, Kube] = {}

    @classmethod
    async def start(cls, workers: tuple[str, ...] = ("w1", "w2", "w3")) -> BenchFleet:
        fleet = cls(workers)
        for e in (fleet.manager, *fleet.workers.values()):
            await e.start()
        fleet.kube = await Kube.from_kubeconfig(fleet.manager.kubeconfig(), "manager")
        for n, e in fleet.workers.items():
            fleet.kubes[n] = await Kube.from_kubeconfig(e.kubeconfig(), n)
        return fleet

    async def stop(self) -> None:
        for k in (self.kube, *self.kubes.values()):
            await k.close()
        for e in (self.manager, *self.workers.values()):
            await e.stop()


async def until(check: Callable[[], Any], timeout: float = 8.0, what: str = "") -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        result = check()
        if result:
            return result
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        await asyncio.sleep(0.05)


def deployment(namespace: str, name: str, available: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": 1},
        "status": {"availableReplicas": available},
    }


def active(kind_name: str, ok: bool, reason: str = "Active", message: str = "") -> dict:
    return {
        "metadata": {"name": kind_name},
        "status": {
            "conditions": [
                {
                    "type": "Active",
                    "status": "True" if ok else "False",
                    "reason": reason,
                    "message": message,
                    "lastTransitionTime": "2026-11-22T00:00:00Z",
                }
            ]
        },
    }
