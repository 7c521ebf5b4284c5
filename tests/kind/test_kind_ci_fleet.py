"""The CI fleet on the kind tier: `mkf run --base ci -- COMMAND`, as
.github/workflows/fleet-e2e.yaml runs it, brings up a throw-away fleet, runs the sample jobs
to completion and leaves nothing behind, when the command fails after them and when the run
is sent SIGTERM half-way. While its command waits, the same fleet is changed in place to
ClusterProfile mode (`mkf up --name`), Kueue reaching the worker through the access-provider
plugin mounted each way the stack offers. Two fleets, the SIGTERM one half made: a two-core
host holds about one kind fleet's start-up at a time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import yaml

from components.model.versions import SECRETREADER_PLUGIN_IMAGE
from components.objects.kueue_install import PLUGIN_VOLUME
from controller.profiles import SAMPLE_SECONDS
from kindnode import images
from tests.helpers.kind_tier import (
    engine_leftovers,
    fleet_containers,
    kind_clusters,
    kubectl_json,
    run,
    user_project,
)

PASSPHRASE = "kind-tier-ci"


@pytest.fixture(scope="module")
def ci_project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    project, env = user_project(tmp_path_factory.mktemp("kind-ci") / "project", "ci", PASSPHRASE)
    return project, env


def _mkf_run(name: str, *command: str) -> list[str]:
    return [".venv/bin/mkf", "run", "--base", "ci", "--name", name, "--out", ".fleet", "--",
            *command]  # fmt: skip


def _nothing_left(project: Path, env: dict[str, str], name: str) -> None:
    assert not fleet_containers(f"{name}-"), "node containers left"
    assert not [c for c in kind_clusters() if c.startswith(f"{name}-")], "kind clusters left"
    stacks = run(["pulumi", "stack", "ls", "--json"], project, env)
    assert stacks.returncode == 0, stacks.stderr
    assert not [s for s in json.loads(stacks.stdout or "[]") if s["name"] == name]
    assert not list((project / "stacks").glob(f"Pulumi.{name}.yaml"))
    assert not engine_leftovers(project, env), "the engine's temporary files left"


def test_sigterm_mid_run_tears_the_fleet_down(ci_project: tuple[Path, dict[str, str]]) -> None:
    project, env = ci_project
    name = f"kt{uuid.uuid4().hex[:6]}"
    log = project / f"{name}.log"
    # A grace of a second: the Pulumi CLI, asked to cancel, does not stop before kind's
    # creates end, so its process group is killed with them, as on a host where a create
    # outlasts the default minute. Those creates are in the state only as pending, which
    # destroy skips; the teardown removes them by the stack's own marks (kind_creates.py).
    env = {**env, "MKF_INTERRUPT_GRACE": "1"}
    with log.open("w") as out:
        child = subprocess.Popen(
            _mkf_run(name, "sleep", "1200"), cwd=project, env=env, stdout=out, stderr=out
        )
        # SIGTERM once the first node container exists: the fleet is half made, kind's
        # creates still running (kubeadm takes half a minute and more after it).
        deadline = time.monotonic() + 900
        while not fleet_containers(f"{name}-") and child.poll() is None:
            assert time.monotonic() < deadline, "no cluster was ever created"
            time.sleep(1)
        os.kill(child.pid, signal.SIGTERM)
        code = child.wait(timeout=1800)
    said = log.read_text()
    assert code == 143, said[-6000:]
    assert "did not exit after 1s: sending SIGTERM" in said, said[-6000:]
    assert "its create was cut short; deleted" in said, said[-6000:]
    _nothing_left(project, env, name)


# What is recorded of the manager before the sample jobs run: Kueue's pod spec, its pods and
# the MultiKueueClusters, so the test sees which way the plugin went in.
RECORD = (
    "kubectl get deployment kueue-controller-manager -n kueue-system -o json > kueue.json && "
    "kubectl get pods -n kueue-system -o json > kueue-pods.json && "
    "kubectl get multikueueclusters -o json > clusters.json && bash scripts/sample-jobs.sh"
)
# The sample jobs of an earlier pass gone, with their Workloads, so the next pass's are
# dispatched afresh.
CLEARED = (
    "kubectl delete -f examples/sample-jobs.yaml --ignore-not-found --wait && "
    'until [ -z "$(kubectl get workloads -n default -o name)" ]; do sleep 2; done'
)


def _cluster_profile_stack(project: Path, base: str, mount: str, plugin_image: str | None) -> None:
    data = yaml.safe_load((project / "stacks" / "Pulumi.ci.yaml").read_text())
    settings: dict[str, str] = {"pluginMount": mount}
    if plugin_image:
        settings["pluginImage"] = plugin_image
    data["config"]["multikueue-fleet:credentials"] = {
        "mode": "clusterProfile",
        "clusterProfile": settings,
    }
    (project / "stacks" / f"Pulumi.{base}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def _dispatches_through(
    project: Path, env: dict[str, str], out: Path, mount: str, plugin_image: str | None
) -> None:
    """The sample jobs complete with Kueue's pod holding the plugin the way `mount` says, and
    the MultiKueueCluster names its ClusterProfile and is Active: Kueue reached the worker
    with the token the plugin read."""
    manager = {**env, "KUBECONFIG": str(out / "kubeconfigs" / "manager.yaml")}
    result = run(["bash", "-c", f"{CLEARED} && {RECORD}"], project, manager, timeout=1800)
    assert result.returncode == 0, f"{mount}: " + result.stdout[-6000:] + result.stderr[-6000:]
    assert "the Job and the JobSet completed on a worker" in result.stdout
    pod = json.loads((project / "kueue.json").read_text())["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == PLUGIN_VOLUME)
    if mount == "imageVolume":
        assert volume["image"]["reference"] == SECRETREADER_PLUGIN_IMAGE
        assert not pod.get("initContainers")
    else:
        assert "emptyDir" in volume
        (init,) = pod["initContainers"]
        assert init["image"] == plugin_image
        # The pod that runs is the new one: its init container (as Kueue's user, whatever
        # the image says) copied the plugin and ended, and no pod of the old template is left.
        pods = json.loads((project / "kueue-pods.json").read_text())["items"]
        kueue = [
            p
            for p in pods
            if p["metadata"]["name"].startswith("kueue-controller-manager")
            and not p["metadata"].get("deletionTimestamp")  # the old one, on its way out
        ]
        assert kueue and all(p["spec"].get("initContainers") for p in kueue), kueue
        for p in kueue:
            (status,) = p["status"]["initContainerStatuses"]
            assert status["state"]["terminated"]["exitCode"] == 0, status
    (cluster,) = json.loads((project / "clusters.json").read_text())["items"]
    assert cluster["spec"]["clusterSource"] == {"clusterProfileRef": {"name": "worker1"}}
    assert {c["type"]: c["status"] for c in cluster["status"]["conditions"]}["Active"] == "True"


def _quiet_across_reconciles(out: Path, mount: str) -> None:
    """Unchanged profile reconciles write nothing (controller/profiles.py writes status only
    when it changes; the dispatcher samples every SAMPLE_SECONDS): across four of them each
    ClusterProfile keeps its resourceVersion and each MultiKueueCluster its Active condition's
    lastTransitionTime, so Kueue never drops the connection it made through the profile."""
    manager = out / "kubeconfigs" / "manager.yaml"

    def snapshot() -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
        profiles = kubectl_json(manager, "get", "clusterprofiles", "-A")["items"]
        for profile in profiles:
            # The dispatcher has written the profile's status: its reconciles are running.
            assert (profile.get("status") or {}).get("conditions"), (mount, profile)
        clusters = kubectl_json(manager, "get", "multikueueclusters")["items"]
        active = {
            c["metadata"]["name"]: next(
                (x["status"], x["lastTransitionTime"])
                for x in c["status"]["conditions"]
                if x["type"] == "Active"
            )
            for c in clusters
        }
        return {p["metadata"]["name"]: p["metadata"]["resourceVersion"] for p in profiles}, active

    before = snapshot()
    assert before[0] and before[1], f"{mount}: no ClusterProfile or MultiKueueCluster"
    assert all(status == "True" for status, _ in before[1].values()), (mount, before)
    time.sleep(4 * SAMPLE_SECONDS + 1)
    assert snapshot() == before, f"{mount}: written by an unchanged reconcile"


# The command `mkf run` runs in the test below: the sample jobs, then it waits while the test
# changes the fleet (a file `go` appears), and exits with the code the test writes there.
PAUSED = (
    "bash scripts/sample-jobs.sh > first-pass.log 2>&1 && touch paused && "
    "until [ -s go ]; do sleep 2; done && exit $(cat go)"
)


def test_ci_fleet_runs_the_jobs_is_changed_in_place_passes_the_exit_code_on_and_leaves_nothing(
    ci_project: tuple[Path, dict[str, str]],
) -> None:
    """`mkf run --base ci` as the workflow runs it. Its command runs the sample jobs, then
    waits while the same fleet is changed in place by `mkf up --name <the run's stack>` to
    `credentials.mode: clusterProfile`: first the plugin mounted as an image volume
    (Kubernetes 1.35+: the official, shell-less plugin image), then as an init container that
    copies it out of an image with a shell (below 1.35, or by choice: one the user builds and
    names; here Kueue's own e2e build, kindnode/images). Each pass's jobs complete through the
    credentials the plugin read, and the profiles' reconciles write nothing. Then the command
    fails: `mkf run` passes its exit code on and still tears the fleet down. One fleet for all
    of it: a two-core host holds about one kind fleet's start-up at a time."""
    project, env = ci_project
    name = f"kt{uuid.uuid4().hex[:6]}"
    out = project / ".fleet"
    log = project / f"{name}.log"
    with log.open("w") as sink:
        child = subprocess.Popen(
            _mkf_run(name, "bash", "-c", PAUSED), cwd=project, env=env, stdout=sink, stderr=sink
        )
        try:
            deadline = time.monotonic() + 2400
            while not (project / "paused").exists():
                assert child.poll() is None, log.read_text()[-6000:]
                assert time.monotonic() < deadline, "the fleet's first pass never ended"
                time.sleep(5)
            first = (project / "first-pass.log").read_text()
            assert "the Job and the JobSet completed on a worker" in first, first[-4000:]
            up = [".venv/bin/mkf", "up", "--base", "cp", "--name", name, "--out", str(out)]
            for mount, plugin_image in (
                ("imageVolume", None),
                ("initContainer", images.KUEUE_E2E_SECRETREADER),
            ):
                _cluster_profile_stack(project, "cp", mount, plugin_image)
                result = run(up, project, env, timeout=2400)
                assert result.returncode == 0, (
                    f"mkf up ({mount}): " + result.stdout[-6000:] + result.stderr[-6000:]
                )
                _dispatches_through(project, env, out, mount, plugin_image)
                _quiet_across_reconciles(out, mount)
        finally:
            # Whatever happened above, the command ends (3: a failure after the jobs) and the
            # run tears the fleet down.
            (project / "go").write_text("3")
            code = child.wait(timeout=1800)
    assert code == 3, log.read_text()[-6000:]
    _nothing_left(project, env, name)
