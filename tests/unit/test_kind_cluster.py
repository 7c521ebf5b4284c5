"""The kind dynamic provider (components/resources/clusters.py) with kind faked: the stack's own
kubeconfig file on every kind command, `read` seeing a cluster deleted out of band, adopting
an interrupted create of the same stack (the file kind wrote for it holds its CA) and
refusing anyone else's cluster, a same-named stack's of another checkout included; and the provider
unpickled in a fresh interpreter from the project directory, as Pulumi's provider host does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi.dynamic.dynamic import serialize_provider

from components.objects.kind_config import CONTAINERD_MIRRORS_PATCH, OWNER_LABEL
from components.resources import clusters, kind_creates
from components.resources.clusters import KindClusterProvider, KindMirrorsProvider
from components.resources.providers import CommandFailed

ROOT = Path(__file__).resolve().parents[2]
KUBECONFIG = (
    "apiVersion: v1\nkind: Config\n"
    "clusters: [{name: kind-dev-w1, cluster: {certificate-authority-data: Q0EtMQ==}}]\n"
)


class FakeKind:
    """Stands in for subprocess.run: `kind get clusters` lists `existing`."""

    def __init__(self, existing: set[str]) -> None:
        self.existing = existing
        self.calls: list[list[str]] = []
        self.timeouts: dict[str, float | None] = {}

    def __call__(self, args: list[str], input: str | None = None, **kw: Any) -> Any:
        self.calls.append(list(args))
        self.timeouts[" ".join(args[1:3])] = kw.get("timeout")
        out = ""
        if args[1:3] == ["get", "clusters"]:
            out = "\n".join(sorted(self.existing))
        elif args[1:3] == ["get", "kubeconfig"]:
            out = KUBECONFIG
        elif args[1:3] == ["get", "nodes"]:
            out = f"{args[args.index('--name') + 1]}-control-plane\n"
        elif args[1:3] == ["create", "cluster"]:
            self.existing.add(args[args.index("--name") + 1])
        elif args[1:3] == ["delete", "cluster"]:
            self.existing.discard(args[args.index("--name") + 1])
        return subprocess.CompletedProcess(args, 0, out, "")


@pytest.fixture(autouse=True)
def quick_settle(monkeypatch: pytest.MonkeyPatch) -> None:
    """A teardown's looks for late nodes, without their pauses."""
    monkeypatch.setattr(kind_creates, "SETTLE_PAUSE", 0.0)
    monkeypatch.setattr(kind_creates, "SETTLE_LIMIT", 0.5)


