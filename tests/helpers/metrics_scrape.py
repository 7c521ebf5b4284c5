"""Every metric monitoring/'s dashboard and rules read, scraped from the loopback fleet: the
dispatcher's /metrics and Kueue v0.19.2's on the manager and every worker, after a Job went
through MultiKueue and a workload found no worker (tests/real/test_real_dispatch.py)."""

from __future__ import annotations

import re
import time
from pathlib import Path

from components.objects.kueue_config import KUEUE_NAMESPACE
from loopback.client import Client
from tests.helpers.dispatch_steps import STEP, Dispatching, batch_job
from tests.helpers.monitoring import exposition, family_of, metric_names, queries, scrape

# Kueue's ClusterRole for reading its /metrics (config/rbac/metrics_reader_role.yaml at
# v0.19.2: GET on the /metrics non-resource URL); its release binds it to nobody, a scraper
# is bound to it.
METRICS_READER = "kueue-metrics-reader"
SCRAPER = "metrics-scraper"
# Names the Python client declares (a `# TYPE` line) but has no sample of until it happens:
# what the fleet cannot be made to show without breaking the dispatcher's API server.
DECLARED_ONLY = {
    "mkf_write_errors_total": "a write the dispatcher gives up on after its retries; none "
    "happens while the manager's API server takes every write",
}


def kueue_token(client: Client) -> str:
    """A token that may read Kueue's /metrics, as a Prometheus's would: a ServiceAccount
    bound to Kueue's own metrics-reader ClusterRole."""
    client.apply(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": SCRAPER, "namespace": KUEUE_NAMESPACE},
        }
    )
    client.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": SCRAPER},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": METRICS_READER,
            },
            "subjects": [{"kind": "ServiceAccount", "name": SCRAPER, "namespace": KUEUE_NAMESPACE}],
        }
    )
    return client.service_account_token(SCRAPER, KUEUE_NAMESPACE, 600)


def pages(d: Dispatching, tokens: dict[str, str]) -> dict[str, str]:
    """Each target's /metrics page: the dispatcher, and Kueue on every cluster."""
    found = {"dispatcher": d.dispatcher.metrics_text()}
    for name, kueue in d.fleet.fleet.kueues.items():
        url = f"https://127.0.0.1:{kueue.ports['metrics']}/metrics"
        found[f"kueue on {name}"] = scrape(url, tokens[name])
    return found


def unexported(used: dict[str, list[str]], found: dict[str, str]) -> list[str]:
    """A line for each used name no page has a sample of (and that is not DECLARED_ONLY and
    declared)."""
    samples: set[str] = set()
    declared: dict[str, str] = {}
    for text in found.values():
        page_samples, page_declared = exposition(text)
        samples |= page_samples
        declared |= page_declared
    problems = []
    for name, where in sorted(used.items()):
        if name in samples:
            continue
        family = family_of(name, declared)
        if family and name in DECLARED_ONLY:
            continue
        said = f"declared as {family} but no sample" if family else "not exported"
        problems.append(f"{name}: {said}; used by {', '.join(where)}")
    return problems


def every_metric_used_is_exported(d: Dispatching, promtool: Path) -> None:
    used: dict[str, list[str]] = {}
    for where, expr in queries():
        for name in metric_names(promtool, expr):
            used.setdefault(name, []).append(where)
    tokens = {
        name: kueue_token(Client(d.fleet.fleet.kubeconfig(name))) for name in d.fleet.fleet.kueues
    }
    # A Job through MultiKueue: a decision, a nomination, a remote admission, Kueue's
    # admission counters and histograms on the manager and the worker.
    d.submit(batch_job("scraped", "500m"))
    d.admitted_where(d.workload_of("Job", "scraped")["metadata"]["name"])
    # The dispatcher's turn, from the real Kueue's QuotaReserved stamp to its nomination:
    # every nomination so far counted, each within seconds.
    page = d.dispatcher.metrics_text()
    sample = {
        m[1]: float(m[2])
        for m in re.finditer(r"^mkf_nomination_delay_seconds_(count|sum) (\S+)$", page, re.M)
    }
    assert sample.get("count", 0) >= 1 and 0 <= sample["sum"] / sample["count"] < 30, page
    # Each Kueue runs its controllers' reconciles as Kueue's install ships them
    # (kueue_config.py GROUP_KIND_CONCURRENCY); a controller not given its number would
    # show 1 (controller-runtime's default), MultiKueue's Workload reconciler included.
    kueues = {t: text for t, text in pages(d, tokens).items() if t != "dispatcher"}
    concurrency = {
        (target, m[1]): int(float(m[2]))
        for target, text in kueues.items()
        for m in re.finditer(
            r'^controller_runtime_max_concurrent_reconciles\{controller="([^"]+)"\} (\S+)$',
            text,
            re.M,
        )
    }
    for controller, shipped in (
        ("workload_controller", 10),
        ("multikueue_workload", 10),
        ("job", 5),
    ):
        assert {concurrency.get((t, controller)) for t in kueues} == {shipped}, concurrency
    # One that fits the manager's quota (the workers' sum) but no worker (4 CPUs each in the
    # dev stack): a decision that finds no cluster.
    d.submit(batch_job("too-big", "4500m"))
    d.wait(
        "the dispatcher to count a decision without a feasible worker",
        lambda: "mkf_no_feasible_cluster_total{" in d.dispatcher.metrics_text(),
    )
    # Gauges are exported on Kueue's and the dispatcher's own schedules (the dispatcher's
    # health every resync period): wait until nothing is missing, or say what still is.
    deadline = time.monotonic() + STEP
    while (problems := unexported(used, pages(d, tokens))) and time.monotonic() < deadline:
        time.sleep(2)
    d.clear()
    assert not problems, "\n".join(problems)
