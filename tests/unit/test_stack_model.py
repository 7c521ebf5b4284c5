"""The typed model refuses what a real cluster (or Kueue, kind, GKE, EKS) would, each class
of bad input fed as stack file text: the exact config path, the message, and a fix."""

from __future__ import annotations

import pytest

from components.checks.validate import validate
from components.model.problems import Problem
from components.model.spec import load_spec
from components.model.stack_file import read_stack_text, with_lines
from components.model.versions import KIND_NODE_IMAGES
from tests.helpers.fleet_config import base, only, problems_of
from tests.helpers.stack_texts import SMALL

GKE = """\
config:
  multikueue-fleet:fleetName: prod
  multikueue-fleet:manager:
    provider: gke
    kubernetesVersion: "1.35"
    gke:
      project: my-gcp-project
      location: europe-west4
  multikueue-fleet:workers:
    - name: ew4
      provider: gke
      kubernetesVersion: "1.35"
      gke:
        project: my-gcp-project
        location: europe-west4
  multikueue-fleet:dispatcher:
    registry: europe-west4-docker.pkg.dev/my-gcp-project/fleet
  multikueue-fleet:frameworks: [batch, jobset]
"""


def problems_in(text: str) -> list[Problem]:
    read = read_stack_text(text)
    spec, problems = load_spec(read.config, "t", read.secret)
    if spec is not None:
        problems += validate(spec)
    return with_lines(problems, read.lines)


def with_key(text: str, after: str, lines: str) -> str:
    """`text` with `lines` inserted after the line that holds `after`."""
    head, sep, tail = text.partition(after)
    assert sep, after
    end = tail.index("\n") + 1
    return head + sep + tail[:end] + lines + tail[end:]


