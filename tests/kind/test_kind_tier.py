"""The default path for real: the dev stack on kind, brought up by the README's own command
(`scripts/up.sh`), pods running, the dispatcher in its pod; then torn down by
`scripts/down.sh`. One fleet serves every test of this module, in order (the outage test
stops and restarts a worker; the last test tears the fleet down and checks what is left).

The node image and the images are stand-ins built here from the same sources at the same
versions (`python -m kindnode build`, kindnode/). Nothing can be pulled on this machine, so
up.sh finds that out itself and builds them (`kindnode build --for-stack dev`), then points
the stack's kind clusters at them through stacks/local/dev.yaml, the stack file untouched.
"""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.resources.program_env import CLOUD_SDKS, cloud_modules, missing_cloud_sdks
from components.upstream import toolchain
from kindnode import clean, docker, images, nodeimage
from tests.helpers.kind_tier import (
    copy_project,
    engine_leftovers,
    fleet_containers,
    kind_clusters,
    kubectl,
    kubectl_json,
    remove_leftover_fleet,
    require_kind_tier,
    run,
    set_stack_keys,
    tool_env,
    wait,
)
from tests.helpers.pulumi_failures import pulumi_failure

FLEET = "mkfkt"  # kind cluster names are global on a Docker host: not the user's `dev`
JOBS = "examples/sample-jobs.yaml"
DISPATCHER = "multikueue-fleet-dispatcher"


