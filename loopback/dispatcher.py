"""The project's dispatcher as a local process beside a loopback fleet: `python -m controller
run`, given as files what its pod is given in a cluster.

In a cluster (components/objects/dispatcher.py) the pod reads its settings from the
ConfigMap mounted at /etc/dispatcher, reaches the manager with its ServiceAccount's token
(the kubelet projects one through the TokenRequest API) and finds each worker's read-only
kubeconfig in the labelled Secrets of its namespace on the manager. Here:
- the settings file is that ConfigMap's text, as rendered, with one change, listed:
  `metricsPort`, since a process shares this machine's ports (the pod has its own);
- the manager's kubeconfig holds a token of that same ServiceAccount, from the same
  TokenRequest API, so the process has exactly the rights the project gives the pod;
- the workers' reader kubeconfigs stay where the project puts them, in those Secrets.
"""

from __future__ import annotations

import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from components.objects.dispatcher import NAME, SETTINGS_KEY
from components.objects.labels import FLEET_NAMESPACE
from loopback.controlplane import StartError
from loopback.processes import Started, free_port, log_tail, start, stop_all

ROOT = Path(__file__).resolve().parent.parent
# A day: longer than any test, and what a projected token's kubelet refreshes well before.
TOKEN_SECONDS = 86400


def rendered_settings(objects: Iterable[dict[str, Any]]) -> str:
    """The settings file's text from the manager's objects (the dispatcher's ConfigMap)."""
    for obj in objects:
        meta = obj.get("metadata") or {}
        if (
            obj["kind"] == "ConfigMap"
            and meta.get("name") == NAME
            and meta.get("namespace") == FLEET_NAMESPACE
        ):
            return str(obj["data"][SETTINGS_KEY])
    raise StartError(
        f"the manager's objects have no ConfigMap {FLEET_NAMESPACE}/{NAME}: is the dispatcher "
        "enabled in the stack (dispatcher.enabled)?"
    )


def service_account_kubeconfig(admin: dict[str, Any], token: str, user: str) -> dict[str, Any]:
    """The admin kubeconfig's cluster (server and CA) with a bearer token instead."""
    cluster = admin["clusters"][0]
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [
            {"name": cluster["name"], "context": {"cluster": cluster["name"], "user": user}}
        ],
        "current-context": cluster["name"],
    }


class LocalDispatcher:
    """`python -m controller run` against a manager, its files in `folder`."""

    def __init__(self, folder: Path, name: str = "dispatcher") -> None:
        self.folder = folder
        self.name = name
        self.port = free_port()
        self.settings_file = folder / f"{name}-config.yaml"
        self.kubeconfig_file = folder / f"{name}.kubeconfig"
        self.log = folder / f"{name}.log"
        self.changes: list[str] = []
        self.started: Started | None = None

    def prepare(self, settings_text: str, admin_kubeconfig: Path, token: str) -> None:
        """From the rendered settings and a token of the dispatcher's ServiceAccount."""
        admin = yaml.safe_load(admin_kubeconfig.read_text())
        self.prepare_with(
            settings_text,
            yaml.safe_dump(service_account_kubeconfig(admin, token, NAME), sort_keys=False),
        )

    def prepare_with(self, settings_text: str, kubeconfig_text: str) -> None:
        """From the settings and kubeconfig a stack with `dispatcher.run: local` outputs
        (dispatcherSettings, dispatcherKubeconfig)."""
        settings = yaml.safe_load(settings_text) or {}
        self.changes = [f"metricsPort: {settings.get('metricsPort', '<default>')} -> {self.port}"]
        settings["metricsPort"] = self.port
        self.settings_file.write_text(yaml.safe_dump(settings, sort_keys=False))
        (self.folder / f"{self.name}-config-changes.txt").write_text("\n".join(self.changes) + "\n")
        self.kubeconfig_file.write_text(kubeconfig_text)
        self.kubeconfig_file.chmod(0o600)

    def start(self) -> Started:
        # The kubernetes clients write a kubeconfig's inline certificate to a temporary file
        # and remove it only at a normal exit (kubernetes_asyncio config/kube_config.py,
        # _create_temp_file_with_content, atexit): a dispatcher killed would leave it in
        # /tmp. Its own folder, inside the fleet's, goes with the fleet.
        scratch = self.folder / f"{self.name}-tmp"
        scratch.mkdir(exist_ok=True)
        self.started = start(
            self.name,
            [
                sys.executable,
                "-m",
                "controller",
                "--kubeconfig",
                str(self.kubeconfig_file),
                "--config",
                str(self.settings_file),
                "run",
            ],
            self.log,
            # The pod's name is its leader-election identity (the Deployment's POD_NAME).
            env={"PYTHONPATH": str(ROOT), "POD_NAME": f"{self.name}-local", "TMPDIR": str(scratch)},
        )
        return self.started

    def wait_ready(self, timeout: float) -> None:
        """Until /readyz says the caches are synced, as the pod's readiness probe asks."""
        deadline = time.monotonic() + timeout
        last = ""
        while True:
            if self.started is None or self.started.exited():
                raise StartError(f"the dispatcher exited; its log ends: {log_tail(self.log)}")
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{self.port}/readyz", timeout=3
                ) as answer:
                    if answer.status == 200:
                        return
            except (OSError, urllib.error.HTTPError) as exc:
                last = str(exc)
            if time.monotonic() > deadline:
                raise StartError(
                    f"the dispatcher is not ready after {timeout:.0f} s ({last}); its log ends: "
                    f"{log_tail(self.log)}"
                )
            time.sleep(0.5)

    def metrics_text(self) -> str:
        """Its /metrics page as Prometheus scrapes it ("" while it does not answer)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=3) as page:
                return page.read().decode()
        except (OSError, urllib.error.HTTPError):
            return ""

    def stop(self) -> None:
        if self.started is not None:
            stop_all([self.started.as_dict()])
