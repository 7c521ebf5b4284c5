"""The real binaries, built from the pinned Go modules in `tools/go.mod` into `.tools/bin`.

One module pins them all, so a build is reproducible from go.sum: Kubernetes v1.36 because
Kueue v0.19.2 is tested against it (`hack/make/test.mk` at v0.19.2: `E2E_K8S_VERSION ?= 1.36`,
`ENVTEST_K8S_VERSION ?= 1.36`) and its own go.mod requires k8s.io/kubernetes v1.36.0; the
staging modules (k8s.io/api, ...) are required at the matching v0.36 release, the usual way to
build k8s.io/kubernetes as a dependency (its go.mod replaces them with ./staging paths, which
only apply inside its own repository).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOLS_MODULE = ROOT / "tools"
BIN_DIR = Path(os.environ.get("MKF_TOOLS_BIN") or ROOT / ".tools" / "bin")


@dataclass(frozen=True)
class Tool:
    name: str  # the binary's file name in BIN_DIR
    package: str  # the main package, listed in tools/go.mod's tool block
    module: str  # the module whose pinned version it is built at
    # -X flags that stamp the version, as each project's own release build does; "{version}"
    # and "{minor}" are filled from the pinned version.
    stamps: tuple[str, ...] = ()

    def version(self) -> str:
        return module_versions().get(self.module, "?")

    def ldflags(self) -> str:
        version = self.version()
        parts = version.lstrip("v").split(".")
        minor = parts[1] if len(parts) > 1 else "0"
        return " ".join(f"-X {stamp.format(version=version, minor=minor)}" for stamp in self.stamps)


# What `/version` answers and what clients compare against: without them a binary built from
# a module says v0.0.0-master (k8s.io/component-base version/base.go at v0.36.2; Kubernetes'
# hack/lib/version.sh sets them for a release; Kueue's Makefile at v0.19.2 sets LD_FLAGS).
KUBE_STAMPS = (
    "k8s.io/component-base/version.gitVersion={version}",
    "k8s.io/component-base/version.gitMajor=1",
    "k8s.io/component-base/version.gitMinor={minor}",
    "k8s.io/component-base/version.gitTreeState=clean",
)
KUEUE_STAMPS = ("sigs.k8s.io/kueue/pkg/version.GitVersion={version}",)


KUSTOMIZE = "sigs.k8s.io/kustomize/kustomize/v5"
TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        Tool("etcd", "go.etcd.io/etcd/server/v3", "go.etcd.io/etcd/server/v3"),
        Tool(
            "kube-apiserver",
            "k8s.io/kubernetes/cmd/kube-apiserver",
            "k8s.io/kubernetes",
            KUBE_STAMPS,
        ),
        Tool(
            "kube-controller-manager",
            "k8s.io/kubernetes/cmd/kube-controller-manager",
            "k8s.io/kubernetes",
            KUBE_STAMPS,
        ),
        Tool("kueue", "sigs.k8s.io/kueue/cmd/kueue", "sigs.k8s.io/kueue", KUEUE_STAMPS),
        # Kueue's release manifest is `kustomize build config/default` at the tag, with the
        # kustomize its hack/tools/go.mod pins (v5.8.1 at v0.19.2): components/upstream/gomodule.py.
        Tool(
            "kustomize", "sigs.k8s.io/kustomize/kustomize/v5", "sigs.k8s.io/kustomize/kustomize/v5"
        ),
    )
}
# What the loopback fleet runs; the Pulumi CLI and plugins are built on demand only.
CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager", "kueue")


class ToolchainError(Exception):
    """A one-line reason the binaries cannot be built or found, with what to do."""


def module_versions() -> dict[str, str]:
    """Each required module's pinned version, read from tools/go.mod."""
    versions: dict[str, str] = {}
    in_block = False
    for raw in (TOOLS_MODULE / "go.mod").read_text().splitlines():
        line = raw.split("//")[0].strip()
        if line.startswith("require ("):
            in_block = True
            continue
        if in_block and line == ")":
            in_block = False
            continue
        if line.startswith("require "):
            line = line.removeprefix("require ").strip()
        elif not in_block:
            continue
        parts = line.split()
        if len(parts) == 2:
            versions[parts[0]] = parts[1]
    return versions


def go_binary() -> str:
    go = shutil.which("go")
    if go is None:
        raise ToolchainError(
            "go is not on PATH: the real engines are built from Go modules; install Go 1.26 or "
            "newer (https://go.dev/doc/install, or your distribution's golang package) and retry"
        )
    return go


def _fingerprint(tool: Tool) -> str:
    """What a build depends on: the pinned module set (go.mod, go.sum), the Go release and
    the tool's own build flags."""
    digest = hashlib.sha256(tool.ldflags().encode())
    for name in ("go.mod", "go.sum"):
        digest.update((TOOLS_MODULE / name).read_bytes())
    digest.update(
        subprocess.run(
            [go_binary(), "env", "GOVERSION"], capture_output=True, text=True, check=False
        ).stdout.encode()
    )
    return digest.hexdigest()[:16]


def _stamp(name: str) -> Path:
    return BIN_DIR / f".{name}.built"


def is_built(name: str) -> bool:
    """True when the binary exists and was built from the current pins."""
    stamp = _stamp(name)
    return (
        (BIN_DIR / name).is_file()
        and stamp.is_file()
        and stamp.read_text() == _fingerprint(TOOLS[name])
    )


def path_of(name: str) -> Path:
    return BIN_DIR / name


def build(
    names: list[str] | None = None, *, log: Callable[[str], object] = print
) -> dict[str, Path]:
    """Builds each named tool that is not current; Go's module and build caches are reused,
    so a rebuild after a clean checkout links but does not recompile."""
    go = go_binary()
    wanted = names or list(CONTROL_PLANE)
    unknown = [n for n in wanted if n not in TOOLS]
    if unknown:
        raise ToolchainError(
            f"unknown tool {', '.join(unknown)}: choose from {', '.join(sorted(TOOLS))}"
        )
    BIN_DIR.mkdir(parents=True, exist_ok=True)
    built: dict[str, Path] = {}
    for name in wanted:
        tool = TOOLS[name]
        target = path_of(name)
        if is_built(name):
            log(f"  {name:<26} {tool.version():<12} up to date")
            built[name] = target
            continue
        log(f"  {name:<26} {tool.version():<12} building {tool.package} ...")
        started = time.monotonic()
        result = subprocess.run(
            [go, "build", "-trimpath", "-ldflags", tool.ldflags(), "-o", str(target), tool.package],
            cwd=TOOLS_MODULE,
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "GOFLAGS": os.environ.get("GOFLAGS", "") + " -mod=readonly"},
        )
        if result.returncode != 0:
            tail = result.stderr.strip().splitlines()[-5:]
            raise ToolchainError(
                f"go build {tool.package} failed in {TOOLS_MODULE}: " + " | ".join(tail)
            )
        _stamp(name).write_text(_fingerprint(tool))
        log(f"  {name:<26} {tool.version():<12} built in {time.monotonic() - started:.0f} s")
        built[name] = target
    return built


def require(names: list[str]) -> dict[str, Path]:
    """The named binaries, or a ToolchainError saying how to build them."""
    missing = [n for n in names if not is_built(n)]
    if missing:
        raise ToolchainError(
            f"{', '.join(missing)} not built from the current pins: run "
            f"`python -m loopback build` (needs Go)"
        )
    return {n: path_of(n) for n in names}
