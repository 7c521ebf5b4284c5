"""What holds back everything that passes Kueue's webhooks (queues, MultiKueue objects, the
frameworks' objects) until those webhooks answer through the cluster's API server.

Kueue's Deployment being available and its webhook Service having ready endpoints (what
the install's ConfigGroup waits for) is not enough: the API server reaches a webhook
through the Service's cluster IP, and until kube-proxy on its node has programmed the new
endpoints, a call is refused ("failed calling webhook ... connection refused"). On a busy
machine that lag outlasted the provider's wait and failed `up` half-way, on one of four
kind clusters. Kueue's own e2e guards against the same thing the same way
(test/util/e2e.go at v0.19.2, lines 516-525, waitForKueueControllerReadyWithWebhookEndpoints:
"EndpointSlice readiness does not guarantee that the apiserver has dropped stale webhook
connections, so verify the webhook path itself"): a server-side dry-run create of a
ResourceFlavor, which goes through Kueue's mutating and validating ResourceFlavor webhooks
and stores nothing, repeated until it succeeds.

The probe runs when the resource is created: on the first `up`, and again whenever Kueue
restarts because of the stack: another cluster, another Kueue version, or any change to
Kueue's pod template (its configuration's start-up hash, feature gates, the plugin's
mount), which rolls out new pods with the same race. An unchanged stack leaves it alone."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from typing import Any

import pulumi
import yaml
from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider

from components.objects.labels import KUEUE_NAMESPACE
from components.resources.commands import CommandFailed

PROBE_TIMEOUT = 300.0
PROBE = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ResourceFlavor",
    "metadata": {"generateName": "webhook-probe-"},
}
# Worth another try: a webhook call that failed (500 InternalError), the API server or an
# aggregated API not ready (503), the CRD not served yet (404), throttling (429).
TRANSIENT = {404, 429, 500, 502, 503, 504}


def _reason(exc: Exception) -> str:
    """The API server's message (a Status object's), else the error's first line."""
    text = str(getattr(exc, "body", None) or exc)
    try:
        status = json.loads(text) if text.startswith("{") else {}
    except ValueError:
        status = {}
    message = status.get("message") if isinstance(status, dict) else None
    first = (message or text).strip().splitlines()
    return first[0][:300] if first else type(exc).__name__


def pod_template_digest(objects: list[dict[str, Any]], deployment: str) -> str:
    """The sha256 of Kueue's Deployment's pod template as the stack renders it: a change of
    it rolls out new Kueue pods, which race the webhook again."""
    for obj in objects:
        if obj.get("kind") == "Deployment" and obj["metadata"].get("name") == deployment:
            template = json.dumps(obj["spec"]["template"], sort_keys=True)
            return hashlib.sha256(template.encode()).hexdigest()
    return ""


def probe_webhooks(
    cluster: str,
    create: Callable[[], Any],
    timeout: float = PROBE_TIMEOUT,
    interval: float = 2.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """Calls `create` (the dry-run) until it succeeds; the seconds it took. CommandFailed
    at once for an answer no wait will change (the probe refused, this user refused), and
    after `timeout` for one that kept failing, naming the last reason."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    started = clock()
    while True:
        try:
            create()
            return clock() - started
        except ApiException as exc:
            if exc.status not in TRANSIENT:
                raise CommandFailed(
                    f"cluster '{cluster}': a dry-run ResourceFlavor, which Kueue's webhooks "
                    f"check, was refused ({exc.status}: {_reason(exc)}); the stack's "
                    "kubeconfig needs a user that may create ResourceFlavors"
                ) from None
            last = f"{exc.status}: {_reason(exc)}"
        except (HTTPError, OSError) as exc:
            last = f"{type(exc).__name__}: {_reason(exc)}"
        if clock() - started > timeout:
            raise CommandFailed(
                f"cluster '{cluster}': Kueue's webhooks did not answer through the API server "
                f"within {timeout:.0f}s (last: {last}); see `kubectl -n {KUEUE_NAMESPACE} get "
                "pods,endpointslices` and Kueue's log there"
            )
        sleep(interval)


class KueueWebhookProbeProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        from kubernetes import client, config

        api = client.CustomObjectsApi(
            config.new_client_from_config_dict(
                yaml.safe_load(props["kubeconfig"]), context=props.get("context") or None
            )
        )

        def dry_run() -> Any:
            return api.create_cluster_custom_object(
                "kueue.x-k8s.io", "v1beta2", "resourceflavors", PROBE,
                dry_run="All", _request_timeout=15,
            )  # fmt: skip

        probe_webhooks(props["cluster_name"], dry_run, float(props.get("timeout") or PROBE_TIMEOUT))
        return CreateResult(id_=props["cluster_name"], outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # Probed again for another cluster (known by its identity where it has one, so new
        # credentials for the same cluster are not another cluster), another Kueue, or a
        # Kueue restarted by a new pod template.
        cluster = "cluster" if olds.get("cluster") and news.get("cluster") else "kubeconfig"
        keys = (cluster, "cluster_name", "version", "pod_template")
        replaces = [k for k in keys if olds.get(k) != news.get(k)]
        return DiffResult(changes=bool(replaces), replaces=replaces)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Nothing was created: a dry run stores nothing."""


class KueueWebhookProbe(
    pulumi.dynamic.Resource, module="multikueue-fleet", name="KueueWebhookProbe"
):
    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions) -> None:
        super().__init__(
            KueueWebhookProbeProvider(),
            name,
            props,
            pulumi.ResourceOptions.merge(
                opts, pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"])
            ),
        )