CPU = "                  cpu: 4\n"
# (id, text, path, text in the message, text in the fix)
CASES = [
    (
        "name with a line break",
        SMALL.replace("- name: worker1", '- name: "worker1\\n"'),
        "workers[0].name",
        "cluster name 'worker1\\n' is not a valid DNS label",
        "lower-case letters",
    ),
    (
        "negative quota",
        SMALL.replace("cpu: 4", 'cpu: "-1"'),
        "queues.clusterQueues[0].resourceGroups[0].flavors[0].resources.cpu",
        "nominalQuota '-1' is negative",
        "0 or more",
    ),
    (
        "enormous quota",
        SMALL.replace("cpu: 4", 'cpu: "1e400"'),
        "queues.clusterQueues[0].resourceGroups[0].flavors[0].resources.cpu",
        "'1e400' is too large",
        "use less than",
    ),
    (
        "infinite quota",
        SMALL.replace("cpu: 4", "cpu: .inf"),
        "queues.clusterQueues[0].resourceGroups[0].flavors[0].resources.cpu",
        "'inf' is not a finite number",
        "500m",
    ),
    (
        "not a quantity",
        SMALL.replace("cpu: 4", "cpu: four"),
        "queues.clusterQueues[0].resourceGroups[0].flavors[0].resources.cpu",
        "nominalQuota 'four' is not a Kubernetes quantity",
        "32Gi",
    ),
    (
        "negative borrowing limit",
        SMALL.replace("cpu: 4", 'cpu: {nominalQuota: 4, borrowingLimit: "-2"}'),
        "queues.clusterQueues[0].resourceGroups[0].flavors[0].resources.cpu.borrowingLimit",
        "'-2' is negative",
        "0 or more",
    ),
    (
        "worker quota not a quantity",
        with_key(SMALL, "region: a", "      quotas: {cq: {default-flavor: {cpu: lots}}}\n"),
        "workers[0].quotas.cq.default-flavor.cpu",
        "'lots' is not a Kubernetes quantity",
        "500m",
    ),
    (
        "image platform the nodes cannot run",
        SMALL + "  multikueue-fleet:dispatcher:\n    platform: windows/amd64\n",
        "dispatcher.platform",
        "'windows/amd64' is not one of linux/amd64, linux/arm64",
        "did you mean 'linux/amd64'",
    ),
    (
        "taint effect",
        SMALL.replace(
            "      - name: default-flavor\n    clusterQueues",
            "      - name: default-flavor\n        nodeTaints:\n"
            "          - {key: gpu, value: t4, effect: Explode}\n    clusterQueues",
        ),
        "queues.flavors[0].nodeTaints[0].effect",
        "'Explode' is not one of NoSchedule, PreferNoSchedule, NoExecute",
        "use one of",
    ),
    (
        "toleration operator",
        SMALL.replace(
            "      - name: default-flavor\n    clusterQueues",
            "      - name: default-flavor\n        tolerations:\n"
            "          - {key: gpu, operator: Exist}\n    clusterQueues",
        ),
        "queues.flavors[0].tolerations[0].operator",
        "'Exist' is not one of Exists, Equal",
        "did you mean 'Exists'?",
    ),
    (
        "namespaceSelector label key",
        with_key(
            SMALL, "- name: cq", '        namespaceSelector: {matchLabels: {"bad key!": x}}\n'
        ),
        "queues.clusterQueues[0].namespaceSelector.matchLabels.bad key!",
        "'bad key!' is not a valid label key",
        "[prefix/]name",
    ),
    (
        "selector operator needs values",
        with_key(
            SMALL,
            "- name: cq",
            "        namespaceSelector: {matchExpressions: [{key: team, operator: In}]}\n",
        ),
        "queues.clusterQueues[0].namespaceSelector.matchExpressions[0].values",
        "operator In needs values",
        "list the values",
    ),
    (
        "label value",
        SMALL.replace("region: a", "region: not ok!"),
        "workers[0].labels.region",
        "'not ok!' is not a valid label value",
        "63 letters",
    ),
    (
        "dispatcher image",
        SMALL + '  multikueue-fleet:dispatcher:\n    image: "not an image!!"\n',
        "dispatcher.image",
        "'not an image!!' is not a container image reference",
        "registry.k8s.io/kueue/kueue:v0.19.2",
    ),
    (
        "registry with a tag",
        GKE.replace("fleet\n", "fleet:v1\n"),
        "dispatcher.registry",
        "is not a registry repository",
        "without a tag",
    ),
    (
        "kind node image ubuntu:latest",
        with_key(SMALL, "provider: kind", "    kind: {nodeImage: ubuntu:latest}\n"),
        "manager.kind.nodeImage",
        "'ubuntu:latest' is not pinned by digest",
        "@sha256",
    ),
    (
        "kind node image without a version",
        with_key(
            SMALL,
            "provider: kind",
            "    kind: {nodeImage: ubuntu:latest, allowUnpinnedNodeImage: true}\n",
        ),
        "manager.kind.nodeImage",
        "cannot be told from its tag",
        "kindest/node:vX.Y.Z",
    ),
    (
        "kind node image by tag only",
        with_key(SMALL, "provider: kind", "    kind: {nodeImage: kindest/node:v1.35.8}\n"),
        "manager.kind.nodeImage",
        "not pinned by digest",
        "allowUnpinnedNodeImage",
    ),
    (
        "kind version without an image",
        with_key(SMALL, "provider: kind", '    kubernetesVersion: "1.29"\n'),
        "manager.kubernetesVersion",
        "kind 1.29 has no node image pinned",
        "1.36",
    ),
    (
        "unquoted 1.30",
        GKE.replace('kubernetesVersion: "1.35"', "kubernetesVersion: 1.30", 1),
        "manager.kubernetesVersion",
        "read as the number 1.3",
        'quote it, for example kubernetesVersion: "1.30"',
    ),
    (
        "GKE 1.20",
        GKE.replace('"1.35"', '"1.20"'),
        "workers[0].kubernetesVersion",
        "Kubernetes 1.20 is too old here: GKE no longer creates",
        "1.32 to 1.37",
    ),
    (
        "EKS 1.9",
        GKE.replace("provider: gke", "provider: eks")
        .replace("gke:\n", "eks:\n")
        .replace("project: my-gcp-project\n", "")
        .replace("location: europe-west4", "region: eu-west-1")
        .replace('"1.35"', '"1.9"'),
        "workers[0].kubernetesVersion",
        "Kubernetes 1.9 is too old here: EKS",
        "1.32 to 1.37",
    ),
    (
        "manager too old for Job managedBy",
        GKE.replace("provider: gke", "provider: existing", 1)
        .replace(
            "    gke:\n      project: my-gcp-project\n      location: europe-west4\n",
            "    existing: {context: mgr}\n",
            1,
        )
        .replace('"1.35"', '"1.30"', 1),
        "manager.kubernetesVersion",
        "managedBy",
        "1.32 to 1.37",
    ),
    (
        "version from the future",
        GKE.replace('"1.35"', '"99.99"'),
        "workers[0].kubernetesVersion",
        "Kubernetes 99.99 is newer than any release this project knows",
        "components/model/versions.py",
    ),
    (
        "not a version",
        GKE.replace('"1.35"', "latest", 1),
        "manager.kubernetesVersion",
        "'latest' is not a Kubernetes version",
        "major.minor",
    ),
    (
        "Kueue release that does not exist",
        SMALL + "  multikueue-fleet:kueue:\n    version: v0.19.999\n",
        "kueue.version",
        "Kueue v0.19.999 is not supported",
        "v0.19.2",
    ),
    (
        "duration",
        SMALL + "  multikueue-fleet:kueue:\n    waitForPodsReady: {timeout: ten minutes}\n",
        "kueue.waitForPodsReady.timeout",
        "'ten minutes' is not a duration",
        "1h30m",
    ),
    (
        "strategy",
        SMALL + "  multikueue-fleet:dispatcher:\n    policy: {strategy: MostFree}\n",
        "dispatcher.policy.strategy",
        "'MostFree' is not one of MostFreeQuota, BestFit, OrderedSpillover",
        "did you mean 'MostFreeQuota'?",
    ),
    (
        "credential mode",
        SMALL + "  multikueue-fleet:credentials:\n    mode: clusterProfiles\n",
        "credentials.mode",
        "is not one of kubeconfigSecret, clusterProfile",
        "did you mean 'clusterProfile'?",
    ),
    (
        "boolean as yes",
        SMALL + "  multikueue-fleet:dispatcher:\n    inventory: yes please\n",
        "dispatcher.inventory",
        "expected true or false",
        "true or false",
    ),
    (
        "number out of range",
        SMALL + "  multikueue-fleet:dispatcher:\n    replicas: 50\n",
        "dispatcher.replicas",
        "50 is out of range",
        "1 to 5",
    ),
    (
        "unknown key",
        SMALL.replace("    provider: kind", "    provder: kind"),
        "manager.provder",
        "unknown key",
        "did you mean 'provider'?",
    ),
    (
        "mapping expected",
        SMALL + "  multikueue-fleet:kueue: v0.19.2\n",
        "kueue",
        "expected a mapping, got a string",
        "key: value",
    ),
    (
        "secret where none is read",
        SMALL + "  multikueue-fleet:dispatcher:\n    registry:\n      secure: v1:abc\n",
        "dispatcher.registry",
        "encrypted (secret) value is not supported here",
        "plain text",
    ),
    (
        "GCP project name instead of ID",
        GKE.replace("project: my-gcp-project", "project: My Project", 1),
        "manager.gke.project",
        "not a valid Google Cloud project ID",
        "project's ID",
    ),
    (
        "https server",
        SMALL.replace(
            "- name: worker2\n",
            "- name: worker2\n      provider: existing\n"
            "      existing: {context: w2, server: http://w2:6443}\n",
        ),
        "workers[1].existing.server",
        "https:// URL",
        "plain-http",
    ),
]


