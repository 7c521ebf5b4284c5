"""The wait for Kueue's webhooks to answer through the API server
(components/resources/kueue_webhooks.py): retried while the answer may change, one line
naming the cluster and the last reason when it never does, at once when no wait will help.
The probe against a real API server and Kueue is the loopback and kind tiers' (every
managed install passes through it there)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import MaxRetryError

from components.objects.kueue_install import KUEUE_DEPLOYMENT, kueue_objects
from components.resources.commands import CommandFailed
from components.resources.kueue_webhooks import (
    PROBE,
    KueueWebhookProbeProvider,
    pod_template_digest,
    probe_webhooks,
)
from tests.helpers.fleet_config import KUEUE_SKELETON, base, checked_spec

REFUSED = (
    'Internal error occurred: failed calling webhook "mresourceflavor.kb.io": failed to call '
    'webhook: Post "https://kueue-webhook-service.kueue-system.svc:443/mutate": dial tcp '
    "10.96.210.237:443: connect: connection refused"
)


def _api_error(status: int, message: str) -> ApiException:
    exc = ApiException(status=status, reason="x")
    exc.body = json.dumps({"kind": "Status", "message": message})
    return exc


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_webhook_not_reachable_yet_is_waited_for() -> None:
    clock = Clock()
    answers: list[Any] = [
        _api_error(500, REFUSED),
        MaxRetryError(None, "/apis", "connection reset"),
        _api_error(404, "the server could not find the requested resource"),
        {"kind": "ResourceFlavor"},
    ]

    def create() -> Any:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    took = probe_webhooks("worker2", create, timeout=60, clock=clock, sleep=clock.sleep)
    assert took == 6.0 and not answers


def test_one_that_never_answers_is_one_line_with_the_last_reason() -> None:
    clock = Clock()

    def create() -> Any:
        raise _api_error(500, REFUSED)

    with pytest.raises(CommandFailed) as caught:
        probe_webhooks("worker2", create, timeout=30, clock=clock, sleep=clock.sleep)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("cluster 'worker2': Kueue's webhooks did not answer")
    assert "within 30s (last: 500: Internal error occurred: failed calling webhook" in message
    assert "kubectl -n kueue-system get pods,endpointslices" in message


@pytest.mark.parametrize("status", [401, 403, 400, 422])
def test_an_answer_no_wait_changes_fails_at_once(status: int) -> None:
    calls = []

    def create() -> Any:
        calls.append(1)
        raise _api_error(status, "resourceflavors.kueue.x-k8s.io is forbidden")

    with pytest.raises(CommandFailed, match=f"cluster 'm': a dry-run ResourceFlavor.*{status}"):
        probe_webhooks("m", create, timeout=60, sleep=lambda _: None)
    assert calls == [1]


def test_the_probe_is_a_dry_run_of_a_generated_name() -> None:
    # Nothing is stored: a dry run, and a generated name that cannot clash with a flavor.
    assert PROBE["metadata"] == {"generateName": "webhook-probe-"}


def test_it_probes_again_for_another_cluster_or_kueue_only() -> None:
    provider = KueueWebhookProbeProvider()
    olds = {"kubeconfig": "a", "cluster": None, "cluster_name": "w1", "version": "v0.19.2"}
    assert not provider.diff("w1", olds, dict(olds)).changes
    assert provider.diff("w1", olds, {**olds, "version": "v0.19.3"}).replaces == ["version"]
    assert provider.diff("w1", olds, {**olds, "kubeconfig": "b"}).replaces == ["kubeconfig"]
    gke = {**olds, "cluster": "projects/p/locations/l/clusters/c"}
    assert not provider.diff("w1", gke, {**gke, "kubeconfig": "rotated"}).changes


def _digest(config: dict[str, Any]) -> str:
    spec = checked_spec(config)
    worker = spec.workers[0]  # the manager here does not wait for PodsReady (BASE)
    return pod_template_digest(kueue_objects(KUEUE_SKELETON, spec, worker), KUEUE_DEPLOYMENT)


def test_it_probes_again_after_every_restart_the_stack_makes() -> None:
    """A change that rolls out new Kueue pods (its configuration, read at start only; its
    feature gates; the plugin's mount) races the webhook again, so it is probed again; a
    change of queues alone restarts nothing and is not."""
    config = base()
    digest = _digest(config)
    assert digest
    queues = base()
    queues["queues"]["localQueues"].append(
        {"namespace": "team-b", "name": "lq", "clusterQueue": "cq"}
    )
    assert _digest(queues) == digest
    pods_ready = base()
    pods_ready["kueue"]["waitForPodsReady"]["timeout"] = "7m"
    assert _digest(pods_ready) != digest
    provider = KueueWebhookProbeProvider()
    olds = {"kubeconfig": "a", "cluster_name": "w1", "version": "v0.19.2", "pod_template": digest}
    news = {**olds, "pod_template": _digest(pods_ready)}
    assert provider.diff("w1", olds, news).replaces == ["pod_template"]
    # A stack deployed before the digest was kept is probed once more, then left alone.
    assert provider.diff("w1", {**olds, "pod_template": None}, olds).replaces == ["pod_template"]
