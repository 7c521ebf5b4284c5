"""Job frameworks a cluster can run: what each installs and what Kueue and RBAC need.

Names users write in a stack file are the keys of FRAMEWORKS. Each maps to the Kueue
integration names it backs, the API resources MultiKueue must reach on a worker, and the
official release it is installed from (versions from research/kueue-api.md §9).
"""

from __future__ import annotations

from dataclasses import dataclass

from components.model.versions import MPI_OPERATOR_URL, MPI_OPERATOR_VERSION, Bundle


@dataclass(frozen=True)
class ApiResource:
    group: str
    plural: str


@dataclass(frozen=True)
class Framework:
    key: str
    integrations: tuple[str, ...]
    resources: tuple[ApiResource, ...]
    bundles: tuple[Bundle, ...]
    requires: tuple[str, ...] = ()


def _gh_release(repo: str, version: str, asset: str) -> str:
    return f"https://github.com/{repo}/releases/download/{version}/{asset}"


# Kueue v0.19.2 test/e2e/config/multikueue/kubeflow-manifest-patch/patch_deployment.yaml.
TRAINING_OPERATOR_SCHEMES = """\
$patch: merge
apiVersion: apps/v1
kind: Deployment
metadata:
  name: training-operator
spec:
  template:
    spec:
      containers:
      - name: training-operator
        args:
        - --enable-scheme=tfjob
        - --enable-scheme=pytorchjob
        - --enable-scheme=xgboostjob
        - --enable-scheme=paddlejob
        - --enable-scheme=jaxjob
"""

FRAMEWORKS: dict[str, Framework] = {
    # batch/Job is built into Kubernetes: always on, nothing to install.
    "batch": Framework("batch", ("batch/job",), (ApiResource("batch", "jobs"),), ()),
    "jobset": Framework(
        "jobset",
        ("jobset.x-k8s.io/jobset",),
        (ApiResource("jobset.x-k8s.io", "jobsets"),),
        (
            Bundle(
                "jobset",
                "v0.12.0",
                _gh_release("kubernetes-sigs/jobset", "v0.12.0", "manifests.yaml"),
                "manifests",
                "jobset-system",
            ),
        ),
    ),
    "leaderworkerset": Framework(
        "leaderworkerset",
        ("leaderworkerset.x-k8s.io/leaderworkerset",),
        (ApiResource("leaderworkerset.x-k8s.io", "leaderworkersets"),),
        (
            Bundle(
                "leaderworkerset",
                "v0.9.0",
                _gh_release("kubernetes-sigs/lws", "v0.9.0", "manifests.yaml"),
                "manifests",
                "lws-system",
            ),
        ),
    ),
    "trainer": Framework(
        "trainer",
        ("trainer.kubeflow.org/trainjob",),
        (ApiResource("trainer.kubeflow.org", "trainjobs"),),
        (
            Bundle(
                "kubeflow-trainer",
                "v2.2.1",
                "https://github.com/kubeflow/trainer.git/manifests/overlays/manager?ref=v2.2.1",
                "kustomize",
                "kubeflow-system",
                # The overlay bundles JobSet v0.11.0 (manifests/third-party/jobset at v2.2.1);
                # Kueue v0.19.2 is tested with the JobSet of its go.mod, v0.12.0, which the
                # `jobset` framework installs. Kueue's e2e drops the bundled one the same way
                # (hack/testing/e2e-common.sh, install_kubeflow_trainer). JobSet's release
                # prefixes every object `jobset-` but its CRD.
                without=(r"jobset-.*", r"jobsets\.jobset\.x-k8s\.io"),
                source_sha256="f8ede5f738c27f2abef5700c4df58121da5fdde6d808c0463808fbdf4a16454a",
            ),
            # TrainJobs need their (Cluster)TrainingRuntimes on every cluster that runs them.
            Bundle(
                "kubeflow-trainer-runtimes",
                "v2.2.1",
                "https://github.com/kubeflow/trainer.git/manifests/overlays/runtimes?ref=v2.2.1",
                "kustomize",
                "kubeflow-system",
                source_sha256="f8ede5f738c27f2abef5700c4df58121da5fdde6d808c0463808fbdf4a16454a",
            ),
        ),
        # Trainer v2 runs every TrainJob as a JobSet.
        requires=("jobset",),
    ),
    "training-operator": Framework(
        "training-operator",
        (
            "kubeflow.org/pytorchjob",
            "kubeflow.org/tfjob",
            "kubeflow.org/xgboostjob",
            "kubeflow.org/paddlejob",
            "kubeflow.org/jaxjob",
        ),
        tuple(
            ApiResource("kubeflow.org", p)
            for p in ("pytorchjobs", "tfjobs", "xgboostjobs", "paddlejobs", "jaxjobs")
        ),
        (
            Bundle(
                "training-operator",
                "v1.9.3",
                "https://github.com/kubeflow/training-operator.git/manifests/overlays/standalone"
                "?ref=v1.9.3",
                "kustomize",
                "kubeflow",
                # As Kueue v0.19.2's e2e installs it (hack/testing/e2e-common.sh 738-741,
                # test/e2e/config/multikueue/kubeflow-manifest-patch): without its MPIJob CRD,
                # which the `mpi` framework's MPI Operator owns (kubeflow/training-operator
                # #1930), and with every scheme but mpi enabled (#1777), so the two coexist on
                # one cluster and MPIJobs are the MPI Operator's alone.
                without=(r"mpijobs\.kubeflow\.org",),
                patches=(("Deployment", "training-operator", TRAINING_OPERATOR_SCHEMES),),
                source_sha256="098aa47220c691c81848d904681f93bc30e4662660eb41e2a8dd87faa633ddf8",
            ),
        ),
    ),
    "mpi": Framework(
        "mpi",
        ("kubeflow.org/mpijob",),
        (ApiResource("kubeflow.org", "mpijobs"),),
        (
            Bundle(
                "mpi-operator",
                MPI_OPERATOR_VERSION,
                MPI_OPERATOR_URL,
                "manifests",
                "mpi-operator",
            ),
        ),
    ),
    "kuberay": Framework(
        "kuberay",
        ("ray.io/rayjob", "ray.io/raycluster", "ray.io/rayservice"),
        tuple(ApiResource("ray.io", p) for p in ("rayjobs", "rayclusters", "rayservices")),
        (
            Bundle(
                "kuberay",
                "v1.6.2",
                "https://github.com/ray-project/kuberay/ray-operator/config/default?ref=v1.6.2",
                "kustomize",
                "default",
                source_sha256="affb50cf88a2b461dcb4111c5599a8491a16118c0f08a60729f2c0dd8873420c",
            ),
        ),
    ),
    "appwrapper": Framework(
        "appwrapper",
        ("workload.codeflare.dev/appwrapper",),
        (ApiResource("workload.codeflare.dev", "appwrappers"),),
        (
            Bundle(
                "appwrapper",
                "v1.2.2",
                _gh_release("project-codeflare/appwrapper", "v1.2.2", "install.yaml"),
                "manifests",
                "appwrapper-system",
            ),
        ),
    ),
}

