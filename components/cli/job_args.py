"""What `mkf job` and `mkf logs` take on the command line: the kinds of job they follow (and
how each one's pods are found on a worker) and kubectl's durations. Apart from the commands
themselves so that building mkf's parser loads no Kubernetes client."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from controller.api import Kind

_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def duration(text: str) -> int:
    """An argparse type for --since, as kubectl writes it (30s, 5m, 1h30m): whole seconds."""
    match = _DURATION.match(text.strip())
    if not text.strip() or match is None:
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a duration: write it as kubectl does, like 30s, 5m or 1h30m"
        )
    hours, minutes, secs = (int(g or 0) for g in match.groups())
    total = hours * 3600 + minutes * 60 + secs
    if total == 0:
        raise argparse.ArgumentTypeError(f"'{text}' is no time at all: give at least 1s")
    return total


@dataclass(frozen=True)
class JobKind:
    """A framework object `mkf job` can follow, and how its pods are found on a worker."""

    key: str  # what --kind takes
    kind: str
    api: Kind
    # The label selector of its pods, from the worker's copy of the object.
    pods: Callable[[Mapping[str, Any]], str]


def name_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def uid_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid", ""))


# The pod labels each controller sets: the Job controller its own uid (Kubernetes v1.36
# pkg/controller/job, batch.kubernetes.io/controller-uid); JobSet v0.12.0 the JobSet's name
# (api/jobset/v1alpha2 JobSetNameKey); LeaderWorkerSet v0.9.0 its name (api/.../v1
# SetNameLabelKey); Trainer v2 runs a TrainJob as the JobSet of the same name; the Training
# and MPI operators label by job name (training.kubeflow.org/job-name).
def _training(obj: Mapping[str, Any]) -> str:
    return f"training.kubeflow.org/job-name={name_of(obj)}"


JOB_KINDS: tuple[JobKind, ...] = (
    JobKind(
        "job",
        "Job",
        Kind("batch", "v1", "jobs", True),
        lambda o: f"batch.kubernetes.io/controller-uid={uid_of(o)}",
    ),
    JobKind(
        "jobset",
        "JobSet",
        Kind("jobset.x-k8s.io", "v1alpha2", "jobsets", True),
        lambda o: f"jobset.sigs.k8s.io/jobset-name={name_of(o)}",
    ),
    JobKind(
        "leaderworkerset",
        "LeaderWorkerSet",
        Kind("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", True),
        lambda o: f"leaderworkerset.sigs.k8s.io/name={name_of(o)}",
    ),
    JobKind(
        "trainjob",
        "TrainJob",
        Kind("trainer.kubeflow.org", "v1alpha1", "trainjobs", True),
        lambda o: f"jobset.sigs.k8s.io/jobset-name={name_of(o)}",
    ),
    *(
        JobKind(plural[:-1], kind, Kind("kubeflow.org", version, plural, True), _training)
        for plural, kind, version in (
            ("pytorchjobs", "PyTorchJob", "v1"),
            ("tfjobs", "TFJob", "v1"),
            ("xgboostjobs", "XGBoostJob", "v1"),
            ("paddlejobs", "PaddleJob", "v1"),
            ("jaxjobs", "JAXJob", "v1"),
            ("mpijobs", "MPIJob", "v2beta1"),
        )
    ),
)
KINDS_BY_KEY = {k.key: k for k in JOB_KINDS}
