"""Every upstream version and artifact this project installs, in one place.

Artifacts are fetched at deploy time from their official release locations; nothing
upstream is copied into this repository. `render` shows them as version + URL.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

KUEUE_VERSION = "v0.19.2"
# Kueue decodes its configuration strictly and knows only the gates of its own minor, so
# the gate table in kueue_gates.py is tied to this minor; other minors are refused.
KUEUE_SUPPORTED_MINOR = "v0.19."
# The releases `kueue.version` may name: those whose manifests, gates and CRDs this
# project was checked against (a version that was never released is a 404 at deploy time).
KUEUE_VERSIONS = (KUEUE_VERSION,)

KIND_VERSION = "v0.33.0"
# The CLI scripts/up.sh installs (scripts/env.sh PULUMI_VERSION): the release the real tier
# builds from tools/pulumi/go.mod and tests (the Go module proxy does not serve 3.272.0, the
# SDK's release in requirements.txt; a newer CLI runs an older SDK's program).
PULUMI_CLI_VERSION = "3.274.1"

# kind supports a node image only with the kind release that built it, and only by
# digest (kind v0.33.0 release notes, "Images pre-built for this release").
KIND_NODE_IMAGES: dict[str, str] = {
    "1.37": "kindest/node:v1.37.0@sha256:a1ed56cfb0e7b93589bdf97c8cd566405a265939e3620fc4f5de89adff580ae5",  # noqa: E501
    "1.36": "kindest/node:v1.36.4@sha256:099e049362a1526b2db71494e1947aae99bd16290d7c895f2b7ea312e3cbfaed",  # noqa: E501
    "1.35": "kindest/node:v1.35.8@sha256:07b2536e30b803ed61d1677a79df6115f798ce64c80f9e22f6ed45afd09323c0",  # noqa: E501
    "1.34": "kindest/node:v1.34.11@sha256:44e222ee2132dab25ff87301682f89eb82c7880ea3a1bf543bfe9708fd08d67d",  # noqa: E501
}
# Kueue 0.19 runs its e2e suite on 1.34-1.36 and defaults to 1.36.
DEFAULT_KUBERNETES_VERSION = "1.36"
# The newest Kubernetes minor this project knows (its newest kind node image); a newer one
# is refused until this table is updated.
NEWEST_KUBERNETES = max((tuple(map(int, v.split("."))) for v in KIND_NODE_IMAGES), default=(1, 36))
# Kueue v0.19.2 supports Kubernetes 1.29 or newer (site/content/en/docs/getting-started/
# installation.md at that tag).
KUEUE_MIN_KUBERNETES = (1, 29)
# The manager runs MultiKueue for batch Jobs, which needs Job `spec.managedBy`: the
# JobManagedBy gate is alpha (off) in 1.30-1.31 and beta, on by default, from 1.32
# (Kubernetes feature-gates reference); GKE and EKS do not let one turn alpha gates on.
MANAGER_MIN_KUBERNETES = (1, 32)
# The oldest minor each provider still creates clusters of, as of 2026-11 (release
# calendars: EKS "Kubernetes version lifecycle" - 1.31 leaves extended support on
# 2026-11-26, 1.32 on 2027-03-23; GKE "release schedule" - up to 24 months from Regular
# availability, which puts 1.31's end in 2026-10). Existing clusters need only Kueue's
# minimum; kind only has the images above.
PROVIDER_MIN_KUBERNETES: dict[str, tuple[int, int]] = {
    "gke": (1, 32),
    "eks": (1, 32),
    "existing": KUEUE_MIN_KUBERNETES,
    "kind": KUEUE_MIN_KUBERNETES,
}

CLUSTER_INVENTORY_API_VERSION = "v0.1.3"
SECRETREADER_PLUGIN_IMAGE = (
    f"registry.k8s.io/cluster-inventory-api/secretreader:{CLUSTER_INVENTORY_API_VERSION}"
)
SECRETREADER_PLUGIN_PATH = "/plugins/bin/secretreader-plugin"
# The official plugin images are built FROM scratch (cluster-inventory-api
# hack/Dockerfile.plugin): made for image volumes, with no shell or `cp` for an init
# container to copy the plugin out. Kueue's own e2e copies it below Kubernetes 1.35 from an
# alpine build of the same plugin (hack/testing/secretreader/Dockerfile), but that image is
# built only for a local kind cluster (Makefile at v0.19.2, lines 602-617:
# secretreader-plugin-image-build and kind-secretreader-plugin-image-build, `--load`; none of
# the push targets, image-pushing-periodic or image-pushing-postsubmit, includes it), so
# nobody publishes it: the init container takes only an image the user names.
SHELL_LESS_PLUGIN_IMAGES = ("registry.k8s.io/cluster-inventory-api/",)
KUEUE_PLUGIN_DOCKERFILE = (
    "https://github.com/kubernetes-sigs/kueue/blob/v0.19.2/hack/testing/secretreader/Dockerfile"
)
# Image volumes (mounting an OCI image as a volume) are usable from Kubernetes 1.35.
IMAGE_VOLUME_MIN_KUBERNETES = (1, 35)


@dataclass(frozen=True)
class Bundle:
    """An upstream install: what, which version, from where, and how it is applied."""

    name: str
    version: str
    url: str
    # "manifests": a YAML file applied server-side; "kustomize": a remote kustomization.
    method: str
    namespace: str | None = None
    # Set on the install's main pod template as it is applied (Kueue: the hash of what it
    # reads at start); shown by `render`, so `render --diff` shows when the pods restart.
    pod_annotations: tuple[tuple[str, str], ...] = ()
    # kustomize: objects of the kustomization left out, by name (regular expressions), when
    # another bundle installs them (components/upstream/releases.py, local_kustomization).
    without: tuple[str, ...] = ()
    # kustomize: strategic-merge patches of the kustomization's objects, each (kind, name,
    # patch as YAML), where the release's defaults clash with another bundle's.
    patches: tuple[tuple[str, str, str], ...] = ()
    # kustomize: the SHA-256 of the kustomization's source tree in the Go module of the tag
    # (components/upstream/gomodule.py, tree_sha256 and KUSTOMIZATIONS): what is built is
    # that tree, never the remote URL.
    source_sha256: str = ""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "version": self.version,
            "url": self.url,
            "method": self.method,
        }
        if self.namespace:
            out["namespace"] = self.namespace
        if self.pod_annotations:
            out["podTemplateAnnotations"] = dict(self.pod_annotations)
        if self.without:
            out["without"] = list(self.without)
        if self.patches:
            out["patches"] = [{"kind": k, "name": n, "patch": p} for k, n, p in self.patches]
        return out


def kueue_bundle(version: str, pod_annotations: Mapping[str, str] | None = None) -> Bundle:
    return Bundle(
        "kueue",
        version,
        f"https://github.com/kubernetes-sigs/kueue/releases/download/{version}/manifests.yaml",
        "manifests",
        "kueue-system",
        tuple(sorted((pod_annotations or {}).items())),
    )


def clusterprofile_crd_bundle() -> Bundle:
    ref = CLUSTER_INVENTORY_API_VERSION
    return Bundle(
        "clusterprofile-crd",
        ref,
        "https://raw.githubusercontent.com/kubernetes-sigs/cluster-inventory-api/"
        f"{ref}/config/crd/bases/multicluster.x-k8s.io_clusterprofiles.yaml",
        "manifests",
    )


MPI_OPERATOR_VERSION = "v0.8.2"
MPI_OPERATOR_URL = (
    f"https://raw.githubusercontent.com/kubeflow/mpi-operator/{MPI_OPERATOR_VERSION}/deploy/"
    "v2beta1/mpi-operator.yaml"
)

# The SHA-256 of each pinned artifact's whole text. A download, or the same artifact made
# from its Go module (components/upstream/gomodule.py), is used only when it matches.
PINNED_SHA256: dict[str, str] = {
    # Kueue v0.19.2 release manifests.yaml: kustomize v5.8.1 build of config/default.
    kueue_bundle(KUEUE_VERSION).url: (
        "88881eb50734eb920b67486ebc2aa978ed325e1b12d99b22fc51a6d7e9e4d370"
    ),
    # cluster-inventory-api v0.1.3, config/crd/bases/multicluster.x-k8s.io_clusterprofiles.yaml.
    clusterprofile_crd_bundle().url: (
        "6ff09e298672dac644e85926774e1e5f9768c8a2c94b36e54408f737e05bd1c6"
    ),
    # MPI Operator v0.8.2, deploy/v2beta1/mpi-operator.yaml: a file checked in at the tag,
    # served as is by raw.githubusercontent.com; this is the digest of that file in the Go
    # module github.com/kubeflow/mpi-operator@v0.8.2 (whose zip tools/go.sum pins).
    MPI_OPERATOR_URL: "a7eafe901bebde1410ae0448c2d1ada214a64b2686f6aa44e74eff978573033f",
    # Release manifests that `make artifacts` builds with kustomize at release time (JobSet
    # v0.12.0 and LWS v0.9.0 with kustomize v5.2.1, AppWrapper v1.2.2 with its go.mod's):
    # the digests of that recipe run on the Go module of the tag with the pinned kustomize
    # v5.8.1 (components/upstream/gomodule.py, release_build), the same recipe that gives
    # Kueue's release byte for byte (above). A download is used when it has these bytes;
    # otherwise the module build is.
    "https://github.com/kubernetes-sigs/jobset/releases/download/v0.12.0/manifests.yaml": (
        "a41aaf12dd0b7b0a3d626b8d6107f32c3dc889d7e7830adc46b8cdb77a8963bb"
    ),
    "https://github.com/kubernetes-sigs/lws/releases/download/v0.9.0/manifests.yaml": (
        "9d0d36fbfd13240a04c80029c154e0fa1c4b2e09e2611400b44550e1059fe12f"
    ),
    "https://github.com/project-codeflare/appwrapper/releases/download/v1.2.2/install.yaml": (
        "e54b18f6cf4c91ddd9129f674a43b1a7e5c8b77c3e41cfb46e76cdf8bf852f8d"
    ),
}
