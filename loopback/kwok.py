"""Nodes and pods without kubelets on a loopback worker (issue 39, item 3): KWOK v0.8.0's
controller and a kube-scheduler per worker, so that the Jobs Kueue admits there get pods,
are scheduled onto simulated nodes, run for as long as each pod asks and complete, with no
container and no CPU spent on them.

What each worker gets, beside its API server, controller manager and Kueue:
- kube-scheduler (the control plane's own build), as user system:kube-scheduler, the identity
  the API server's bootstrap RBAC binds its role to;
- kwok, with the ServiceAccount, ClusterRole and binding of the module's kustomize/rbac (its
  rights exactly), managing only the nodes labelled `type=kwok`;
- Nodes of that label (their capacity set at create: the API server keeps a Node's status as
  created, pkg/registry/core/node/strategy.go), which kwok's node-initialize stage marks Ready
  and its lease stage keeps so.

The binary ships no stages (kwok v0.8.0 pkg/kwok/cmd/root.go exits with "no stages found"):
they are given from the module's own kustomize/stage files, read where Go's module cache
holds them, with one changed: the pod-complete stage of kustomize/stage/pod/general waits
1 s plus a jitter of up to 5 s, and a jitter shorter than the delay becomes the delay
(pkg/utils/lifecycle/lifecycle.go, Stage.Delay), so its jitter is removed and its delay
read from the pod's RUN_ANNOTATION only, counted from when kwok marked the pod Running and
Ready. A pod without it completes at once, as the fast stage does. Only pods owned by a Job
complete (the stage's selector): a LeaderWorkerSet's pods serve until deleted, as they do on
a kubelet.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.upstream import gomodule, toolchain
from loopback.client import Client
from loopback.controlplane import ADMIN, SCHEDULER, ControlPlane, StartError
from loopback.dispatcher import TOKEN_SECONDS, service_account_kubeconfig
from loopback.processes import log_tail, start

MODULE = "sigs.k8s.io/kwok"
MODULE_DIR = toolchain.TOOLS_MODULE / "kwok"
# The annotation a pod's run time is read from (the key kwok's general stages use), a Go
# duration such as "90s".
RUN_ANNOTATION = "pod-complete.stage.kwok.x-k8s.io/delay"
NODE_LABEL = {"type": "kwok"}
SERVICE_ACCOUNT = ("kube-system", "kwok-controller")
# The stages taken as the module has them (kustomize/stage/fast lists the same, with the
# fast pod-complete in place of the timed one).
STAGE_FILES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)
TIMED_COMPLETE = "kustomize/stage/pod/general/pod-complete.yaml"
RBAC_FILES = (
    "kustomize/rbac/service_account.yaml",
    "kustomize/rbac/role.yaml",
    "kustomize/rbac/role_binding.yaml",
)


@dataclass(frozen=True)
class NodeShape:
    """What each simulated node of a worker offers."""

    count: int = 1
    cpu: str = "64"
    memory: str = "256Gi"
    pods: str = "110"


def module_dir() -> Path:
    version = toolchain.module_versions(MODULE_DIR)[MODULE]
    return gomodule.module_dir(MODULE, version, within=MODULE_DIR)


def timed_complete(stage: dict[str, Any]) -> dict[str, Any]:
    """The general pod-complete stage with its delay read from RUN_ANNOTATION alone."""
    changed = copy.deepcopy(stage)
    changed["spec"]["delay"] = {
        "durationMilliseconds": 0,
        "durationFrom": {"expressionFrom": f'.metadata.annotations["{RUN_ANNOTATION}"]'},
    }
    return changed


def stages(source: Path) -> list[dict[str, Any]]:
    """Every stage kwok runs with, from the module at `source`."""
    found = [yaml.safe_load((source / f).read_text()) for f in STAGE_FILES]
    found.append(timed_complete(yaml.safe_load((source / TIMED_COMPLETE).read_text())))
    names = [s["metadata"]["name"] for s in found]
    if len(set(names)) != len(names):
        raise StartError(f"kwok stages from {source} repeat a name: {names}")
    return found


def node(name: str, shape: NodeShape) -> dict[str, Any]:
    resources = {"cpu": shape.cpu, "memory": shape.memory, "pods": shape.pods}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {**NODE_LABEL, "kubernetes.io/hostname": name},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "status": {"allocatable": dict(resources), "capacity": dict(resources)},
    }


def node_names(cluster: str, shape: NodeShape) -> list[str]:
    return [f"{cluster}-kwok-{i}" for i in range(shape.count)]


def _ready(item: dict[str, Any]) -> bool:
    conditions = (item.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def start_nodes(
    planes: Iterable[ControlPlane], shape: NodeShape = NodeShape(), timeout: float = 120
) -> None:
    """kube-scheduler and kwok on each plane, its Nodes created, until every Node is Ready."""
    binaries = toolchain.require(["kwok", "kube-scheduler"])
    source = module_dir()
    stage_text = yaml.safe_dump_all(stages(source), sort_keys=False)
    rbac = [yaml.safe_load((source / f).read_text()) for f in RBAC_FILES]
    planes = list(planes)
    clients: dict[str, Client] = {}
    for plane in planes:
        client = Client(plane.kubeconfig_path(ADMIN))
        clients[plane.name] = client
        plane.started.append(
            start(
                f"{plane.name}/kube-scheduler",
                [
                    str(binaries["kube-scheduler"]),
                    f"--kubeconfig={plane.kubeconfig_path(SCHEDULER)}",
                    # No serving: nothing scrapes it, and no port to collide with.
                    "--secure-port=0",
                    "--leader-elect=false",
                    "--profiling=false",
                ],
                plane.folder / "kube-scheduler.log",
            )
        )
        for obj in rbac:
            client.apply(obj)
        namespace, account = SERVICE_ACCOUNT
        token = client.service_account_token(account, namespace, TOKEN_SECONDS)
        admin = yaml.safe_load(plane.kubeconfig_path(ADMIN).read_text())
        kubeconfig = plane.folder / "kwok.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(service_account_kubeconfig(admin, token, account)))
        kubeconfig.chmod(0o600)
        stage_file = plane.folder / "kwok-stages.yaml"
        stage_file.write_text(stage_text)
        plane.started.append(
            start(
                f"{plane.name}/kwok",
                [
                    str(binaries["kwok"]),
                    f"--kubeconfig={kubeconfig}",
                    f"--config={stage_file}",
                    "--manage-nodes-with-label-selector="
                    + ",".join(f"{k}={v}" for k, v in NODE_LABEL.items()),
                ],
                plane.folder / "kwok.log",
            )
        )
        for name in node_names(plane.name, shape):
            client.apply(node(name, shape))
    deadline = time.monotonic() + timeout
    for plane in planes:
        wanted = set(node_names(plane.name, shape))
        while True:
            plane.check_alive()
            nodes = clients[plane.name].list("v1", "Node")
            if wanted <= {n["metadata"]["name"] for n in nodes if _ready(n)}:
                break
            if time.monotonic() > deadline:
                raise StartError(
                    f"{plane.name}: kwok's nodes not Ready after {timeout:.0f} s; "
                    f"its log ends: {log_tail(plane.folder / 'kwok.log')}"
                )
            time.sleep(0.5)
