"""What `components/` may use of the controller, and nothing else: the seam between the
stack and the dispatcher. tests/unit/test_imports.py holds it both ways: a module of
`components/` imports from `controller/` only this package, and no module of `controller/`
imports `components/` or Pulumi (the controller's image holds controller/ alone).

Here, the contract both sides read: the DispatchPolicy API (its CRD, typed spec, durations,
selector limits), the settings file, the typed inputs and what their fields mean, the plain
values the stack writes and the dispatcher reads (the cordon label, quantities), the API
kinds as paths (`Kind`, which loads no client), and hosts in URLs as Kueue and Go's
url.Parse read them (controller/hosts.py: which servers Kueue trusts, which hosts are the
machine itself). Each is defined where the controller needs it and named here, so what the
stack relies on is one list, and a change to it shows in one file. The submodules:
`terminal`, the command-line conventions mkf shares with the controller's own commands;
`cluster_access`, the Kubernetes client mkf's commands read a running fleet with (kept
apart: it loads the asynchronous client, which the stack's program and mkf's other
commands do not need).
"""

from __future__ import annotations

from controller import policy_api, typed
from controller.field_docs import CONTROLLER_DOCS
from controller.hosts import is_loopback_host, kueue_trusts_server, server_host, split_url
from controller.kinds import Kind
from controller.model import CORDONED_LABEL, Policy, format_quantity, parse_quantity
from controller.policy_api import (
    DURATION_FIX,
    DURATION_PATTERN,
    GROUP,
    MAX_SELECTOR_LABELS,
    PLURAL,
    PolicySpec,
    crd,
    is_duration,
    policy_object,
    seconds,
)
from controller.settings import WORKER_LOST_TIMEOUT_MAX, Settings, SettingsFile, parse_settings

__all__ = [
    "CONTROLLER_DOCS",
    "CORDONED_LABEL",
    "DURATION_FIX",
    "DURATION_PATTERN",
    "GROUP",
    "MAX_SELECTOR_LABELS",
    "PLURAL",
    "WORKER_LOST_TIMEOUT_MAX",
    "Kind",
    "Policy",
    "PolicySpec",
    "Settings",
    "SettingsFile",
    "crd",
    "format_quantity",
    "is_duration",
    "is_loopback_host",
    "kueue_trusts_server",
    "parse_quantity",
    "parse_settings",
    "policy_api",
    "policy_object",
    "seconds",
    "server_host",
    "split_url",
    "typed",
]
