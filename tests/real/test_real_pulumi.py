"""The real tier under the real Pulumi engine: the shipped `loopback` stack, deployed by the
pinned `pulumi` CLI, its Python language host and the kubernetes plugin (all built from
tools/pulumi*, tests/real/test_pulumi_engine.py) onto a loopback fleet (kube-apiserver v1.36,
Kueue v0.19.2 as processes, `kueue.install: existing`), in the order a user goes:

- `pulumi preview` lists exactly the objects `render` writes; `up` succeeds; a second `up`
  changes nothing at all;
- the dispatcher runs as the stack says (`dispatcher.run: local`), from the stack's own
  outputs; a Job is nominated, copied by real MultiKueue, admitted on that worker only; a
  worker's API server stopped and started again (tests/real/test_real_dispatch.py's steps);
- a quota change: `preview --diff` shows exactly that change, as `render --diff` does, and
  `up` applies it; a LocalQueue moved to another ClusterQueue is replaced, not failed;
- `destroy` with a Job still admitted finishes within DESTROY_BOUND and leaves none of the
  fleet's objects, namespaces or finalizers behind.

Each step builds on the one before, in file order; a step whose predecessor failed says so.
The project runs in a copy of the checkout's top level (symlinks, and the stack file with the
launcher's kubeconfig paths), so the checkout's own stacks/ and Pulumi state stay untouched.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

import tests.helpers.dispatch_steps as steps
from components.checks.load import load_stack
from components.model.spec import FleetSpec
from components.objects.fleet import cluster_objects
from components.objects.labels import FLEET_NAMESPACE, MANAGED_BY
from components.upstream import toolchain
from controller.model import CORDONED_LABEL
from loopback import fleet as loopback_fleet
from loopback.client import Client
from loopback.dispatcher import LocalDispatcher
from loopback.processes import log_tail
from tests.helpers.monitoring import operator_crds, operator_howto
from tests.helpers.pulumi_failures import pulumi_failure
from tests.helpers.real_fleet import (
    K,
    MultiKueueFleet,
    active_condition,
    binaries,
    pulumi_env,
    real_fetch,
)
from tests.helpers.stack_texts import cli

ROOT = Path(__file__).resolve().parents[2]
STACK = "loopback"
# What a destroy with a Job still admitted may take on a loaded 2-core machine; a quiet one
# takes well under a minute.
DESTROY_BOUND = 240.0
# What `monitoring.prometheusOperator` makes.
MONITORING_KINDS = (
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
    ("v1", "ConfigMap"),
)
# The kinds every cluster is searched for leftovers of, after destroy.
LEFTOVER_KINDS = (
    (f"{K}/v1beta2", "ClusterQueue"),
    (f"{K}/v1beta2", "LocalQueue"),
    (f"{K}/v1beta2", "ResourceFlavor"),
    (f"{K}/v1beta2", "AdmissionCheck"),
    (f"{K}/v1beta2", "MultiKueueConfig"),
    (f"{K}/v1beta2", "MultiKueueCluster"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("v1", "Namespace"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    # In every namespace, the launcher's kueue-system included.
    ("v1", "ServiceAccount"),
    ("v1", "Secret"),
    ("v1", "ConfigMap"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
)


@dataclass
class Project:
    """The project, its `loopback` stack and the fleet it goes onto."""

    folder: Path
    env: dict[str, str]
    fleet: loopback_fleet.Fleet
    failed: list[str] = field(default_factory=list)  # steps that failed, for the next ones

    @property
    def stack_file(self) -> Path:
        return self.folder / "stacks" / f"Pulumi.{STACK}.yaml"

    def spec(self) -> FleetSpec:
        spec, _ = load_stack(str(self.stack_file))
        return spec

    def client(self, cluster: str) -> Client:
        return Client(self.fleet.kubeconfig(cluster))

    def pulumi(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(toolchain.path_of("pulumi")), *args, "--stack", STACK, "--non-interactive"],
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def ok(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        done = self.pulumi(*args, timeout=timeout)
        assert done.returncode == 0, f"pulumi {' '.join(args)}: {pulumi_failure(done)}"
        return done

    def preview(self) -> list[dict[str, Any]]:
        """The steps of `pulumi preview --diff --json`, other than the ones that keep a
        resource the same."""
        done = self.ok("preview", "--diff", "--json")
        return [s for s in json.loads(done.stdout).get("steps") or [] if s["op"] != "same"]

    def edit(self, change: Callable[[dict[str, Any]], None]) -> Path:
        """Changes the stack file as a user would; returns a copy of the file before."""
        # Same file name (the stack's name comes from it), in a folder of its own.
        before = self.folder / f"before-{time.monotonic_ns()}" / self.stack_file.name
        before.parent.mkdir()
        text = self.stack_file.read_text()
        before.write_text(text)
        document = yaml.safe_load(text)
        change(document["config"])
        self.stack_file.write_text(yaml.safe_dump(document, sort_keys=False))
        return before

    def step(self, needs: str) -> None:
        if needs in self.failed:
            pytest.fail(f"needs the step {needs!r}, which failed")


def _project_folder(folder: Path, fleet: loopback_fleet.Fleet) -> None:
    """The checkout's top level as Pulumi needs it, its environment the tests' own (which
    has requirements.txt), and the stack file pointing at the launcher's kubeconfigs."""
    folder.mkdir()
    names = ("__main__.py", "components", "controller", "monitoring", "requirements.txt")
    for name in (*names, "Pulumi.yaml"):
        (folder / name).symlink_to(ROOT / name)
    # Pulumi.yaml's virtualenv: .venv, here the environment these tests run in.
    (folder / ".venv").symlink_to(Path(sys.prefix))
    (folder / "stacks").mkdir()
    document = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{STACK}.yaml").read_text())
    # The committed salt opens with the dev passphrase; these tests bring their own.
    document.pop("encryptionsalt", None)
    config = document["config"]
    for cluster in [config["multikueue-fleet:manager"], *config["multikueue-fleet:workers"]]:
        cluster["existing"]["kubeconfigPath"] = str(fleet.kubeconfig(cluster["name"]))
    (folder / "stacks" / f"Pulumi.{STACK}.yaml").write_text(
        yaml.safe_dump(document, sort_keys=False)
    )


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    binaries()
    toolchain.build(list(toolchain.PULUMI_ENGINE), log=lambda _line: None)
    tmp = tmp_path_factory.mktemp("real-pulumi")
    fleet = loopback_fleet.up(
        str(ROOT / "stacks" / f"Pulumi.{STACK}.yaml"),
        tmp / "fleet",
        log=lambda _line: None,
        fetch=real_fetch,
    )
    try:
        _project_folder(tmp / "project", fleet)
        env = pulumi_env(tmp, "loopback")
        project = Project(tmp / "project", env, fleet)
        project.ok("stack", "init")  # --stack loopback
        yield project
    finally:
        # Every process's log kept beside the test's other files (down removes the state).
        for log in fleet.state.glob("*/*.log"):
            kept = tmp / "logs" / log.parent.name / log.name
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_bytes(log.read_bytes())
        loopback_fleet.down(fleet.state, log=lambda _line: None)


