"""How mkf's commands read a running fleet: the controller's Kubernetes client (retries,
list and watch), its errors and kinds, and who holds the dispatcher's Lease. A module of
its own so that only the commands that reach a fleet load the asynchronous client."""

from __future__ import annotations

from controller.kinds import EVENTS, WORKLOADS, Kind
from controller.kube import ApiError, Kube, connected
from controller.leader import current_leader

__all__ = ["EVENTS", "WORKLOADS", "ApiError", "Kind", "Kube", "connected", "current_leader"]
