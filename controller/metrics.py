"""Prometheus metrics of the dispatcher, in a registry of its own (tests make several)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        # process_cpu_seconds_total and process_resident_memory_bytes, as the default
        # registry has them: what an operator (and bench/fleet_compare.py) reads the
        # dispatcher's cost from.
        ProcessCollector(registry=self.registry)
        self.decision_seconds = Histogram(
            "mkf_dispatch_decision_seconds",
            "Time to decide one workload's nominations",
            registry=self.registry,
            buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1),
        )
        # The wait a workload's reservation on the manager spends on this dispatcher, watch,
        # decision and write together (Kueue's own AllAtOnce has none: it creates copies in
        # the reconcile that sees the reservation). Measured from the QuotaReserved
        # condition's lastTransitionTime, which the API server keeps to the second.
        self.nomination_delay = Histogram(
            "mkf_nomination_delay_seconds",
            "Seconds from a workload's quota reservation on the manager to its first "
            "nomination written",
            registry=self.registry,
            buckets=(0.5, 1, 2, 3, 5, 10, 30, 60, 300),
        )
        self.nominations = Counter(
            "mkf_nominations_total",
            "Clusters nominated for workloads",
            ["cluster"],
            registry=self.registry,
        )
        self.no_feasible = Counter(
            "mkf_no_feasible_cluster_total",
            "Decisions that found no cluster",
            ["reason"],
            registry=self.registry,
        )
        self.worker_healthy = Gauge(
            "mkf_worker_healthy",
            "1 when the dispatcher's view of a worker is current",
            ["cluster"],
            registry=self.registry,
        )
        self.worker_cordoned = Gauge(
            "mkf_worker_cordoned",
            "1 while a worker is cordoned: nothing new is nominated there",
            ["cluster"],
            registry=self.registry,
        )
        self.snapshot_age = Gauge(
            "mkf_worker_snapshot_age_seconds",
            "Seconds since the last update from a worker",
            ["cluster"],
            registry=self.registry,
        )
        self.leader = Gauge(
            "mkf_leader", "1 while this replica holds the lease", registry=self.registry
        )
        self.write_errors = Counter(
            "mkf_write_errors_total",
            "Writes that failed after retries",
            ["kind"],
            registry=self.registry,
        )