# Presets that are gone, and why: listing one is refused with this text.
REMOVED_FRAMEWORKS: dict[str, str] = {
    "tekton": (
        "the tekton preset was removed: MultiKueue runs a PipelineRun only through a manager "
        "Workload that something creates for it (with spec.managedBy set), and nothing in the "
        "fleet does (https://kueue.sigs.k8s.io/docs/tasks/run/multikueue/external-frameworks/); "
        "install Tekton and such an integration yourself and list the kind under "
        "kueue.externalFrameworks"
    ),
}

# Integrations Kueue knows that need no operator of ours (core kinds), or whose operator
# this project does not install (Spark). Listing them is allowed in kueue.integrations.
CORE_INTEGRATIONS: dict[str, ApiResource] = {
    "pod": ApiResource("", "pods"),
    "deployment": ApiResource("apps", "deployments"),
    "statefulset": ApiResource("apps", "statefulsets"),
}
OTHER_KNOWN_INTEGRATIONS: dict[str, ApiResource] = {
    "sparkoperator.k8s.io/sparkapplication": ApiResource(
        "sparkoperator.k8s.io", "sparkapplications"
    ),
}


# Integrations whose MultiKueue adapter copies no status from the worker's object back to the
# manager's: in kueue v0.19.2 pkg/controller/jobs/leaderworkerset/
# leaderworkerset_multikueue_adapter.go and statefulset/statefulset_multikueue_adapter.go,
# SyncJob only creates the remote object. Their Workloads on the manager are pod groups whose
# pods stay gated there, so the manager never sees PodsReady for them. Every other adapter at
# that tag copies the remote status (job, jobset, kubeflow, mpijob, ray*, trainjob,
# appwrapper), and the pod adapter copies each remote Pod's status onto the gated local Pod
# (pod_multikueue_adapter.go, syncLocalPodWithRemote), so plain pods and pod groups get ready.
STATUS_NOT_MIRRORED = ("leaderworkerset.x-k8s.io/leaderworkerset", "statefulset")


# Integrations with a built-in MultiKueue adapter at kueue v0.19.2 (the
# pkg/controller/jobs/**/*_multikueue_adapter.go files). Others (deployment, Spark) are never
# sent to a worker, so the worker identity needs no rights on them.
MULTIKUEUE_ADAPTERS = frozenset(
    {
        "batch/job",
        "jobset.x-k8s.io/jobset",
        "kubeflow.org/jaxjob",
        "kubeflow.org/paddlejob",
        "kubeflow.org/pytorchjob",
        "kubeflow.org/tfjob",
        "kubeflow.org/xgboostjob",
        "kubeflow.org/mpijob",
        "leaderworkerset.x-k8s.io/leaderworkerset",
        "pod",
        "ray.io/raycluster",
        "ray.io/rayjob",
        "ray.io/rayservice",
        "statefulset",
        "trainer.kubeflow.org/trainjob",
        "workload.codeflare.dev/appwrapper",
    }
)
# Adapters that also patch the worker's object after creating it: the Job adapter
# (job_multikueue_adapter.go, syncElasticJob) and the Ray adapter shared by RayJob,
# RayCluster and RayService (ray/ray_multikueue_adapter.go, syncElastic, syncRemoteSpec).
PATCHING_ADAPTERS = frozenset(
    {"batch/job", "ray.io/raycluster", "ray.io/rayjob", "ray.io/rayservice"}
)


def framework_of_integration(name: str) -> Framework | None:
    for fw in FRAMEWORKS.values():
        if name in fw.integrations:
            return fw
    return None


def known_integrations() -> list[str]:
    names = [i for fw in FRAMEWORKS.values() for i in fw.integrations]
    return sorted([*names, *CORE_INTEGRATIONS, *OTHER_KNOWN_INTEGRATIONS])


def resource_of_integration(name: str) -> ApiResource | None:
    fw = framework_of_integration(name)
    if fw is not None:
        return fw.resources[fw.integrations.index(name)]
    return CORE_INTEGRATIONS.get(name) or OTHER_KNOWN_INTEGRATIONS.get(name)
