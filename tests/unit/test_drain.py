"""The queue drain a destroy runs before the fleet's ClusterQueues go (components/resources/
drain.py), with the API faked; tests/real/test_real_pulumi.py runs it against real Kueue."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from components.resources.drain import DrainFailed, QueueDrainProvider, drain, holding


def _workload(name: str, queue: str, **conditions: str) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "team-a", "name": name},
        "spec": {},
        "status": {
            "admission": {"clusterQueue": queue},
            "conditions": [{"type": t, "status": s} for t, s in conditions.items()],
        },
    }


class FakeApi:
    """A CustomObjectsApi whose workloads let go of their quota after `polls` lists."""

    def __init__(self, queues: list[str], workloads: list[dict[str, Any]], polls: int) -> None:
        self.queues = queues
        self.workloads = workloads
        self.polls = polls
        self.patched: list[tuple[str, dict[str, Any], str]] = []
        self.selector = ""

    def list_cluster_custom_object(
        self, group: str, version: str, plural: str, label_selector: str = ""
    ) -> dict[str, Any]:
        assert (group, version) == ("kueue.x-k8s.io", "v1beta2")
        if plural == "clusterqueues":
            self.selector = label_selector
            return {"items": [{"metadata": {"name": q}} for q in self.queues]}
        self.polls -= 1
        return {"items": self.workloads if self.polls >= 0 else []}

    def patch_cluster_custom_object(
        self, group: str, version: str, plural: str, name: str, body: Any, _content_type: str
    ) -> None:
        self.patched.append((name, body, _content_type))


def test_the_fleets_queues_are_set_to_hold_and_drain_and_awaited() -> None:
    api = FakeApi(["cq"], [_workload("job-a", "cq", QuotaReserved="True")], polls=2)
    assert drain(api, "lab", "manager", timeout=5, interval=0) == ["cq"]
    assert api.selector == "multikueue-fleet/fleet=lab"  # only the fleet's own queues
    assert api.patched == [
        ("cq", {"spec": {"stopPolicy": "HoldAndDrain"}}, "application/merge-patch+json")
    ]
    assert api.polls < 0  # it waited until the work let go


def test_work_that_never_lets_go_is_named_with_what_to_do() -> None:
    api = FakeApi(["cq"], [_workload("job-a", "cq", QuotaReserved="True")], polls=10**6)
    with pytest.raises(DrainFailed, match=r"cluster w1: 1 workload.*team-a/job-a.*spec.active"):
        drain(api, "lab", "w1", timeout=0, interval=0)


def test_only_work_holding_the_fleets_quota_counts() -> None:
    workloads = [
        _workload("reserved", "cq", QuotaReserved="True"),
        _workload("finished", "cq", QuotaReserved="True", Finished="True"),
        _workload("pending", "cq", QuotaReserved="False"),
        _workload("elsewhere", "other", QuotaReserved="True"),
        {**_workload("off", "cq", QuotaReserved="True"), "spec": {"active": False}},
    ]
    assert holding(workloads, {"cq"}) == ["team-a/reserved"]


def test_a_cluster_without_kueues_api_has_nothing_to_drain() -> None:
    class Gone(FakeApi):
        def list_cluster_custom_object(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            raise ApiException(status=404)

    assert drain(Gone([], [], 0), "lab", "w1") == []


def test_new_credentials_are_kept_for_the_delete_without_a_replacement() -> None:
    old = {"kubeconfig": "a", "context": "c", "fleet": "lab", "timeout": 120}
    diff = QueueDrainProvider().diff("id", old, {**old, "kubeconfig": "b"})
    assert diff.changes and not diff.replaces
    assert not QueueDrainProvider().diff("id", old, dict(old)).changes