def _rendered(spec: FleetSpec) -> Counter[tuple[str, str]]:
    """(kind, name) of every object `render` writes, over every cluster."""
    return Counter(
        (o["kind"], o["metadata"]["name"])
        for cluster in spec.clusters
        for o in cluster_objects(spec, cluster).objects
    )


def _kind_and_name(step: dict[str, Any]) -> tuple[str, str] | None:
    """A Kubernetes object's (kind, name) from a preview step; None for any other resource
    (components, the token readers, the check that Kueue is served)."""
    state = step.get("newState") or step.get("oldState") or {}
    typ = state.get("type", "")
    if not typ.startswith("kubernetes:") or typ.startswith("kubernetes:yaml"):
        return None
    inputs = state.get("inputs") or {}
    return typ.rsplit(":", 1)[1].removesuffix("Patch"), inputs.get("metadata", {}).get("name")


def test_preview_lists_the_objects_render_writes(project: Project) -> None:
    try:
        planned = project.preview()
        assert {s["op"] for s in planned} == {"create"}, Counter(s["op"] for s in planned)
        listed = Counter(k for s in planned if (k := _kind_and_name(s)))
        assert listed == _rendered(project.spec()), (
            f"only in the preview: {listed - _rendered(project.spec())}; "
            f"only rendered: {_rendered(project.spec()) - listed}"
        )
        # Kueue is the launcher's and the dispatcher runs locally: no Deployment at all.
        assert not [k for k in listed if k[0] == "Deployment"]
    except BaseException:
        project.failed.append("preview")
        raise


