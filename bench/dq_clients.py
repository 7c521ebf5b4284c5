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
- client-go waits for a token before each request (rest/request.go `tryThrottle`), and
  golang.org/x/time/rate's `Limiter.Wait` reserves it at once, in the order asked, going
  into debt: what `Bucket.reserve` does.
"""

from __future__ import annotations

from dataclasses import dataclass

# Requests of one removal (RemoveRemoteObjects): the job's GET and Delete (a copy that was
# never admitted has no job on the worker: its GET only), then the Workload's Delete.
REMOVE_PENDING = 2
REMOVE_ADMITTED = 3
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
        self.buckets = {w: Bucket(qps, burst) for w in workers} if self.limited else {}
        self.requests = dict.fromkeys(workers, 0)

    def send(self, worker: str, at: float, n: int = 1) -> float:
        """When `n` requests to `worker`, asked for at `at`, have all gone out."""
        self.requests[worker] = self.requests.get(worker, 0) + n
        if not self.limited:
            return at
        return at + self.buckets[worker].reserve(at, n)

    def read_group(self, at: float) -> float:
        """One reconcile's reads: the Workload from every worker, one after the other;
        when the last has gone out."""
        for worker in self.buckets or self.requests:
            at = self.send(worker, at)
        return at