class DevFleet:
    def __init__(self, project: Path, env: dict[str, str], up: subprocess.CompletedProcess[str]):
        self.project = project
        self.env = env
        self.up = up
        self.down: subprocess.CompletedProcess[str] | None = None
        self.stack_file = project / "stacks" / "Pulumi.dev.yaml"
        self.stack_text = self.stack_file.read_text()

    def kubeconfig(self, cluster: str) -> Path:
        return self.project / ".fleet" / "kubeconfigs" / f"{cluster}.yaml"

    @property
    def manager(self) -> Path:
        return self.kubeconfig("manager")

    def mkf(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return run(
            [str(self.project / ".venv" / "bin" / "mkf"), *args], self.project, self.env, timeout
        )


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Any:
    require_kind_tier()
    if removed := remove_leftover_fleet(FLEET, "dev"):
        print(f"removed kind clusters an interrupted run of this module left: {removed}")
    project = copy_project(tmp_path_factory.mktemp("kind-tier") / "project")
    # Its own fleet name, so that a contributor's own dev fleet is left alone. The node image
    # and mirror are up.sh's to find: nothing can be pulled here, so it builds them.
    set_stack_keys(project / "stacks" / "Pulumi.dev.yaml", fleetName=FLEET)
    # The tools folder the run's builds filled, as a user's MKF_TOOLS_DIR: up.sh still finds
    # the node image missing and runs `kindnode build`, which finds every binary built (in a
    # folder of the copy's own it would link all 24 again: 80 s of CPU on this host).
    env = {**tool_env(project), "MKF_TOOLS_DIR": str(toolchain.BIN_DIR)}
    text = (project / "stacks" / "Pulumi.dev.yaml").read_text()
    up = run(["bash", "scripts/up.sh"], project, env, timeout=2700)
    dev = DevFleet(project, env, up)
    dev.stack_text = text
    yield dev
    if dev.down is None:
        run(["bash", "scripts/down.sh"], project, env, timeout=1200)


def _condition(obj: dict[str, Any], kind: str) -> str | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return condition.get("status")
    return None


def test_up_brings_every_link_and_controller_up(fleet: DevFleet) -> None:
    assert fleet.up.returncode == 0, fleet.up.stdout[-6000:] + fleet.up.stderr[-6000:]
    assert "The fleet is up" in fleet.up.stdout
    # No image could be pulled: up.sh built them and wrote this host's settings, not the stack.
    assert "python -m kindnode build" in fleet.up.stdout, fleet.up.stdout[-3000:]
    local = yaml.safe_load((fleet.project / "stacks" / "local" / "dev.yaml").read_text())
    assert local["kind"]["nodeImage"].startswith("127.0.0.1:"), local
    # The dispatcher image was built FROM the stand-in base, by the BASE build argument.
    assert local["dispatcher"]["baseImage"] == images.stand_in(images.PYTHON), local
    # The host's Docker holds the stand-ins under the project's names only: no published
    # name (python:3.11-slim-bookworm, busybox:1.36, registry.k8s.io/...) is a build's.
    taken = [n for n in clean.published_names() if docker.image_label(n, docker.STAND_IN_LABEL)]
    assert taken == [], taken
    assert all(docker.image_exists(n) for n in (images.DEBIAN, nodeimage.NODE_IMAGE_LOCAL))
    # Pulumi's environment has no cloud SDK (their plugins would be fetched for a kind
    # stack), and `stack init` kept the committed salt: the stack file is as it was.
    assert missing_cloud_sdks(fleet.project, CLOUD_SDKS) == cloud_modules(CLOUD_SDKS)
    assert fleet.stack_file.read_text() == fleet.stack_text
    clusters = kubectl_json(fleet.manager, "get", "multikueueclusters")["items"]
    assert sorted(c["metadata"]["name"] for c in clusters) == ["worker1", "worker2"]
    wait(
        lambda: all(
            _condition(c, "Active") == "True"
            for c in kubectl_json(fleet.manager, "get", "multikueueclusters")["items"]
        ),
        "every MultiKueueCluster Active",
        timeout=300,
    )
    for cluster in ("manager", "worker1", "worker2"):
        for namespace, deployment in (
            ("kueue-system", "kueue-controller-manager"),
            ("jobset-system", "jobset-controller-manager"),
            ("lws-system", "lws-controller-manager"),
        ):
            obj = kubectl_json(
                fleet.kubeconfig(cluster), "get", "deployment", deployment, "-n", namespace
            )
            assert _condition(obj, "Available") == "True", f"{cluster}: {namespace}/{deployment}"
    dispatcher = kubectl_json(
        fleet.manager, "get", "deployment", DISPATCHER, "-n", "multikueue-fleet-system"
    )
    assert (dispatcher.get("status") or {}).get("readyReplicas", 0) >= 1


def _printed_checks(up_output: str) -> list[str]:
    """The commands up.sh printed to check the fleet with, and its eval line."""
    lines = up_output.splitlines()
    start = lines.index("Then check it with:")
    checks = []
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        checks.append(line.strip())
    (evaluate,) = [line.strip() for line in lines if line.strip().startswith("eval ")]
    return [evaluate, *checks]


def test_what_up_printed_works_from_a_fresh_shell(fleet: DevFleet, tmp_path: Path) -> None:
    """A new terminal: none of the fleet's settings, only the user's own kubectl on PATH.
    The eval line up.sh printed, then every check command it printed, then a pulumi command
    on the stack, as written."""
    own = tmp_path / "bin"
    own.mkdir()
    (own / "kubectl").symlink_to(toolchain.BIN_DIR / "kubectl")
    fresh = {
        k: v
        for k, v in fleet.env.items()
        if k not in ("KUBECONFIG", "PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE")
    }
    fresh["PATH"] = f"{own}:/usr/local/bin:/usr/bin:/bin"
    evaluate, *checks = _printed_checks(fleet.up.stdout)
    assert evaluate == 'eval "$(.venv/bin/mkf env dev)"'
    assert any(c.startswith("kubectl --context ") for c in checks), checks
    for command in [*checks, "pulumi stack ls", "kubectl get multikueueclusters"]:
        result = run(["bash", "-c", f"{evaluate} && {command}"], fleet.project, fresh)
        assert result.returncode == 0, f"{command}: {result.stdout}{result.stderr}"


def _workload_of(manager: Path, kind: str, name: str) -> dict[str, Any] | None:
    for workload in kubectl_json(manager, "get", "workloads", "-n", "default")["items"]:
        owners = workload["metadata"].get("ownerReferences") or []
        if owners and owners[0]["kind"] == kind and owners[0]["name"] == name:
            return workload
    return None


def _nominated_by_dispatcher(manager: Path, workload: str) -> bool:
    events = kubectl_json(
        manager, "get", "events", "-n", "default",
        "--field-selector", f"involvedObject.name={workload},reason=Nominated",
    )["items"]  # fmt: skip
    return any((e.get("source") or {}).get("component") == DISPATCHER for e in events)


def _following(fleet: DevFleet) -> list[list[str]]:
    """The commands of docs/operations.md "Follow a job to the worker that runs it", in the
    order the page gives them."""
    page = (fleet.project / "docs" / "operations.md").read_text()
    section = page.split("### Follow a job to the worker that runs it", 1)[1].split("\n### ", 1)[0]
    blocks = [b.split("```", 1)[0] for b in section.split("```console\n")[1:]]
    return [
        line.removeprefix("$ ").split()
        for block in blocks
        for line in block.splitlines()
        if line.startswith("$ ")
    ]


def test_sample_jobs_run_on_one_worker_through_the_in_cluster_dispatcher(fleet: DevFleet) -> None:
    kubectl(fleet.manager, "apply", "-f", str(fleet.project / JOBS))
    # The page's `mkf logs -f`, started with the submission: it waits for the Job to be
    # admitted and its pod to run, then follows the log on the worker until the pod ends
    # (MultiKueue removes the worker's copy, pods and logs with it, once the Job finishes).
    commands = _following(fleet)
    assert [c[:2] for c in commands] == [["mkf", "logs"], ["mkf", "job"]], commands
    logs = subprocess.Popen(
        [str(fleet.project / ".venv" / "bin" / "mkf"), *commands[0][1:]],
        cwd=fleet.project,
        env=fleet.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    placed = {}
    for kind, name in (
        ("Job", "sample-job"),
        ("JobSet", "sample-jobset"),
        ("LeaderWorkerSet", "sample-lws"),
    ):
        workload = wait(
            lambda kind=kind, name=name: (
                (w := _workload_of(fleet.manager, kind, name))
                and (w.get("status") or {}).get("clusterName")
                and w
            ),
            f"the {kind}'s workload admitted on a worker",
        )
        worker = workload["status"]["clusterName"]
        assert worker in ("worker1", "worker2")
        assert _nominated_by_dispatcher(fleet.manager, workload["metadata"]["name"]), (
            f"{kind} {name} was not nominated by the in-cluster dispatcher"
        )
        placed[kind] = (name, worker)
    resource = {"Job": "jobs", "JobSet": "jobsets", "LeaderWorkerSet": "leaderworkersets"}
    for kind, (name, worker) in placed.items():
        other = "worker2" if worker == "worker1" else "worker1"
        found = kubectl_json(fleet.kubeconfig(worker), "get", resource[kind], "-n", "default")
        assert name in [o["metadata"]["name"] for o in found["items"]], f"{kind} on {worker}"
        elsewhere = kubectl_json(fleet.kubeconfig(other), "get", resource[kind], "-n", "default")
        assert name not in [o["metadata"]["name"] for o in elsewhere["items"]], f"{kind} on {other}"
    wait(
        lambda: (
            _condition(
                kubectl_json(fleet.manager, "get", "job", "sample-job", "-n", "default"), "Complete"
            )
            == "True"
        ),
        "the manager's Job to report Complete (mirrored from the worker)",
    )
    wait(
        lambda: (
            (
                kubectl_json(fleet.manager, "get", "jobset", "sample-jobset", "-n", "default").get(
                    "status"
                )
                or {}
            ).get("terminalState")
            == "Completed"
        ),
        "the manager's JobSet to report Completed",
    )
    out, err = logs.communicate(timeout=300)
    assert logs.returncode == 0, err
    assert out == "hello from a worker\n", (out, err)
    # Where it ran, from the host: its worker, and both sides' events in time order.
    name, worker = placed["Job"]
    shown = fleet.mkf(*commands[1][1:])
    assert shown.returncode == 0, shown.stderr
    assert "Workload job-sample-job-" in shown.stdout and "Finished (Succeeded)" in shown.stdout
    assert f"admitted on: {worker}" in shown.stdout
    trail = json.loads(fleet.mkf(*commands[1][1:], "-o", "json").stdout)
    (wl,) = trail["workloads"]
    assert (wl["admitted_on"], trail["finished"]) == (worker, True)
    assert {e["cluster"] for e in trail["events"]} >= {"manager", worker}, trail["events"]
    assert [e["at"] for e in trail["events"]] == sorted(e["at"] for e in trail["events"])
    assert any(e["reason"] == "Nominated" and e["cluster"] == "manager" for e in trail["events"])
    name, worker = placed["LeaderWorkerSet"]

    def group_running() -> bool:
        pods = kubectl_json(
            fleet.kubeconfig(worker), "get", "pods", "-n", "default",
            "-l", f"leaderworkerset.sigs.k8s.io/name={name}",
        )["items"]  # fmt: skip
        return len(pods) == 2 and all(p["status"].get("phase") == "Running" for p in pods)

    wait(group_running, "the LeaderWorkerSet's leader and worker pods running on its worker")
    # A job that runs: its pods on the worker, as `mkf job` finds them from the host.
    running = json.loads(fleet.mkf("job", f"default/{name}", "-o", "json").stdout)
    pods = [p for w in running["workloads"] for side in w["workers"] for p in side["pods"]]
    assert {side["cluster"] for w in running["workloads"] for side in w["workers"]} == {worker}
    assert len(pods) == 2 and {p["phase"] for p in pods} == {"Running"}, running


TOO_BIG = """apiVersion: batch/v1
kind: Job
metadata:
  name: too-big
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: user-queue
spec:
  suspend: true
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: main
          image: busybox:1.36
          command: ["sleep", "1"]
          resources:
            requests: {cpu: "5", memory: 64Mi}
"""


def _explain_pending_too_big(fleet: DevFleet, name: str) -> str:
    """Submits a Job no worker can hold (5 CPUs: the manager's quota, the workers' sum, admits
    it; no worker's 4 does), so it stays pending and explain weighs every worker; returns what
    explain printed from the host."""
    kubectl(
        fleet.manager, "apply", "-f", "-", stdin=TOO_BIG.replace("name: too-big", f"name: {name}")
    )
    try:
        wait(
            lambda: (
                (w := _workload_of(fleet.manager, "Job", name))
                and _condition(w, "QuotaReserved") == "True"
            ),
            f"the {name} Job's quota reserved on the manager",
        )
        explained = fleet.mkf(
            "controller", "--kubeconfig", str(fleet.manager), "explain", f"default/{name}"
        )
        assert explained.returncode == 0, explained.stdout + explained.stderr
        return explained.stdout
    finally:
        kubectl(fleet.manager, "delete", "job", name, "-n", "default", "--wait=false")


def _assert_every_worker_weighed(text: str) -> None:
    assert "worker1" in text and "worker2" in text, text
    # The reader kubeconfigs name <cluster>-control-plane, which resolves only on the kind
    # network: from the host, the from-host context reaches each worker.
    for unreachable in ("cannot use its kubeconfig", "no reader Secret", "cannot reach"):
        assert unreachable not in text, text


def test_status_and_explain_from_the_host_tell_the_truth(fleet: DevFleet) -> None:
    status = fleet.mkf("status", "--wait", "120")
    assert status.returncode == 0, status.stdout + status.stderr
    _assert_every_worker_weighed(_explain_pending_too_big(fleet, "too-big"))


def test_the_stream_finishes_through_ours_and_all_at_once(fleet: DevFleet) -> None:
    """The real-fleet comparison's small version (BENCHMARKS.md section 5) on this fleet:
    one minute of the comparison's stream through our dispatcher and through Kueue's
    AllAtOnce (bench/fleet_compare.py --check). Every job finishes, no admission is lost,
    nothing is left pending; ours makes about one copy per workload, AllAtOnce one per worker;
    and the fleet is put back to the stack's dispatcher. The stream is sized to one core per
    worker: the dev stack's quota (4) is more than a kind node on this host holds."""
    runs = fleet.project / "runs.csv"
    compared = run(
        [".venv/bin/python", "bench/fleet_compare.py", "--fleet", ".fleet",
         "--dispatchers", "policy,AllAtOnce", "--seeds", "1", "--minutes", "1",
         "--worker-cores", "1",
         "--check", "--csv", str(runs)],
        fleet.project, fleet.env, timeout=2400,
    )  # fmt: skip
    assert compared.returncode == 0, compared.stdout[-6000:] + compared.stderr[-6000:]
    rows = {(r["dispatcher"], r["run"]): r for r in csv.DictReader(runs.read_text().splitlines())}
    for dispatcher in ("policy", "AllAtOnce"):
        real = rows[(dispatcher, "real")]
        assert float(real["unfinished"]) == float(real["lost"]) == float(real["pending"]) == 0
    # Ours nominates one worker per workload; AllAtOnce copies each to both.
    assert float(rows[("policy", "real")]["copies"]) <= 1.3
    assert float(rows[("AllAtOnce", "real")]["copies"]) > 1.5
    assert float(rows[("policy", "real")]["cpu_s"]) > 0
    config = yaml.safe_load(
        kubectl(fleet.manager, "get", "configmap", "kueue-manager-config", "-n", "kueue-system",
                "-o", "jsonpath={.data.controller_manager_config\\.yaml}")
    )  # fmt: skip
    assert config["multiKueue"]["dispatcherName"] == "multikueue-fleet/dispatcher"
    status = fleet.mkf("status", "--wait", "300")
    assert status.returncode == 0, status.stdout + status.stderr


def _node_containers(worker: str) -> list[str]:
    return fleet_containers(f"{FLEET}-{worker}-")


def test_a_stopped_worker_is_skipped_then_used_again(fleet: DevFleet) -> None:
    nodes = _node_containers("worker2")
    assert nodes, "no node containers of worker2"
    subprocess.run(["docker", "stop", *nodes], check=True, capture_output=True, timeout=120)
    try:
        wait(
            lambda: (
                _condition(
                    kubectl_json(fleet.manager, "get", "multikueuecluster", "worker2"), "Active"
                )
                == "False"
            ),
            "MultiKueue to see worker2 gone",
            timeout=300,
        )
        job = (fleet.project / JOBS).read_text().split("---")[0].replace("sample-job", "outage-job")
        kubectl(fleet.manager, "apply", "-f", "-", stdin=job)
        workload = wait(
            lambda: (
                (w := _workload_of(fleet.manager, "Job", "outage-job"))
                and (w.get("status") or {}).get("clusterName")
                and w
            ),
            "the Job submitted during the outage admitted",
        )
        assert workload["status"]["clusterName"] == "worker1"
        # Nothing admitted before the outage was lost: the Job and the JobSet stay finished.
        assert (
            _condition(
                kubectl_json(fleet.manager, "get", "job", "sample-job", "-n", "default"), "Complete"
            )
            == "True"
        )
    finally:
        subprocess.run(["docker", "start", *nodes], check=True, capture_output=True, timeout=120)
    wait(
        lambda: (
            _condition(kubectl_json(fleet.manager, "get", "multikueuecluster", "worker2"), "Active")
            == "True"
        ),
        "worker2 Active again after its restart",
        timeout=600,
    )
    # Back in use: status is green again and the dispatcher weighs worker2 as reachable (the
    # sample workloads already finished wherever they ran, so a pending Job is what shows it).
    status = fleet.mkf("status", "--wait", "300")
    assert status.returncode == 0, status.stdout + status.stderr
    _assert_every_worker_weighed(_explain_pending_too_big(fleet, "too-big-again"))


def _on_every_node(path: str) -> list[bool]:
    """Whether `path` exists on each node container of the fleet."""
    return [
        subprocess.run(["docker", "exec", node, "test", "-e", path], check=False).returncode == 0
        for node in fleet_containers(f"{FLEET}-")
    ]


def _node_file(node: str, path: str) -> str:
    return subprocess.run(
        ["docker", "exec", node, "cat", path], capture_output=True, text=True, check=True
    ).stdout


def _pulumi(fleet: DevFleet, command: str) -> subprocess.CompletedProcess[str]:
    """A pulumi command on the dev stack from a shell set up as the docs say, with a TMPDIR
    of its own: a plain pulumi leaves a kubeconfig there per cluster (pulumi-kubernetes, as
    docs/troubleshooting.md says), which up.sh and down.sh are checked not to."""
    script = f'eval "$(.venv/bin/mkf env dev)" && pulumi {command} --non-interactive'
    tmp = fleet.project.parent / "plain-pulumi-tmp"
    tmp.mkdir(exist_ok=True)
    env = {**fleet.env, "TMPDIR": str(tmp)}
    return run(["bash", "-c", script], fleet.project, env, timeout=1200)


def test_a_mirror_added_then_removed_changes_only_the_mirrors_in_preview_and_up(
    fleet: DevFleet,
) -> None:
    """A registry mirror added to the host's settings with containerd's host options (a
    private CA, a URL whose path is the API's root), then removed: `pulumi preview` shows
    each kind cluster's mirrors updated and nothing replaced (the cluster's Kubernetes
    provider reads nothing that changed), `up` updates those alone, and the registry's
    hosts.toml and CA file appear on every node as containerd reads them, then go from
    every node."""
    local = fleet.project / "stacks" / "local" / "dev.yaml"
    before = local.read_text()
    settings = yaml.safe_load(before)
    # A real CA certificate to name: the cluster's own (what signs the mirror's certificate
    # does not matter here, nothing is pulled through it).
    ca = _node_file(fleet_containers(f"{FLEET}-")[0], "/etc/kubernetes/pki/ca.crt")
    url = "https://mkf-registry.invalid:5443/v2/quay"
    settings["kind"]["registryMirrors"]["quay.io"] = {"url": url, "ca": ca, "overridePath": True}
    hosts = "/etc/containerd/certs.d/quay.io/hosts.toml"
    ca_file = "/etc/containerd/certs.d/quay.io/mirror-ca.crt"
    clusters = 3  # the dev stack's manager and two workers
    try:
        local.write_text(yaml.safe_dump(settings, sort_keys=False))
        preview = _pulumi(fleet, "preview --json")
        assert preview.returncode == 0, pulumi_failure(preview)
        plan = json.loads(preview.stdout)
        changed = [s["urn"] for s in plan["steps"] if s["op"] != "same"]
        assert len(changed) == clusters and all("kind:Mirrors" in u for u in changed), changed
        assert {k for k, n in plan["changeSummary"].items() if n} == {"update", "same"}
        up = _pulumi(fleet, "up --yes --skip-preview")
        assert up.returncode == 0, pulumi_failure(up)
        assert f"~ {clusters} updated" in up.stdout and "replaced" not in up.stdout, up.stdout
        for node in fleet_containers(f"{FLEET}-"):
            assert _node_file(node, hosts) == (
                'server = "https://quay.io"\n\n'
                f'[host."{url}"]\n'
                '  capabilities = ["pull", "resolve"]\n'
                f'  ca = "{ca_file}"\n'
                "  override_path = true\n"
            ), node
            assert _node_file(node, ca_file).strip() == ca.strip(), node
    finally:
        local.write_text(before)
    up = _pulumi(fleet, "up --yes --skip-preview")
    assert up.returncode == 0, pulumi_failure(up)
    assert f"~ {clusters} updated" in up.stdout, up.stdout
    assert not any(_on_every_node(hosts)) and not any(_on_every_node(ca_file))
    assert all(_on_every_node("/etc/containerd/certs.d/docker.io/hosts.toml"))


def test_down_leaves_nothing_of_the_fleet(fleet: DevFleet) -> None:
    volumes_before = set(
        subprocess.run(
            ["docker", "volume", "ls", "-q"], capture_output=True, text=True, check=True
        ).stdout.split()
    )
    fleet.down = run(["bash", "scripts/down.sh"], fleet.project, fleet.env, timeout=1200)
    assert fleet.down.returncode == 0, pulumi_failure(fleet.down)
    assert not fleet_containers(f"{FLEET}-"), "node containers left"
    assert not [c for c in kind_clusters() if c.startswith(f"{FLEET}-")]
    volumes_after = set(
        subprocess.run(
            ["docker", "volume", "ls", "-q"], capture_output=True, text=True, check=True
        ).stdout.split()
    )
    assert volumes_after <= volumes_before, volumes_after - volumes_before
    assert not (fleet.project / ".fleet" / "kubeconfigs").exists(), "kubeconfigs left in .fleet"
    assert not list((fleet.project / ".pulumi-state").rglob("dev.json")), "stack state left"
    kind_files = fleet.project / ".pulumi-state" / "kind" / "dev"
    assert not kind_files.exists() or not list(kind_files.iterdir())
    stacks = json.loads(
        run(["pulumi", "stack", "ls", "--json"], fleet.project, fleet.env).stdout or "[]"
    )
    assert not [s for s in stacks if s["name"] == "dev"]
    assert not engine_leftovers(fleet.project, fleet.env), "the engine's temporary files left"