@pytest.mark.parametrize(
    ("text", "path", "message", "fix"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_input(text: str, path: str, message: str, fix: str) -> None:
    problems = problems_in(text)
    found = [p for p in problems if p.path == path and message in p.message]
    assert found, f"no problem at {path} saying {message!r}; got:\n" + "\n".join(map(str, problems))
    assert fix in found[0].hint
    assert found[0].severity == "error"
    assert found[0].line is not None  # the report points at the file's line


def test_the_small_stack_is_clean() -> None:
    assert problems_in(SMALL) == []
    assert problems_in(GKE) == []


def test_an_unpinned_node_image_may_be_allowed() -> None:
    text = with_key(
        SMALL,
        "provider: kind",
        "    kind: {nodeImage: kindest/node:v1.35.8, allowUnpinnedNodeImage: true}\n",
    )
    assert problems_in(text) == []


@pytest.mark.parametrize(("old", "new"), [("cpu: 4", "cpu: 0"), ("memory: 8Gi", "memory: 0")])
def test_zero_quota_of_one_resource_is_fine(old: str, new: str) -> None:
    assert problems_in(SMALL.replace(old, new)) == []


def test_all_zero_quotas_are_a_warning() -> None:
    problems = problems_in(SMALL.replace("cpu: 4", "cpu: 0").replace("memory: 8Gi", "memory: 0"))
    (problem,) = problems
    assert problem.severity == "warning"
    assert problem.path == "queues.clusterQueues[0].resourceGroups"
    assert "can never admit a workload" in problem.message
    assert "cohort" in problem.hint


def test_a_worker_offering_nothing_is_a_warning() -> None:
    text = with_key(
        SMALL, "region: a", "      quotas: {cq: {default-flavor: {cpu: 0, memory: 0}}}\n"
    )
    (problem,) = problems_in(text)
    assert problem.severity == "warning"
    assert problem.path == "workers[0].quotas.cq"
    assert "offers nothing" in problem.message


def test_an_object_too_large_for_the_api_server_is_refused_naming_the_cause() -> None:
    # 30,000 labels of 63 characters (aliases keep the file under 1 MiB): the worker's
    # MultiKueueCluster on the manager would be about 2 MiB.
    labels = "".join(f"        l{i}: *v\n" for i in range(30_000))
    text = SMALL.replace("        region: a\n", f"        region: &v {'v' * 63}\n{labels}", 1)
    assert len(text) < 1024 * 1024
    problems = problems_in_checked(text)
    (problem,) = problems
    assert problem.path == "workers[0].labels"
    assert "MultiKueueCluster 'worker1' on manager would be 2.1 MiB" in problem.message
    assert "30,003 entries in metadata.labels" in problem.message
    assert "1.5 MiB" in problem.message
    assert "under 1 MiB" in problem.hint


def problems_in_checked(text: str) -> list[Problem]:
    """As `load_stack` reports them: the object limits run once the fleet is valid."""
    from components.checks.load import load_checked
    from components.model.problems import FleetConfigError

    read = read_stack_text(text)
    try:
        load_checked(read.config, "t", "t", read.secret, read.lines)
    except FleetConfigError as exc:
        return exc.problems
    return []


def test_a_node_image_whose_tag_and_pinned_digest_disagree_is_refused() -> None:
    """kind pulls by digest: a v1.35.8 tag on v1.36.4's digest runs 1.36 while every
    version check judged 1.35."""
    digest_136 = KIND_NODE_IMAGES["1.36"].split("@")[1]
    config = base()
    config["workers"][0]["kind"] = {"nodeImage": f"kindest/node:v1.35.8@{digest_136}"}
    problem = only(problems_of(config), "workers[0].kind.nodeImage")
    assert "tagged v1.35.8 but its digest is that of kindest/node:v1.36.4" in problem.message
    assert KIND_NODE_IMAGES["1.36"] in problem.hint
    config["workers"][0]["kind"] = {"nodeImage": KIND_NODE_IMAGES["1.35"]}
    assert [p for p in problems_of(config) if p.severity == "error"] == []


def test_an_untagged_node_image_with_a_pinned_digest_runs_that_digests_version() -> None:
    """`kindest/node@sha256:…` of v1.36.4 with kubernetesVersion 1.35 runs 1.36: refused as
    a tagged one would be; with 1.36, or no version at all, it is told by its digest."""
    digest_136 = KIND_NODE_IMAGES["1.36"].split("@")[1]
    config = base()
    config["workers"][0]["kubernetesVersion"] = "1.35"
    config["workers"][0]["kind"] = {"nodeImage": f"kindest/node@{digest_136}"}
    problem = only(problems_of(config), "workers[0].kubernetesVersion")
    assert "kubernetesVersion is 1.35 but kind.nodeImage runs 1.36" in problem.message
    for version in ("1.36", None):
        if version is None:
            config["workers"][0].pop("kubernetesVersion")
        else:
            config["workers"][0]["kubernetesVersion"] = version
        assert [p for p in problems_of(config) if p.severity == "error"] == [], version
    # A digest no kind release names still needs a version said.
    config["workers"][0]["kind"] = {"nodeImage": "kindest/node@sha256:" + "1" * 64}
    problem = only(problems_of(config), "workers[0].kind.nodeImage")
    assert "cannot be told from its tag" in problem.message


def test_a_file_name_that_is_no_fleet_name_says_so_when_fleet_name_is_unset() -> None:
    """`render --diff --old a.yaml --new B.yaml`: the fleet takes the stack's name, B,
    from the file name; the error says that and both ways out, not `fleetName` alone."""

    config = {k: v for k, v in base().items() if k != "fleetName"}
    _, problems = load_spec(config, "B")
    (problem,) = [p for p in problems if p.path == "fleetName"]
    assert "fleetName is unset, so the fleet takes the stack's name 'B'" in problem.message
    assert "set fleetName" in problem.hint and "Pulumi.<name>.yaml" in problem.hint
    _, problems = load_spec({**config, "fleetName": "Bad_Name"}, "B")
    (problem,) = [p for p in problems if p.path == "fleetName"]
    assert problem.message == "fleet name 'Bad_Name' is not a valid DNS label"
