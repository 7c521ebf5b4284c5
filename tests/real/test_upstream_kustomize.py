"""Framework bundles built by the pinned kustomize as the fleet builds them."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from components.model.frameworks import FRAMEWORKS
from components.upstream import toolchain
from components.upstream.releases import kustomize_directory
from tests.helpers.fleet_config import base, checked_spec


def _kustomize() -> list[str]:
    """A kustomize build command: the pinned kustomize once built (.tools/bin), else
    kubectl's; the test skips without either."""
    built = toolchain.BIN_DIR / "kustomize"
    if built.exists():
        return [str(built), "build"]
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("neither kustomize (.tools/bin) nor kubectl is installed")
    return [kubectl, "kustomize"]


def test_training_operator_and_mpi_coexist_as_in_kueues_e2e(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both training-operator v1.9 and the MPI Operator ship mpijobs.kubeflow.org (and the
    training operator runs an MPIJob controller): Kueue v0.19.2's e2e installs the training
    operator without that CRD and with every scheme but mpi (hack/testing/e2e-common.sh
    738-741, test/e2e/config/multikueue/kubeflow-manifest-patch); so does the stack."""
    kustomize = _kustomize()
    config = base()
    config["frameworks"] = ["batch", "training-operator", "mpi"]
    checked_spec(config)  # the pair is a valid stack
    (training,) = FRAMEWORKS["training-operator"].bundles
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    objs = [
        {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
         "metadata": {"name": f"{plural}.kubeflow.org"}}
        for plural in ("mpijobs", "pytorchjobs", "tfjobs")
    ] + [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "training-operator"},
         "spec": {"template": {"spec": {"containers": [
             {"name": "training-operator", "image": "kubeflow/training-operator:v1-5e8d4b6"}
         ]}}}},
    ]  # fmt: skip
    (overlay / "objs.yaml").write_text(yaml.safe_dump_all(objs))
    (overlay / "kustomization.yaml").write_text("resources: [objs.yaml]\n")
    monkeypatch.setenv("MKF_UPSTREAM_CACHE", str(tmp_path / "cache"))
    folder = kustomize_directory(replace(training, url="../../../overlay"))
    built = list(
        yaml.safe_load_all(
            subprocess.run([*kustomize, folder], capture_output=True, text=True, check=True).stdout
        )
    )
    names = sorted(o["metadata"]["name"] for o in built)
    assert names == ["pytorchjobs.kubeflow.org", "tfjobs.kubeflow.org", "training-operator"]
    (deployment,) = [o for o in built if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "kubeflow/training-operator:v1-5e8d4b6"
    schemes = sorted(a.removeprefix("--enable-scheme=") for a in container["args"])
    assert schemes == ["jaxjob", "paddlejob", "pytorchjob", "tfjob", "xgboostjob"]
    # The MPI Operator's own install is unchanged: it owns mpijobs.kubeflow.org.
    (mpi,) = FRAMEWORKS["mpi"].bundles
    assert not mpi.without and not mpi.patches
    # And render shows the changes (render --diff would show a change of them).
    assert training.as_dict()["without"] == [r"mpijobs\.kubeflow\.org"]
    assert training.as_dict()["patches"][0]["name"] == "training-operator"


def test_the_left_out_objects_are_deleted_by_kustomize(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs kustomize on a local stand-in for the remote overlay."""
    kustomize = _kustomize()
    base_dir = tmp_path / "overlay"
    base_dir.mkdir()
    names = {
        "CustomResourceDefinition": ["jobsets.jobset.x-k8s.io", "trainjobs.trainer.kubeflow.org"],
        "Deployment": ["jobset-controller-manager", "kubeflow-trainer-controller-manager"],
        "ClusterRole": ["jobset-manager-role", "my-jobset-reader"],
    }
    objs = [{"apiVersion": "v1", "kind": k, "metadata": {"name": n}} for k, v in names.items()
            for n in v]  # fmt: skip
    (base_dir / "objs.yaml").write_text(yaml.safe_dump_all(objs))
    (base_dir / "kustomization.yaml").write_text("resources: [objs.yaml]\n")
    monkeypatch.setenv("MKF_UPSTREAM_CACHE", str(tmp_path / "cache"))
    (trainer,) = [b for b in FRAMEWORKS["trainer"].bundles if b.without]
    # kustomize takes local resources only by relative path: the folder is cache/kustomize/<h>
    folder = kustomize_directory(replace(trainer, url="../../../overlay"))
    assert Path(folder).is_relative_to(tmp_path / "cache")
    built = subprocess.run([*kustomize, folder], capture_output=True, text=True, check=True).stdout
    kept = sorted(o["metadata"]["name"] for o in yaml.safe_load_all(built))
    assert kept == ["kubeflow-trainer-controller-manager", "my-jobset-reader",
                    "trainjobs.trainer.kubeflow.org"]  # fmt: skip
    assert kustomize_directory(FRAMEWORKS["jobset"].bundles[0]).startswith("https://")