def test_up_then_a_second_up_changes_nothing(project: Project) -> None:
    try:
        project.ok("up", "--yes", "--skip-preview")
        # --expect-no-changes: the CLI fails the update if anything would change.
        project.ok("up", "--yes", "--expect-no-changes")
        assert project.preview() == [], "a preview after two ups still plans changes"
        manager = project.client("manager")
        deadline = time.monotonic() + 120
        for worker in ("worker1", "worker2"):
            while (active_condition(manager, worker) or {}).get("status") != "True":
                assert time.monotonic() < deadline, (
                    f"MultiKueueCluster {worker}: {active_condition(manager, worker)}; "
                    f"manager Kueue log: {log_tail(project.fleet.state / 'manager' / 'kueue.log')}"
                )
                time.sleep(1)
    except BaseException:
        project.failed.append("up")
        raise


@pytest.fixture(scope="module")
def dispatching(project: Project) -> Iterator[steps.Dispatching]:
    """The dispatcher run from the stack's outputs, as docs/dispatcher.md tells a user."""
    project.step("up")
    settings = project.ok("stack", "output", "dispatcherSettings").stdout
    kubeconfig = project.ok("stack", "output", "--show-secrets", "dispatcherKubeconfig").stdout
    spec = project.spec()
    local = LocalDispatcher(project.fleet.state / "manager")
    local.prepare_with(settings, kubeconfig)
    project.fleet.record_process("manager", local.start())
    manager = project.client("manager")
    fleet = MultiKueueFleet(
        project.fleet,
        spec,
        manager,
        {w.name: project.client(w.name) for w in spec.workers},
        (),
        {},
    )
    nominations = steps.NominationLog(manager)
    try:
        local.wait_ready(120)
        yield steps.Dispatching(fleet, local, nominations)
    finally:
        nominations.stop()
        local.stop()


def test_the_dispatcher_from_the_stacks_outputs_sends_a_job_through_multikueue(
    dispatching: steps.Dispatching,
) -> None:
    steps.a_job_is_nominated_and_admitted_on_that_worker_only(dispatching)


def test_a_worker_stopped_is_left_out_and_used_again_once_back(
    dispatching: steps.Dispatching,
) -> None:
    steps.a_stopped_worker_is_left_out_loses_nothing_and_is_used_again(dispatching)


def _updated(planned: list[dict[str, Any]]) -> Counter[tuple[str, str, str]]:
    return Counter((s["op"], *k) for s in planned if (k := _kind_and_name(s)))