@pytest.fixture
def kind(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    def install(*existing: str, owner: str | None = "") -> FakeKind:
        fake = FakeKind(set(existing))
        monkeypatch.setattr(subprocess, "run", fake)
        monkeypatch.setattr(clusters, "node_owner", lambda _kind, _name: owner)
        return fake

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return install


def props(tmp_path: Path) -> dict[str, Any]:
    return {
        "name": "dev-w1",
        "config": "kind: Cluster\n",
        "kind_binary": "kind",
        "owner": "multikueue-fleet.dev",
        "kubeconfig_path": str(tmp_path / "state" / "kind" / "dev" / "dev-w1.kubeconfig"),
    }


def test_every_kind_write_uses_the_stacks_own_kubeconfig(kind: Any, tmp_path: Path) -> None:
    fake = kind()
    p = props(tmp_path)
    result = KindClusterProvider().create(dict(p))
    create = next(c for c in fake.calls if c[1:3] == ["create", "cluster"])
    assert create[create.index("--kubeconfig") + 1] == p["kubeconfig_path"]
    KindClusterProvider().delete(result.id, result.outs)
    delete = next(c for c in fake.calls if c[1:3] == ["delete", "cluster"])
    assert delete[delete.index("--kubeconfig") + 1] == p["kubeconfig_path"]
    assert not (tmp_path / "home" / ".kube").exists()


def test_kinds_commands_are_bounded_by_the_provider_itself(kind: Any, tmp_path: Path) -> None:
    """The engine hands a dynamic provider no custom timeout (pulumi 3.272.0
    sdk/python/lib/pulumi/dynamic/__main__.py), so create and delete carry their own."""
    fake = kind()
    result = KindClusterProvider().create(props(tmp_path))
    KindClusterProvider().delete(result.id, result.outs)
    assert fake.timeouts["create cluster"] == clusters.KIND_CREATE_TIMEOUT == 900
    assert fake.timeouts["delete cluster"] == clusters.KIND_DELETE_TIMEOUT == 300


def test_read_reports_a_cluster_deleted_out_of_band(kind: Any, tmp_path: Path) -> None:
    fake = kind("dev-w1")
    live = KindClusterProvider().read("dev-w1", props(tmp_path))
    assert live.id == "dev-w1" and live.outs["kubeconfig"] == KUBECONFIG
    fake.existing.clear()  # `kind delete cluster` run by hand
    gone = KindClusterProvider().read("dev-w1", props(tmp_path))
    assert gone.id == "" and gone.outs == {}


def test_an_interrupted_create_of_this_stack_is_adopted(kind: Any, tmp_path: Path) -> None:
    fake = kind("dev-w1", owner="multikueue-fleet.dev")
    written = Path(props(tmp_path)["kubeconfig_path"])  # what kind wrote at that create
    written.parent.mkdir(parents=True)
    written.write_text(KUBECONFIG)
    result = KindClusterProvider().create(props(tmp_path))
    assert result.id == "dev-w1" and result.outs["context"] == "kind-dev-w1"
    assert not any(c[1:3] == ["create", "cluster"] for c in fake.calls)


@pytest.mark.parametrize(
    "written",
    [None, KUBECONFIG.replace("Q0EtMQ==", "Q0EtMg=="), "clusters: [\n"],
    ids=["no-file-of-ours", "another-clusters-ca", "unreadable"],
)
def test_the_same_stack_name_from_another_checkout_is_refused(
    kind: Any, tmp_path: Path, written: str | None
) -> None:
    """Same project and stack label, but made from another clone or state (a contributor's
    second checkout, an interrupted test run's copy): adopting it would let this stack's
    `down` delete a cluster it did not create."""
    fake = kind("dev-w1", owner="multikueue-fleet.dev")
    path = Path(props(tmp_path)["kubeconfig_path"])
    if written is not None:
        path.parent.mkdir(parents=True)
        path.write_text(written)
    with pytest.raises(CommandFailed, match="made elsewhere") as info:
        KindClusterProvider().create(props(tmp_path))
    assert str(path) in str(info.value)
    assert "kind delete cluster --name dev-w1" in str(info.value)
    assert not any(c[1:3] in (["create", "cluster"], ["delete", "cluster"]) for c in fake.calls)


@pytest.mark.parametrize(
    ("owner", "says"),
    [
        ("", "with no owner label"),
        ("multikueue-fleet.prod", "with owner 'multikueue-fleet.prod'"),
        (None, "cannot be read"),
    ],
)
def test_a_cluster_this_stack_did_not_create_is_refused(
    kind: Any, tmp_path: Path, owner: str | None, says: str
) -> None:
    fake = kind("dev-w1", owner=owner)
    with pytest.raises(CommandFailed, match=says) as info:
        KindClusterProvider().create(props(tmp_path))
    assert "kind delete cluster --name dev-w1" in str(info.value)
    assert not any(c[1:3] == ["create", "cluster"] for c in fake.calls)


def test_moving_the_checkout_does_not_replace_the_cluster(tmp_path: Path) -> None:
    old, new = props(tmp_path), {**props(tmp_path), "kubeconfig_path": "/elsewhere/x"}
    assert not KindClusterProvider().diff("dev-w1", old, new).changes
    other = {**old, "owner": "multikueue-fleet.prod"}
    assert KindClusterProvider().diff("dev-w1", old, other).replaces == ["owner"]


WITH_CONFIG_PATH = yaml.safe_dump(
    {"kind": "Cluster", "containerdConfigPatches": [CONTAINERD_MIRRORS_PATCH]}
)
MIRROR = "http://mkf-registry:5000"


def mirror_props(**extra: Any) -> dict[str, Any]:
    """KindMirrors' inputs, as KindClusterComponent gives them."""
    return {
        "name": "dev-w1",
        "cluster_ca": "Q0EtMQ==",
        "kind_binary": "kind",
        "registry_mirrors": {},
        **extra,
    }


def test_mirrors_added_changed_or_removed_are_rewritten_on_the_running_nodes(
    kind: Any, tmp_path: Path
) -> None:
    """Every kind cluster gets containerd's config_path at creation, so a mirror added,
    changed or removed later is an update of its KindMirrors (hosts.toml rewritten) and no
    change at all to the cluster; a removed mirror's folder goes from every node."""
    fake = kind("dev-w1", owner="multikueue-fleet.dev")
    cluster = {**props(tmp_path), "config": WITH_CONFIG_PATH, "mirrored": False}
    old = mirror_props()
    for mirrors in ({"docker.io": MIRROR}, {"registry.k8s.io": MIRROR}):
        new = mirror_props(registry_mirrors=mirrors)
        diff = KindMirrorsProvider().diff("dev-w1", old, new)
        assert diff.changes and not diff.replaces, diff.replaces
        assert (
            not KindClusterProvider().diff("dev-w1", cluster, {**cluster, "mirrored": True}).changes
        )
        fake.calls.clear()
        outs = KindMirrorsProvider().update("dev-w1", old, new).outs
        execs = [" ".join(c) for c in fake.calls if c[:2] == ["docker", "exec"]]
        (registry,) = mirrors
        assert any(f"/etc/containerd/certs.d/{registry}/hosts.toml" in e for e in execs), execs
        gone = set(old["registry_mirrors"]) - set(mirrors)
        assert [e for e in execs if " rm -rf " in e] == [
            f"docker exec dev-w1-control-plane rm -rf /etc/containerd/certs.d/{r}" for r in gone
        ]
        old = outs
    # The last one removed: its folder goes, nothing is written.
    fake.calls.clear()
    KindMirrorsProvider().update("dev-w1", old, mirror_props())
    execs = [" ".join(c) for c in fake.calls if c[:2] == ["docker", "exec"]]
    assert execs == [
        "docker exec dev-w1-control-plane rm -rf /etc/containerd/certs.d/registry.k8s.io"
    ]
    assert not KindMirrorsProvider().diff("dev-w1", mirror_props(), mirror_props()).changes


def test_a_cluster_made_again_gets_its_mirrors_written_again(kind: Any) -> None:
    """A new cluster (its configuration changed: a new CA) has none of the files: all are
    written, nothing is removed (there is nothing to remove)."""
    fake = kind("dev-w1", owner="multikueue-fleet.dev")
    old = mirror_props(registry_mirrors={"docker.io": MIRROR, "quay.io": MIRROR})
    new = {**old, "cluster_ca": "Q0EtMg==", "registry_mirrors": {"docker.io": MIRROR}}
    assert KindMirrorsProvider().diff("dev-w1", old, new).changes
    KindMirrorsProvider().update("dev-w1", old, new)
    execs = [" ".join(c) for c in fake.calls if c[:2] == ["docker", "exec"]]
    assert not [e for e in execs if " rm -rf " in e]
    assert any("certs.d/docker.io/hosts.toml" in e for e in execs)


def test_mirror_files_go_with_the_resource_and_a_gone_cluster_is_no_error(kind: Any) -> None:
    fake = kind("dev-w1", owner="multikueue-fleet.dev")
    KindMirrorsProvider().delete("dev-w1", mirror_props(registry_mirrors={"docker.io": MIRROR}))
    execs = [" ".join(c) for c in fake.calls if c[:2] == ["docker", "exec"]]
    assert execs == ["docker exec dev-w1-control-plane rm -rf /etc/containerd/certs.d/docker.io"]
    fake.existing.clear()  # deleted with the stack (after this), or by hand before
    fake.calls.clear()
    KindMirrorsProvider().delete("dev-w1", mirror_props(registry_mirrors={"docker.io": MIRROR}))
    assert not [c for c in fake.calls if c[0] == "docker"]


def test_a_state_from_before_the_split_keeps_its_cluster(kind: Any, tmp_path: Path) -> None:
    """A cluster recorded with its mirrors (before KindMirrors held them) is no change: the
    new inputs say only whether it is mirrored."""
    kind("dev-w1", owner="multikueue-fleet.dev")
    old = {**props(tmp_path), "config": WITH_CONFIG_PATH, "registry_mirrors": {"docker.io": MIRROR}}
    new = {**props(tmp_path), "config": WITH_CONFIG_PATH, "mirrored": True}
    assert not KindClusterProvider().diff("dev-w1", old, new).changes


def test_a_cluster_made_before_config_path_is_replaced_only_for_its_first_mirror(
    kind: Any, tmp_path: Path
) -> None:
    """A cluster made when only clusters with mirrors got config_path: the patch arriving
    alone changes nothing (the cluster is kept, and known as made without it); a first
    mirror needs it, which containerd reads only at start, so the cluster is made again."""
    kind("dev-w1", owner="multikueue-fleet.dev")
    old = {**props(tmp_path), "config": "kind: Cluster\n", "registry_mirrors": {}}
    new = {**props(tmp_path), "config": WITH_CONFIG_PATH, "mirrored": False}
    assert not KindClusterProvider().diff("dev-w1", old, new).changes
    mirrored = {**new, "mirrored": True}
    assert KindClusterProvider().diff("dev-w1", old, mirrored).replaces == ["config"]
    # Another node image is still a replacement, patch or not.
    other = {**new, "config": WITH_CONFIG_PATH.replace("kind: Cluster", "kind: Cluster\nnodes: []")}
    assert KindClusterProvider().diff(
        "dev-w1", {**old, "config": WITH_CONFIG_PATH}, other
    ).replaces == ["config"]


def test_the_owner_label_is_on_the_control_plane(tmp_path: Path) -> None:
    from components.checks.load import load_stack
    from components.model.stack_file import stack_path
    from components.objects.kind_config import kind_config

    spec, _ = load_stack(str(stack_path("dev")))
    cluster = next(c for c in spec.clusters if c.provider == "kind")
    nodes = kind_config(spec, cluster, "multikueue-fleet.dev")["nodes"]
    assert nodes[0]["role"] == "control-plane"
    assert nodes[0]["labels"][OWNER_LABEL] == "multikueue-fleet.dev"
    assert all(OWNER_LABEL not in (n.get("labels") or {}) for n in nodes[1:])


def test_the_provider_unpickles_in_a_fresh_interpreter_from_the_project() -> None:
    """Pulumi stores the provider dill-pickled (pulumi 3.272.0 sdk/python/lib/pulumi/dynamic/
    dynamic.py serialize_provider) and its provider host loads it in another process started
    in the project directory (dynamic/__main__.py get_provider)."""
    blob = serialize_provider(KindClusterProvider())
    script = (
        "import base64, sys, dill\n"
        "p = dill.loads(base64.b64decode(sys.stdin.read()))\n"
        "d = p.diff('x', {'name': 'a', 'config': 'c', 'owner': 'o'}, "
        "{'name': 'a', 'config': 'd', 'owner': 'o'})\n"
        "print(type(p).__module__, d.replaces)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        input=blob,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["components.resources.clusters", "['config']"]


def test_a_kind_failure_is_reported_with_its_stderr(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def failing(args: list[str], **_: Any) -> Any:
        if args[1:3] == ["create", "cluster"]:
            return subprocess.CompletedProcess(
                args, 1, "", "ERROR: failed to create cluster: Cannot connect to the Docker daemon"
            )
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(subprocess, "run", failing)
    with pytest.raises(CommandFailed, match="Cannot connect to the Docker daemon"):
        KindClusterProvider().create(props(tmp_path))


# kind's stderr when kubeadm fails (kind v0.33.0 cmd/kind/app/main.go logError, then kubeadm's
# own output at --v=6, which ends in a Go stack trace).
KUBEADM_FAILED = (
    """Creating cluster "ci-manager" ...
 ✓ Preparing nodes
ERROR: failed to create cluster: failed to init node with kubeadm: command "docker exec \
--privileged ci-manager-control-plane kubeadm init --config=/kind/kubeadm.conf \
--skip-token-print --v=6" failed with error: exit status 1

Command Output: I1130 21:40:01.000000     215 initconfiguration.go:261] loading configuration
[wait-control-plane] Waiting for the kubelet to boot up the control plane
"""
    + "I1130 21:40:02.000000     215 round_trippers.go:553] GET https://x:6443/healthz\n" * 40
    + """[kubelet-check] The kubelet is not healthy after 4m0s
error: error execution phase wait-control-plane: could not initialize a Kubernetes cluster
k8s.io/kubernetes/cmd/kubeadm/app/cmd/phases/workflow.(*Runner).Run.func1
\tk8s.io/kubernetes@v1.36.4/cmd/kubeadm/app/cmd/phases/workflow/runner.go:260
k8s.io/kubernetes/cmd/kubeadm/app.Run
\tk8s.io/kubernetes@v1.36.4/cmd/kubeadm/app/kubeadm.go:48
main.main
\tk8s.io/kubernetes@v1.36.4/cmd/kubeadm/kubeadm.go:25
runtime.main
\truntime/proc.go:290
runtime.goexit
\truntime/asm_amd64.s:1771
"""
)


def test_a_failed_kubeadm_is_reported_by_its_words_not_its_stack_trace(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A CI run's kind creates failed with only kubeadm's stack trace to read: the error names
    kind's failed step and kubeadm's last words above the trace."""

    def failing(args: list[str], **_: Any) -> Any:
        if args[1:3] == ["create", "cluster"]:
            return subprocess.CompletedProcess(args, 1, "", KUBEADM_FAILED)
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(subprocess, "run", failing)
    with pytest.raises(CommandFailed) as info:
        KindClusterProvider().create(props(tmp_path))
    said = str(info.value).splitlines()
    assert said[1].startswith("ERROR: failed to create cluster: failed to init node with kubeadm")
    assert said[-2:] == [
        "[kubelet-check] The kubelet is not healthy after 4m0s",
        "error: error execution phase wait-control-plane: could not initialize a Kubernetes "
        "cluster",
    ]
    assert not any(".go:" in line and line.startswith("\t") for line in said)
    assert "main.main" not in said and len(said) == 10
    assert all(len(line) <= 400 for line in said)


def test_a_missing_kind_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def missing(*_: Any, **__: Any) -> Any:
        raise FileNotFoundError("kind")

    monkeypatch.setattr(subprocess, "run", missing)
    with pytest.raises(CommandFailed, match="kind is not installed"):
        KindClusterProvider().create(props(tmp_path))


def test_a_provider_pickled_before_the_move_still_loads() -> None:
    """A stack deployed earlier holds a pickle naming components.providers.KindClusterProvider
    (a by-reference GLOBAL); the engine must still load it to read or delete that cluster."""
    import pickle

    from components.resources.clusters import KindClusterProvider as moved

    old_reference = b"ccomponents.providers\nKindClusterProvider\n."  # pickle's GLOBAL opcode
    assert pickle.loads(old_reference) is moved


# (module path an older program pickled the provider under, class): components/ was flat
# before the stage packages, and the kind provider lived in providers.py before clusters.py.
OLD_PATHS = [
    ("components.clusters", "KindClusterProvider"),
    ("components.providers", "KindClusterProvider"),
    ("components.providers", "ServiceAccountTokenProvider"),
    ("components.providers", "ControllerImageProvider"),
]


@pytest.mark.parametrize(("module", "name"), OLD_PATHS)
def test_a_provider_an_older_state_holds_loads_in_the_provider_host(module: str, name: str) -> None:
    """The pickle is made as the older program made it: Pulumi's serialize_provider on a
    provider whose class had that module path (dill pickles a class by module and name).
    Then it is loaded the way the engine's provider host loads a state's `__provider`: in a
    fresh interpreter started in the project directory (pulumi 3.272.0
    sdk/python/lib/pulumi/dynamic/__main__.py get_provider)."""
    make = (
        "import base64, importlib, sys\n"
        "from pulumi.dynamic.dynamic import serialize_provider\n"
        "from components.resources import clusters, providers\n"
        f"cls = next(getattr(m, {name!r}) for m in (clusters, providers) if hasattr(m, {name!r}))\n"
        f"cls.__module__ = {module!r}\n"
        "blob = serialize_provider(cls())\n"
        f"assert {module!r}.encode() in base64.b64decode(blob), 'not pickled by that path'\n"
        "print(blob)\n"
    )
    made = subprocess.run(
        [sys.executable, "-c", make], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert made.returncode == 0, made.stderr
    load = (
        "import base64, sys, dill\n"
        "p = dill.loads(base64.b64decode(sys.stdin.read()))\n"
        "print(type(p).__module__, type(p).__name__, callable(p.diff))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", load],
        input=made.stdout.strip(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert loaded.returncode == 0, loaded.stderr
    home = "components.resources.clusters" if name == "KindClusterProvider" else None
    assert loaded.stdout.split() == [home or "components.resources.providers", name, "True"]


def test_a_slow_docker_is_asked_again_for_its_cgroup_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Taking a slow `docker info` for no Docker left 1.35+ kubelets on a cgroup v1 host
    without failCgroupV1: false: every kind node failed to start (seen on a loaded CI host)."""
    answers: list[str | Exception] = []

    def docker(args: list[str], timeout: float = 0) -> str:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(clusters, "run", docker)
    answers[:] = [CommandFailed("`docker info` did not finish in 30s"), "1\n"]
    assert clusters.docker_cgroup_v1() is True
    answers[:] = [CommandFailed("`docker info` failed (exit 1):\nCannot connect"), "1\n"]
    assert clusters.docker_cgroup_v1() is False  # no Docker: asked once
    assert answers == ["1\n"]


def test_a_mirrors_ca_is_written_beside_its_hosts_toml_and_goes_with_the_option(
    kind: Any, tmp_path: Path
) -> None:
    fake = kind("dev-w1", owner="multikueue-fleet.dev")
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    old = mirror_props()
    with_ca = mirror_props(registry_mirrors={"docker.io": {"url": "https://m.example", "ca": pem}})
    KindMirrorsProvider().update("dev-w1", old, with_ca)
    ca_file = "/etc/containerd/certs.d/docker.io/mirror-ca.crt"
    writes = [c[-1] for c in fake.calls if c[:3] == ["docker", "exec", "-i"]]
    assert writes[0].endswith(f"cat > '{ca_file}'") and writes[1].endswith("hosts.toml'")
    fake.calls.clear()
    KindMirrorsProvider().update(
        "dev-w1", with_ca, mirror_props(registry_mirrors={"docker.io": "https://m.example"})
    )
    (write,) = [c[-1] for c in fake.calls if c[:3] == ["docker", "exec", "-i"]]
    assert f"rm -f '{ca_file}' && cat > " in write


def test_a_create_is_marked_while_kind_runs_and_not_after(
    kind: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mark is what lets a teardown remove a create cut short (kind_creates.py): there
    while `kind create` runs, gone once it returned; left when kind failed."""
    fake = kind()
    p = props(tmp_path)
    mark = kind_creates.mark_of(p["kubeconfig_path"])
    seen: list[bool] = []
    run = subprocess.run

    def spy(args: list[str], **kw: Any) -> Any:
        if args[1:3] == ["create", "cluster"]:
            seen.append(mark.exists())
        return run(args, **kw)

    monkeypatch.setattr(subprocess, "run", spy)
    KindClusterProvider().create(dict(p))
    assert seen == [True] and not mark.exists()

    def failing(args: list[str], **kw: Any) -> Any:
        if args[1:3] == ["create", "cluster"]:
            return subprocess.CompletedProcess(args, 1, "", "ERROR: failed to create cluster")
        return fake(args, **kw)

    fake.existing.clear()
    monkeypatch.setattr(subprocess, "run", failing)
    with pytest.raises(CommandFailed):
        KindClusterProvider().create(dict(p))
    assert mark.exists()  # kind removed its nodes; the teardown finds none and drops it


def test_a_teardown_deletes_what_a_cut_short_create_left_and_nothing_else(
    kind: Any, tmp_path: Path
) -> None:
    """Marked and listed: deleted with the stack's kubeconfig; marked and not listed (kind
    cleaned up, or never got that far): the mark goes; listed and not marked: not this
    stack's to delete, left as it is."""
    fake = kind("dev-w1", "dev-w2", "someone-else")
    folder = tmp_path / "state" / "kind" / "dev"
    for name in ("dev-w1", "dev-w3"):
        path = str(folder / f"{name}.kubeconfig")
        with pytest.raises(RuntimeError), kind_creates.creating("kind", name, path):
            Path(path).write_text("kind wrote this much")
            raise RuntimeError("killed")  # the create never returned
    logged: list[str] = []
    assert kind_creates.remove_cut_short(folder, logged.append) == ["dev-w1"]
    deletes = [c for c in fake.calls if c[1:3] == ["delete", "cluster"]]
    assert deletes == [["kind", "delete", "cluster", "--name", "dev-w1", "--kubeconfig",
                        str(folder / "dev-w1.kubeconfig")]]  # fmt: skip
    assert fake.existing == {"dev-w2", "someone-else"}
    assert list(folder.iterdir()) == []
    assert logged == ["kind cluster dev-w1: its create was cut short; deleted"]
    assert kind_creates.remove_cut_short(tmp_path / "no-such-stack", logged.append) == []


def test_a_node_the_engine_lands_after_the_teardown_looked_is_deleted_too(
    kind: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node container whose create was in flight when kind was killed is listed, refused
    by `docker rm` ("No such container") and lands after the delete returned (Docker
    20.10.24): the teardown deletes it when it shows up, and stops only when kind has not
    listed the cluster for SETTLE_LOOKS looks in a row."""
    fake = kind("dev-w1")
    folder = tmp_path / "state" / "kind" / "dev"
    path = str(folder / "dev-w1.kubeconfig")
    with pytest.raises(RuntimeError), kind_creates.creating("kind", "dev-w1", path):
        raise RuntimeError("killed")
    lands = {"after looks": 2}  # the late node lands two looks after the first delete

    def late(args: list[str], **kw: Any) -> Any:
        if args[1:3] == ["get", "clusters"] and "dev-w1" not in fake.existing:
            lands["after looks"] -= 1
            if lands["after looks"] == 0:
                fake.existing.add("dev-w1")
        return fake(args, **kw)

    monkeypatch.setattr(subprocess, "run", late)
    logged: list[str] = []
    assert kind_creates.remove_cut_short(folder, logged.append) == ["dev-w1"]
    deletes = [c for c in fake.calls if c[1:3] == ["delete", "cluster"]]
    assert len(deletes) == 2 and fake.existing == set()
    looks = [c for c in fake.calls if c[1:3] == ["get", "clusters"]]
    assert len(looks) == 1 + 2 + kind_creates.SETTLE_LOOKS  # listed, late, then quiet
    assert logged == ["kind cluster dev-w1: its create was cut short; deleted"]
    assert not kind_creates.mark_of(path).exists()


def test_a_cut_short_cluster_kind_cannot_delete_is_named_with_the_command(
    kind: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = kind("dev-w1")
    folder = tmp_path / "state" / "kind" / "dev"
    path = str(folder / "dev-w1.kubeconfig")
    with pytest.raises(RuntimeError), kind_creates.creating("kind", "dev-w1", path):
        raise RuntimeError("killed")

    def refusing(args: list[str], **kw: Any) -> Any:
        if args[1:3] == ["delete", "cluster"]:
            return subprocess.CompletedProcess(args, 1, "", "ERROR: no docker")
        return fake(args, **kw)

    monkeypatch.setattr(subprocess, "run", refusing)
    with pytest.raises(CommandFailed) as failed:
        kind_creates.remove_cut_short(folder, print)
    assert "kind cluster dev-w1 was left half made" in str(failed.value)
    assert "`kind delete cluster --name dev-w1`" in str(failed.value)
    assert kind_creates.mark_of(path).exists()  # the next teardown tries again


def test_a_create_this_stack_cut_short_is_made_again_not_adopted(kind: Any, tmp_path: Path) -> None:
    """up interrupted while kind created (its mark left), then up again: what is there is
    half made by this stack, so it is deleted and created anew, where a cluster without the
    mark would be refused or adopted by its CA."""
    fake = kind("dev-w1", owner=None)  # a control-plane node that cannot be read
    p = props(tmp_path)
    with pytest.raises(RuntimeError), kind_creates.creating("kind", "dev-w1", p["kubeconfig_path"]):
        raise RuntimeError("killed")
    KindClusterProvider().create(dict(p))
    verbs = [c[1:3] for c in fake.calls if c[1:3] in (["delete", "cluster"], ["create", "cluster"])]
    assert verbs == [["delete", "cluster"], ["create", "cluster"]]
    assert not kind_creates.mark_of(p["kubeconfig_path"]).exists()
