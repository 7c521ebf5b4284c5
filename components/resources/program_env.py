"""The Python environment Pulumi runs this program in, and what a stack needs in it.

Pulumi.yaml names it (`runtime.options.virtualenv`, `.venv`). Pulumi's Python language host
lists every package in that environment that carries a Pulumi plugin, and the engine
installs each one's plugin before the program runs, whether the program uses it or not
(pulumi v3.259.0 sdk/python/cmd/pulumi-language-python/main.go `listPulumiPackageInfos`,
pkg/engine/plugins.go). The cloud SDKs would make every kind stack download the GCP, AWS
and EKS plugins, so they are installed there only for a stack with GKE or EKS clusters
(scripts/up.sh); the tests, linters and benchmarks have their own environment, `.venv-dev`
(scripts/test.sh).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import yaml

# Cluster provider -> the modules its Pulumi program imports (requirements-cloud.txt).
CLOUD_SDKS: dict[str, tuple[str, ...]] = {
    "gke": ("pulumi_gcp",),
    "eks": ("pulumi_aws", "pulumi_eks"),
}
# Cluster provider -> the credential plugin its kubeconfigs run (an exec entry) and how to
# get it. The stack's own kubeconfig of a GKE cluster runs gke-gcloud-auth-plugin
# (components/resources/clusters.py, GkeClusterComponent); pulumi-eks writes one that runs
# `aws eks get-token`. Without it, `up` creates the clusters and then fails at its first
# Kubernetes call, so the pre-flight asks for it first.
CREDENTIAL_PLUGINS: dict[str, tuple[str, str]] = {
    "gke": (
        "gke-gcloud-auth-plugin",
        "`gcloud components install gke-gcloud-auth-plugin`, or Debian's "
        "google-cloud-cli-gke-gcloud-auth-plugin package",
    ),
    "eks": ("aws", "the AWS CLI v2 (its kubeconfigs run `aws eks get-token`)"),
}


def missing_credential_plugins(
    providers: Iterable[str], which: Callable[[str], str | None] = shutil.which
) -> list[str]:
    """One phrase per credential plugin the clusters of `providers` need and PATH lacks."""
    missing = []
    for provider in sorted(set(providers)):
        if provider in CREDENTIAL_PLUGINS:
            command, how = CREDENTIAL_PLUGINS[provider]
            if which(command) is None:
                missing.append(f"{command}, which {provider} kubeconfigs run: install {how}")
    return missing


_FIND = (
    "import importlib.util, sys; "
    "print(*[m for m in sys.argv[1:] if not importlib.util.find_spec(m)])"
)


def program_env(project: Path) -> Path:
    """The virtualenv Pulumi.yaml gives the program, as a path."""
    settings = yaml.safe_load((project / "Pulumi.yaml").read_text()) or {}
    runtime = settings.get("runtime")  # `runtime: python` is valid too
    options = (runtime.get("options") if isinstance(runtime, dict) else None) or {}
    return project / str(options.get("virtualenv", ".venv"))


def program_path(project: Path) -> dict[str, str]:
    """PATH with the program's environment first, when there is one. The language host the
    project builds from its Go module when no release can be downloaded (tools/pulumi-
    language-python: the module proxy serves pulumi/sdk/v3 only at v3.79.0) takes no
    `virtualenv` option from the CLI and runs the first python3 on PATH; the released host
    reads Pulumi.yaml's option itself, so this changes nothing there."""
    bin_dir = program_env(project) / "bin"
    if not (bin_dir / "python").exists():
        return {}
    return {"PATH": os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")])}


def cloud_modules(providers: Iterable[str]) -> list[str]:
    return sorted({m for p in providers for m in CLOUD_SDKS.get(p, ())})


def missing_cloud_sdks(project: Path, providers: Iterable[str]) -> list[str]:
    """The cloud SDK modules `providers` need that the program's environment lacks (all of
    them when it does not exist yet: Pulumi would create it from requirements.txt alone)."""
    modules = cloud_modules(providers)
    if not modules:
        return []
    python = program_env(project) / "bin" / "python"
    if not python.exists():
        return modules
    found = subprocess.run(
        [str(python), "-c", _FIND, *modules],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    return found.stdout.split() if found.returncode == 0 else modules


def missing_message(
    stack: str, providers: Iterable[str], missing: Iterable[str], env: str = ".venv"
) -> str:
    clouds = sorted(p for p in set(providers) if p in CLOUD_SDKS)
    return (
        f"stack '{stack}' has {'/'.join(clouds)} clusters, and Pulumi's environment for this "
        f"program ({env}) lacks {', '.join(sorted(missing))}; install them with "
        f"`{env}/bin/python -m pip install -r requirements-cloud.txt`"
    )


def unneeded_cloud_sdks(project: Path, providers: Iterable[str]) -> list[str]:
    """Cloud SDK modules in the program's environment that `providers` do not use (left by
    a cloud stack, or by scripts/test.sh before the tests had their own environment)."""
    needed = set(cloud_modules(providers))
    every = cloud_modules(CLOUD_SDKS)
    absent = set(missing_cloud_sdks(project, CLOUD_SDKS))
    return [m for m in every if m not in needed and m not in absent]


def main(argv: list[str]) -> int:
    """`python -m components.resources.program_env PROVIDERS` (comma-separated, as
    scripts/stack_facts prints them): a note on stderr when Pulumi's environment holds cloud
    SDKs this stack does not use, whose plugins Pulumi would fetch anyway. Always exits 0:
    it informs."""
    if len(argv) != 1:
        print("usage: python -m components.resources.program_env PROVIDERS", file=sys.stderr)
        return 2
    root = Path(__file__).resolve().parents[2]
    extra = unneeded_cloud_sdks(root, argv[0].split(","))
    if extra:
        print(
            f"note: {program_env(root).name} holds {', '.join(extra)}, which this stack does not "
            "use; Pulumi fetches the plugin of every Pulumi package there. To drop them: "
            f"{program_env(root).name}/bin/python -m pip uninstall -y "
            + " ".join(m.replace("_", "-") for m in extra),
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
