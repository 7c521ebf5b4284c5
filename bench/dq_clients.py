"""The manager's clients to its workers, as Kueue v0.19.2's MultiKueue has them: one per
worker, direct (no cache), rate-limited by client-go's default token bucket.

Read in kubernetes-sigs/kueue v0.19.2:
- pkg/controller/admissionchecks/multikueue/multikueuecluster.go: each worker's client is
  `client.NewWithWatch(restConfig, ...)`, a client without a cache, on a rest.Config that
  sets no QPS or Burst, so client-go's defaults hold (5 QPS, burst 10: k8s.io/client-go
  rest/config.go DefaultQPS, DefaultBurst); kueue issue 14973 adds a setting in a later
  release than the module proxy serves.
- pkg/controller/admissionchecks/multikueue/workload.go: every reconcile of a manager
  Workload reads it from every connected worker (`readGroup`: one GET each, in turn); a
  nominated worker without a copy gets one Create (`nominateAndSynchronizeWorkers`); a
  copy no longer wanted is removed by `RemoveRemoteObjects`: the job object's delete
  (`DeleteRemoteObjectIfOwned`: a GET, then a Delete where it exists) and the Workload's
  Delete. Its finalizer's Update is not sent: `cloneForCreate` does not copy finalizers
  (pkg/util/api/api.go `CloneObjectMetaForCreation`), and a worker's Kueue adds none to a
  Workload no job of its own owns.
- each kind has a rate limiter of its own: client-go makes a token bucket for every REST
  client whose config has none (k8s.io/client-go v0.36 rest/config.go
  `RESTClientForConfigAndClient`), and controller-runtime makes a REST client per kind
  (sigs.k8s.io/controller-runtime v0.24.1 pkg/client/client_rest_resources.go `getResource`)
  and one for metadata-only reads (the job's ownership check, a `PartialObjectMetadata`
  GET: pkg/controller/jobframework/utils.go `ValidateRemoteObjectOwnership`); so a
  worker's Workloads, its Jobs and those metadata reads each go at 5 QPS, burst 10;
- client-go waits for a token before each request (rest/request.go `tryThrottle`), and
  golang.org/x/time/rate's `Limiter.Wait` reserves it at once, in the order asked, going
  into debt: what `Bucket.reserve` does.
"""

from __future__ import annotations

from dataclasses import dataclass

# The rate limiters of one worker's client (above): Workload requests, Job requests, and
# metadata-only reads.
WORKLOAD, JOB, METADATA = "Workload", "Job", "metadata"
# Requests of the admitted copy's job (the adapter's SyncJob: a GET, then its Create).
CREATE_JOB = 2


@dataclass
class Bucket:
    """golang.org/x/time/rate's Limiter: `burst` tokens, refilled at `qps` a second."""

    qps: float
    burst: int
    tokens: float = 0.0
    last: float = 0.0

    def __post_init__(self) -> None:
        self.tokens = float(self.burst)

    def reserve(self, now: float, n: int = 1) -> float:
        """Takes `n` tokens asked for at `now`; returns how long the asker waits for them
        (reserveN: tokens refilled to `now`, then taken, possibly into debt)."""
        if now > self.last:
            self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.qps)
            self.last = now
        self.tokens -= n
        return max(0.0, -self.tokens / self.qps)


class Clients:
    """One bucket per worker; with `qps` 0, no limit (every request at once)."""

    def __init__(self, workers: list[str], qps: float, burst: int) -> None:
        self.limited = qps > 0
        self.qps, self.burst = qps, burst
        self.workers = list(workers)
        self.buckets: dict[tuple[str, str], Bucket] = {}
        self.requests = dict.fromkeys(workers, 0)
        self.reads = 0  # the Workload GETs of read groups

    def send(self, worker: str, at: float, n: int = 1, kind: str = WORKLOAD) -> float:
        """When `n` requests of `kind` to `worker`, asked for at `at`, have all gone out."""
        self.requests[worker] = self.requests.get(worker, 0) + n
        if not self.limited:
            return at
        bucket = self.buckets.get((worker, kind))
        if bucket is None:
            bucket = self.buckets[worker, kind] = Bucket(self.qps, self.burst)
        return at + bucket.reserve(at, n)

    def read_group(self, at: float) -> float:
        """One reconcile's reads: the Workload from every worker, one after the other;
        when the last has gone out."""
        for worker in self.workers:
            at = self.send(worker, at)
            self.reads += 1
        return at

    def remove(self, worker: str, at: float, job: bool) -> float:
        """RemoveRemoteObjects on one worker: the job's ownership GET, its Delete where it
        exists (`job`: the copy was admitted and its job made), then the Workload's
        Delete; when the last has gone out."""
        at = self.send(worker, at, 1, METADATA)
        if job:
            at = self.send(worker, at, 1, JOB)
        return self.send(worker, at)

    def unowned(self, at: float) -> float:
        """RemoveRemoteObjects where nothing is left: the ownership GET on every worker."""
        for worker in self.workers:
            at = self.send(worker, at, 1, METADATA)
        return at