def _render_diff(before: Path, after: Path) -> dict[str, Any]:
    """`render --diff -o json --exit-code` of two versions of the stack file, which differ."""
    rendered = subprocess.run(
        [
            *(sys.executable, "-m", "components", "render", "--diff"),
            *("--old", str(before), "--new", str(after), "-o", "json", "--exit-code"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert rendered.returncode == 1, rendered.stderr  # 1: differs
    return json.loads(rendered.stdout)


def test_a_quota_change_is_previewed_as_render_diff_shows_it_then_applied(
    project: Project,
) -> None:
    project.step("up")

    def more_cpu(config: dict[str, Any]) -> None:
        queue = config["multikueue-fleet:queues"]["clusterQueues"][0]
        queue["resourceGroups"][0]["flavors"][0]["resources"]["cpu"] = 6

    before = project.edit(more_cpu)
    planned = project.preview()
    clusters = len(project.spec().clusters)
    assert _updated(planned) == Counter({("update", "ClusterQueue", "cluster-queue"): clusters})
    for s in planned:
        # The provider's own diff, property by property: the quota, nothing else.
        detailed = set(s.get("detailedDiff") or {})
        assert detailed and all(path.endswith("nominalQuota") for path in detailed), s
    diff = _render_diff(before, project.stack_file)
    shown = Counter((o["change"], o["key"]) for c in diff["clusters"] for o in c["objects"])
    assert shown == Counter({("changed", "ClusterQueue cluster-queue"): clusters}), diff
    # The cpu quota, and nothing else: 4 to 6 on each worker, their sum on the manager.
    for c in diff["clusters"]:
        (o,) = c["objects"]
        changed = [
            line for line in o["diff"].splitlines() if line[:1] in "+-" and line[:3] != "+++"
        ]
        changed = [line for line in changed if not line.startswith("---")]
        expected = ("'8'", "'12'") if c["cluster"] == "manager" else ("'4'", "'6'")
        assert changed == [
            f"-        nominalQuota: {expected[0]}",
            f"+        nominalQuota: {expected[1]}",
        ], o

    project.ok("up", "--yes", "--skip-preview")
    for cluster in project.spec().clusters:
        queue = project.client(cluster.name).get(f"{K}/v1beta2", "ClusterQueue", "cluster-queue")
        cpu = queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
        quota = "12" if cluster.role == "manager" else "6"
        assert (cpu["name"], str(cpu["nominalQuota"])) == ("cpu", quota), (cluster.name, queue)


def test_a_local_queue_moved_to_another_cluster_queue_is_replaced(project: Project) -> None:
    project.step("up")

    def move(config: dict[str, Any]) -> None:
        for queue in config["multikueue-fleet:queues"]["localQueues"]:
            if queue["namespace"] == "team-a":
                queue["clusterQueue"] = "batch-queue"

    project.edit(move)
    planned = project.preview()
    ops = Counter(s["op"] for s in planned if (_kind_and_name(s) or ("",))[0] == "LocalQueue")
    # spec.clusterQueue is immutable (Kueue v0.19.2 apis/kueue/v1beta2/localqueue_types.go:35,
    # CEL self == oldSelf; there is no LocalQueue webhook):
    # a replacement, deleted before the new one is made (the name stays).
    assert ops and set(ops) <= {"replace", "create-replacement", "delete-replaced"}, planned
    project.ok("up", "--yes", "--skip-preview")
    for cluster in project.spec().clusters:
        queue = project.client(cluster.name).get(
            f"{K}/v1beta2", "LocalQueue", "user-queue", "team-a"
        )
        assert queue and queue["spec"]["clusterQueue"] == "batch-queue", (cluster.name, queue)


def _monitoring_objects(project: Project) -> dict[str, list[str]]:
    """Per cluster, the monitoring objects the stack made (the fleet's label on them; of the
    ConfigMaps, the dashboard's)."""
    found: dict[str, list[str]] = {}
    for cluster in project.fleet.clusters:
        client = project.client(cluster)
        for api_version, kind in MONITORING_KINDS:
            for obj in client.list(api_version, kind):
                meta = obj["metadata"]
                labels = meta.get("labels") or {}
                if kind == "ConfigMap" and "grafana_dashboard" not in labels:
                    continue
                if labels.get(MANAGED_BY) == "multikueue-fleet":
                    found.setdefault(cluster, []).append(f"{kind} {meta['name']}")
    return {cluster: sorted(names) for cluster, names in found.items()}


def test_monitoring_goes_where_the_operators_api_is_and_says_where_it_is_not(
    project: Project,
) -> None:
    """`monitoring.prometheusOperator` on a fleet where only the manager serves the Prometheus
    Operator's CRDs: `up` stops naming each worker and what to do. With the CRDs on every
    cluster, the real API server takes every object against the operator's own schemas,
    labelled for the cluster it is on; turned off, they go and the operator's CRDs (not the
    stack's) stay."""
    project.step("up")
    crds = operator_crds()
    manager = project.client("manager")
    for crd in crds:
        manager.apply(crd)
        manager.wait_established(crd["metadata"]["name"])

    # As docs/operations.md shows it, and the line it says a cluster without the CRDs gets.
    setting, said_by_docs = operator_howto()

    def on(config: dict[str, Any]) -> None:
        config["multikueue-fleet:monitoring"] = setting

    project.edit(on)
    refused = project.pulumi("up", "--yes", "--skip-preview")
    assert refused.returncode != 0, refused.stdout[-3000:]
    said = refused.stdout + refused.stderr
    for worker in ("worker1", "worker2"):
        line = said_by_docs.replace("'worker1'", f"'{worker}'")
        assert line in said, said[-3000:]
    assert "cluster 'manager'" not in said, said[-3000:]

    for worker in ("worker1", "worker2"):
        client = project.client(worker)
        for crd in crds:
            client.apply(crd)
            client.wait_established(crd["metadata"]["name"])
    project.ok("up", "--yes", "--skip-preview")
    assert _monitoring_objects(project) == {
        "manager": [
            "ConfigMap multikueue-fleet-dashboard",
            "PrometheusRule multikueue-fleet",
            "ServiceMonitor kueue-metrics",
        ],
        "worker1": ["ServiceMonitor kueue-metrics"],
        "worker2": ["ServiceMonitor kueue-metrics"],
    }
    for cluster in project.fleet.clusters:
        monitor = project.client(cluster).get(
            "monitoring.coreos.com/v1", "ServiceMonitor", "kueue-metrics", "kueue-system"
        )
        assert monitor is not None
        assert monitor["metadata"]["labels"].items() >= setting["labels"].items()
        (endpoint,) = monitor["spec"]["endpoints"]
        assert endpoint["relabelings"][0]["replacement"] == cluster, monitor
    rule = manager.get(
        "monitoring.coreos.com/v1", "PrometheusRule", "multikueue-fleet", FLEET_NAMESPACE
    )
    assert rule is not None and rule["spec"] == yaml.safe_load(
        (ROOT / "monitoring" / "alerts.yaml").read_text()
    )
    project.ok("up", "--yes", "--expect-no-changes")

    def off(config: dict[str, Any]) -> None:
        config.pop("multikueue-fleet:monitoring")

    project.edit(off)
    project.ok("up", "--yes", "--skip-preview")
    assert _monitoring_objects(project) == {}
    for cluster in project.fleet.clusters:
        for crd in crds:
            assert project.client(cluster).get(
                "apiextensions.k8s.io/v1", "CustomResourceDefinition", crd["metadata"]["name"]
            ), f"{cluster}: the operator's CRD {crd['metadata']['name']} went with the stack"


def _multikueue_token(project: Project, worker: str) -> str:
    """The token in the manager's kubeconfig Secret for `worker` (what MultiKueue uses)."""
    secret = project.client("manager").get("v1", "Secret", f"{worker}-kubeconfig", "kueue-system")
    assert secret, f"no kubeconfig Secret for {worker} on the manager"
    text = base64.b64decode(secret["data"]["kubeconfig"]).decode()
    (user,) = yaml.safe_load(text)["users"]
    return str(user["user"]["token"])


def _authenticates(project: Project, worker: str, token: str) -> bool:
    """Whether the worker's API server accepts `token` (401 when it was revoked)."""
    import kubernetes

    config = yaml.safe_load(project.fleet.kubeconfig(worker).read_text())
    for user in config["users"]:
        user["user"] = {"token": token}
    api = kubernetes.config.new_client_from_config_dict(config)
    try:
        kubernetes.client.VersionApi(api).get_code()
        return True
    except kubernetes.client.ApiException as exc:
        assert exc.status == 401, exc
        return False
    finally:
        api.close()


def test_a_worker_token_rotated_as_the_day2_how_to_says(project: Project) -> None:
    """docs/operations.md, "Rotate a worker's credentials": the ServiceAccount's URN found
    with the documented command, `pulumi up --replace` of it: the old token is refused, the
    manager's kubeconfig Secret carries the new one (the token Secret follows its
    ServiceAccount, the Token its Secret: replaceWith), and MultiKueue reaches the worker
    again with it. Replacing the Secret alone would not do: the same Secret made again
    carries the very same token (the real engine showed it: LegacyClaims hold the
    ServiceAccount's UID, not the Secret's)."""
    project.step("up")
    old = _multikueue_token(project, "worker1")
    assert _authenticates(project, "worker1", old)
    listed = project.ok("stack", "--show-urns").stdout
    pattern = "ServiceAccount::worker1:ServiceAccount:kueue-system/multikueue"  # as documented
    (urn,) = [w for line in listed.splitlines() for w in line.split() if w.endswith(pattern)]
    rotated = project.ok("up", "--yes", "--skip-preview", "--replace", urn)
    new = _multikueue_token(project, "worker1")
    assert new != old, f"the manager still holds the old token:\n{rotated.stdout[-6000:]}"
    # kube-apiserver keeps a token it accepted for 10 s (--authentication-token-cache
    # success TTL, k8s.io/kubernetes v1.36.4 pkg/kubeapiserver/options/authentication.go).
    deadline = time.monotonic() + 30
    while _authenticates(project, "worker1", old):
        assert time.monotonic() < deadline, "the old token still works after 30 s"
        time.sleep(1)
    assert _authenticates(project, "worker1", new)
    # Kueue reloads a MultiKueueCluster's client when its Secret changes (v0.19.2
    # pkg/controller/admissionchecks/multikueue/multikueuecluster.go, secretHandler).
    manager = project.client("manager")
    deadline = time.monotonic() + 180
    while (active_condition(manager, "worker1") or {}).get("status") != "True":
        assert time.monotonic() < deadline, active_condition(manager, "worker1")
        time.sleep(1)
    project.ok("up", "--yes", "--expect-no-changes")


def test_a_worker_removed_as_the_day2_how_to_says(project: Project) -> None:
    """docs/operations.md, "Remove a worker": `mkf cordon` and applied (the label on its
    MultiKueueCluster, nothing else changed), nothing left on it, then removed from `workers`
    and applied: the manager's MultiKueue config and cluster drop it, its objects go, the
    manager's total follows."""
    project.step("up")
    names = [cq.name for cq in project.spec().queues.cluster_queues]
    cordoned = cli("cordon", "worker2", "--stack", str(project.stack_file), cwd=project.folder)
    assert cordoned.returncode == 0, cordoned.stderr
    assert "next: `pulumi up --stack loopback` applies it" in cordoned.stdout
    assert _updated(project.preview()) == Counter({("update", "MultiKueueCluster", "worker2"): 1})
    project.ok("up", "--yes", "--skip-preview")
    manager = project.client("manager")
    mkc = manager.get(f"{K}/v1beta2", "MultiKueueCluster", "worker2")
    assert (mkc or {}).get("metadata", {}).get("labels", {}).get(CORDONED_LABEL) == "true", mkc
    on_worker2 = [
        w["metadata"]["name"]
        for w in manager.list(f"{K}/v1beta2", "Workload")
        if (w.get("status") or {}).get("clusterName") == "worker2"
    ]
    assert on_worker2 == [], f"work still runs on worker2: {on_worker2}"

    def remove(config: dict[str, Any]) -> None:
        workers = config["multikueue-fleet:workers"]
        config["multikueue-fleet:workers"] = [w for w in workers if w["name"] != "worker2"]

    project.edit(remove)
    project.ok("up", "--yes", "--skip-preview")
    (mk_config,) = manager.list(f"{K}/v1beta2", "MultiKueueConfig")
    assert mk_config["spec"]["clusters"] == ["worker1"]
    assert manager.get(f"{K}/v1beta2", "MultiKueueCluster", "worker2") is None
    for name in names:
        assert project.client("worker2").get(f"{K}/v1beta2", "ClusterQueue", name) is None
        worker1 = project.client("worker1").get(f"{K}/v1beta2", "ClusterQueue", name)
        total = manager.get(f"{K}/v1beta2", "ClusterQueue", name)
        assert total is not None and worker1 is not None
        assert total["spec"]["resourceGroups"] == worker1["spec"]["resourceGroups"], name
    project.ok("up", "--yes", "--expect-no-changes")


def test_a_worker_added_as_the_day2_how_to_says(project: Project) -> None:
    """docs/operations.md, "Add a worker": worker2 (the test before removed it) added back
    under `workers`: `render --diff` shows its capacity rows `new` and the manager's total
    growing, its objects added, on the manager its MultiKueueCluster added and the
    MultiKueueConfig changed; `up` makes the new MultiKueueCluster Active, and a second `up`
    changes nothing."""
    project.step("up")
    shipped = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{STACK}.yaml").read_text())
    (entry,) = [w for w in shipped["config"]["multikueue-fleet:workers"] if w["name"] == "worker2"]
    entry["existing"]["kubeconfigPath"] = str(project.fleet.kubeconfig("worker2"))

    def without(config: dict[str, Any]) -> None:
        workers = config["multikueue-fleet:workers"]
        config["multikueue-fleet:workers"] = [w for w in workers if w["name"] != "worker2"]

    if any(c.name == "worker2" for c in project.spec().workers):  # run alone: remove it first
        project.edit(without)
        project.ok("up", "--yes", "--skip-preview")
    before = project.edit(lambda config: config["multikueue-fleet:workers"].append(entry))
    diff = _render_diff(before, project.stack_file)
    rows = diff["capacity"]
    assert {r["change"] for r in rows if r["cluster"] == "worker2"} == {"new"}, rows
    assert all(r["after"] != r["before"] for r in rows if r["cluster"] == "manager"), rows
    changes = {
        c["cluster"]: Counter((o["change"], o["key"].split()[0]) for o in c["objects"])
        for c in diff["clusters"]
    }
    (worker2,) = [name for name in changes if name.endswith("worker2")]
    assert {change for change, _ in changes[worker2]} == {"added"}, changes
    assert changes["manager"][("added", "MultiKueueCluster")] == 1, changes
    assert changes["manager"][("changed", "MultiKueueConfig")] == 1, changes
    project.ok("up", "--yes", "--skip-preview")
    manager = project.client("manager")
    (mk_config,) = manager.list(f"{K}/v1beta2", "MultiKueueConfig")
    assert sorted(mk_config["spec"]["clusters"]) == ["worker1", "worker2"]
    # Kueue on the manager picks the new cluster up as it runs (nothing is restarted).
    deadline = time.monotonic() + 180
    while (active_condition(manager, "worker2") or {}).get("status") != "True":
        assert time.monotonic() < deadline, active_condition(manager, "worker2")
        time.sleep(1)
    project.ok("up", "--yes", "--expect-no-changes")


def _leftovers(project: Project) -> list[str]:
    found = []
    for cluster in project.fleet.clusters:
        client = project.client(cluster)
        for api_version, kind in LEFTOVER_KINDS:
            for obj in client.list(api_version, kind):
                meta = obj["metadata"]
                if (meta.get("labels") or {}).get(MANAGED_BY) == "multikueue-fleet" or (
                    meta.get("name") == FLEET_NAMESPACE
                ):
                    found.append(f"{cluster}: {kind} {meta['name']} {meta.get('finalizers', '')}")
    return found


def test_destroy_with_a_job_still_admitted_leaves_nothing_behind(
    dispatching: steps.Dispatching, project: Project
) -> None:
    d = dispatching
    d.submit(steps.batch_job("still-running", "1"))
    workload = d.workload_of("Job", "still-running")["metadata"]["name"]
    cluster = d.admitted_where(workload)
    began = time.monotonic()
    project.ok("destroy", "--yes", "--skip-preview", timeout=DESTROY_BOUND + 60)
    took = time.monotonic() - began
    assert took < DESTROY_BOUND, f"destroy took {took:.0f} s"
    assert not _leftovers(project), _leftovers(project)
    # The user's Job is theirs: still there, on the manager, with its queue label.
    job = d.manager.get("batch/v1", "Job", "still-running", steps.NAMESPACE)
    assert job is not None, f"destroy deleted the user's Job (it ran on {cluster})"
    # A team namespace on an existing cluster is patched, never owned (the stack cannot
    # tell what else lives there): still there.
    assert project.client("manager").get("v1", "Namespace", "team-a") is not None
