"""The real binaries, built from the pinned Go modules under `tools/` into `.tools/bin`.

One module (`tools/go.mod`) pins the control plane, so a build is reproducible from go.sum:
Kubernetes v1.36 because Kueue v0.19.2 is tested against it (`hack/make/test.mk` at v0.19.2:
`E2E_K8S_VERSION ?= 1.36`, `ENVTEST_K8S_VERSION ?= 1.36`) and its own go.mod requires
k8s.io/kubernetes v1.36.0; the staging modules (k8s.io/api, ...) are required at the matching
v0.36 release, the usual way to build k8s.io/kubernetes as a dependency (its go.mod replaces
them with ./staging paths, which only apply inside its own repository).

The Pulumi CLI, its Python language host and the kubernetes provider have a module each
(`tools/pulumi`, `tools/pulumi-language-python`, `tools/pulumi-kubernetes`; the comments in
their go.mod say why, and which versions the module proxy serves), and the launchers the CLI
runs for a Python program come from the Python SDK's Go module at the version
requirements.txt pins.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOLS_MODULE = ROOT / "tools"
PULUMI_MODULE = TOOLS_MODULE / "pulumi"
LANGUAGE_HOST_MODULE = TOOLS_MODULE / "pulumi-language-python"
KUBERNETES_PROVIDER_MODULE = TOOLS_MODULE / "pulumi-kubernetes"
BIN_DIR = Path(os.environ.get("MKF_TOOLS_BIN") or ROOT / ".tools" / "bin")
# Writable copies of modules whose packages need generated files before they build.
BUILD_DIR = BIN_DIR.parent / "build"


def shared_cache() -> Path | None:
    """This machine's copies of the binaries built here, by the fingerprint of what each was
    built from (_fingerprint): a new clone, or a copy of the project, takes its binaries from
    there instead of linking each again (Go caches compiled packages, not the linked binary:
    2 to 10 s of CPU a binary, two minutes for the 24 the tiers use). MKF_BUILD_CACHE names
    another folder, or "off"; `rm -rf` of the folder is always safe."""
    named = os.environ.get("MKF_BUILD_CACHE", "")
    if named == "off":
        return None
    if named:
        return Path(named)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "multikueue-fleet" / "bin"


@dataclass(frozen=True)
class Tool:
    name: str  # the binary's file name in BIN_DIR
    package: str  # the main package, listed in tools/go.mod's tool block
    module: str  # the module whose pinned version it is built at
    # -X flags that stamp the version, as each project's own release build does; "{version}"
    # and "{minor}" are filled from the pinned version.
    stamps: tuple[str, ...] = ()
    # The module (a directory under tools/) whose go.mod pins it and where it is built.
    module_dir: Path = TOOLS_MODULE
    # The release the pinned version is, when the module's version is not the release's own:
    # a pseudo-version (a module without tags of its own, pinned at the commit of a release
    # tag), or Prometheus' module tags (v0.316.0 is release 3.16.0).
    release: str | None = None
    # A `//go:generate` program in the main package's directory that writes files the
    # package embeds: run (with VERSION set, as the project's Makefile does) in a writable
    # copy of the module before the build.
    generator: str | None = None
    # Build tags, and whether cgo is on (off by default: static binaries).
    tags: str = ""
    cgo: bool = False

    def version(self) -> str:
        return self.release or module_versions(self.module_dir).get(self.module, "?")

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
LWS_STAMPS = ("sigs.k8s.io/lws/pkg/version.GitVersion={version}",)
# pulumi/pulumi's Makefile and sdk/python/Makefile stamp the CLI and the language host so;
# pulumi-kubernetes' Makefile stamps the provider (VERSION_PATH, without a leading v).
PULUMI_STAMPS = ("github.com/pulumi/pulumi/sdk/v3/go/common/version.Version={version}",)
KUBERNETES_PROVIDER_STAMPS = (
    "github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version={version}",
)
KUBERNETES_PROVIDER = "github.com/pulumi/pulumi-kubernetes/provider/v4"


PROMETHEUS = "github.com/prometheus/prometheus"
# promtool checks and unit-tests the fleet's alerting rules (monitoring/, tests/real). A module
# of its own: Prometheus' build list is not the control plane's. Prometheus' releases are
# module tags v0.3XX.0 (VERSION at v0.316.0 says 3.16.0). Its .promu.yml at that tag stamps a
# release's github.com/prometheus/common/version; only Version is stamped here: Revision is the
# tag's commit, which the module proxy does not give, and BuildUser/BuildDate would make every
# build differ. Its build tags are netgo and builtinassets; the latter selects the web UI's
# embedded assets (web/ui), a package promtool does not import, so it is left out.
PROMTOOL = Tool(
    "promtool",
    f"{PROMETHEUS}/cmd/promtool",
    PROMETHEUS,
    ("github.com/prometheus/common/version.Version={version}",),
    TOOLS_MODULE / "promtool",
    release="3.16.0",
    tags="netgo",
)

# KWOK v0.8.0's node and pod simulator: the loopback fleet's workers with nodes and pods that
# run for a set time without a kubelet (loopback/kwok.py; issue 39's fleet for dispatch
# quality). A module of its own: KWOK pins the k8s.io libraries at v0.36.1. Stamped as its
# hack/releases.sh stamps a release (LDFLAGS: pkg/consts.Version).
KWOK = Tool(
    "kwok",
    "sigs.k8s.io/kwok/cmd/kwok",
    "sigs.k8s.io/kwok",
    ("sigs.k8s.io/kwok/pkg/consts.Version={version}",),
    TOOLS_MODULE / "kwok",
)

KIND_TOOLS_DIR = TOOLS_MODULE / "kind-tier"
CNI_PLUGINS = "github.com/containernetworking/plugins"
CONTAINERD = "github.com/containerd/containerd/v2"
# The kind tier (kindnode/): kind itself, what kind v0.33.0's base image builds
# (images/base/Dockerfile: containerd with its BUILDTAGS, runc with cgo and seccomp, crictl,
# four CNI plugins, all at the versions its ARGs pin), CoreDNS at the version kubeadm v1.36
# deploys (cmd/kubeadm/app/constants CoreDNSVersion), and the controllers the fleet's
# stacks deploy that tools/go.mod does not build. A module each (tools/kind-tier/<name>): one
# build list would raise their dependencies above what each release pins.
KIND_TIER_TOOLS = (
    Tool("kind", "sigs.k8s.io/kind", "sigs.k8s.io/kind", (), KIND_TOOLS_DIR / "kind"),
    *(
        Tool(
            name,
            f"{CONTAINERD}/cmd/{name}",
            CONTAINERD,
            (f"{CONTAINERD}/version.Version={{version}}",),
            KIND_TOOLS_DIR / "containerd",
            tags="no_aufs no_zfs no_btrfs no_devmapper",
            # containerd's Makefile builds the shim static and without gRPC's tracing.
            cgo=name != "containerd-shim-runc-v2",
        )
        for name in ("containerd", "ctr", "containerd-shim-runc-v2")
    ),
    Tool(
        "runc",
        "github.com/opencontainers/runc",
        "github.com/opencontainers/runc",
        ("main.version={version}",),
        KIND_TOOLS_DIR / "runc",
        tags="seccomp urfave_cli_no_docs",
        cgo=True,
    ),
    Tool(
        "crictl",
        "sigs.k8s.io/cri-tools/cmd/crictl",
        "sigs.k8s.io/cri-tools",
        ("sigs.k8s.io/cri-tools/pkg/version.Version={version}",),
        KIND_TOOLS_DIR / "cri-tools",
    ),
    *(
        Tool(
            f"cni-{path.rsplit('/', 1)[1]}",
            f"{CNI_PLUGINS}/plugins/{path}",
            CNI_PLUGINS,
            (),
            KIND_TOOLS_DIR / "cni-plugins",
        )
        for path in ("ipam/host-local", "main/loopback", "main/ptp", "meta/portmap")
    ),
    Tool(
        "coredns",
        "github.com/coredns/coredns",
        "github.com/coredns/coredns",
        (),
        KIND_TOOLS_DIR / "coredns",
    ),
    Tool(
        "jobset",
        "sigs.k8s.io/jobset",
        "sigs.k8s.io/jobset",
        (),
        KIND_TOOLS_DIR / "jobset",
    ),
    # What registry.k8s.io/cluster-inventory-api/secretreader holds (hack/Dockerfile.plugin
    # at v0.1.3: CGO_ENABLED=0, `-s -w`, ./plugins/secretreader/cmd/plugin).
    Tool(
        "secretreader-plugin",
        "sigs.k8s.io/cluster-inventory-api/plugins/secretreader/cmd/plugin",
        "sigs.k8s.io/cluster-inventory-api",
        (),
        KIND_TOOLS_DIR / "cluster-inventory-api",
    ),
    # The kind nodes' registry mirror (kindnode/registry.py): what the fleet's upstream image
    # names resolve to on a machine without a registry.
    Tool(
        "registry",
        "github.com/distribution/distribution/v3/cmd/registry",
        "github.com/distribution/distribution/v3",
        ("github.com/distribution/distribution/v3/version.version={version}",),
        KIND_TOOLS_DIR / "registry",
    ),
)
KUSTOMIZE = "sigs.k8s.io/kustomize/kustomize/v5"
# What a kind node image holds of Kubernetes besides kube-apiserver and
# kube-controller-manager (kind v0.33.0 pkg/build/nodeimage/internal/kube/builder_remote.go
# lists the same binaries and images).
NODE_KUBERNETES = ("kubelet", "kubeadm", "kubectl", "kube-scheduler", "kube-proxy")
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
        # A kind node's Kubernetes (kindnode/, the kind tier): the same k8s.io/kubernetes
        # build as the control plane above, so one compile serves both tiers.
        *(
            Tool(name, f"k8s.io/kubernetes/cmd/{name}", "k8s.io/kubernetes", KUBE_STAMPS)
            for name in NODE_KUBERNETES
        ),
        Tool("kueue", "sigs.k8s.io/kueue/cmd/kueue", "sigs.k8s.io/kueue", KUEUE_STAMPS),
        # Kueue's release manifest is `kustomize build config/default` at the tag, with the
        # kustomize its hack/tools/go.mod pins (v5.8.1 at v0.19.2): components/upstream/gomodule.py.
        Tool(
            "kustomize", "sigs.k8s.io/kustomize/kustomize/v5", "sigs.k8s.io/kustomize/kustomize/v5"
        ),
        # The LeaderWorkerSet controller, at the version the project installs and Kueue v0.19.2
        # requires; stamped as its Makefile does (LD_FLAGS at v0.9.0). JobSet v0.12.0 builds
        # the same way but cannot run beside others as a process: loopback/operators.py.
        Tool("lws", "sigs.k8s.io/lws/cmd", "sigs.k8s.io/lws", LWS_STAMPS),
        Tool(
            "pulumi",
            "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi",
            "github.com/pulumi/pulumi/pkg/v3",
            PULUMI_STAMPS,
            PULUMI_MODULE,
        ),
        Tool(
            "pulumi-language-python",
            "github.com/pulumi/pulumi/sdk/v3/python/cmd/pulumi-language-python",
            "github.com/pulumi/pulumi/sdk/v3",
            PULUMI_STAMPS,
            LANGUAGE_HOST_MODULE,
        ),
        # The commit tagged v4.25.0 in pulumi/pulumi-kubernetes (`git describe` of
        # f47bc2d6f199): its tags are vX and sdk/vX only, so the provider module has only
        # pseudo-versions. main.go embeds schema-embed.json and terraform-mapping-embed.json,
        # which its `//go:generate go run ./generate.go` writes from the module's schema.json
        # and terraform-mapping.json (pulumi-kubernetes Makefile at v4.25.0, target provider).
        Tool(
            "pulumi-resource-kubernetes",
            f"{KUBERNETES_PROVIDER}/cmd/pulumi-resource-kubernetes",
            KUBERNETES_PROVIDER,
            KUBERNETES_PROVIDER_STAMPS,
            KUBERNETES_PROVIDER_MODULE,
            release="4.25.0",
            generator="generate.go",
        ),
        PROMTOOL,
        KWOK,
        *KIND_TIER_TOOLS,
    )
}
# The framework controllers the loopback fleet can run (python -m loopback up
# --framework-controllers); built on demand.
FRAMEWORK_CONTROLLERS = ("lws",)
# What the loopback fleet runs; the Pulumi CLI and plugins are built on demand only.
CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager", "kueue")
# The real Pulumi engine for a Python program on Kubernetes: `PATH=.tools/bin:$PATH pulumi`.
PULUMI_ENGINE = ("pulumi", "pulumi-language-python", "pulumi-resource-kubernetes")
PYTHON_SDK = "github.com/pulumi/pulumi/sdk/v3"
# What else the CLI runs for a Python program, shipped in the Python SDK's Go module and not
# in its PyPI package: the dynamic-provider plugin (`pulumi-python`, found on PATH like any
# plugin) and the program runner the language host execs from its own directory. Installed
# with the language host.
SDK_SCRIPTS = {
    "pulumi-resource-pulumi-python": "python/dist/pulumi-resource-pulumi-python",
    "pulumi-language-python-exec": "python/cmd/pulumi-language-python-exec",
}


class ToolchainError(Exception):
    """A one-line reason the binaries cannot be built or found, with what to do."""


def module_versions(module_dir: Path = TOOLS_MODULE) -> dict[str, str]:
    """Each required module's pinned version, read from a tools module's go.mod."""
    versions: dict[str, str] = {}
    in_block = False
    for raw in (module_dir / "go.mod").read_text().splitlines():
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
    digest = hashlib.sha256(f"{tool.ldflags()}|{tool.tags}|{tool.cgo}".encode())
    for name in ("go.mod", "go.sum"):
        digest.update((tool.module_dir / name).read_bytes())
    digest.update(_go_version().encode())
    return digest.hexdigest()[:16]


@functools.cache
def _go_version() -> str:
    return subprocess.run(
        [go_binary(), "env", "GOVERSION"], capture_output=True, text=True, check=False
    ).stdout


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


def _go(go: str, args: list[str], cwd: Path, *, cgo: bool = False) -> str:
    """A go command; its stdout, or a ToolchainError with the end of what it said."""
    result = subprocess.run(
        [go, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        # Static binaries, as Kubernetes' and Pulumi's releases are: the kind tier copies them
        # into node and component images that need not share this machine's libc.
        env={
            **os.environ,
            "GOFLAGS": os.environ.get("GOFLAGS", "") + " -mod=readonly",
            "CGO_ENABLED": "1" if cgo else "0",
        },
    )
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-5:]
        raise ToolchainError(f"go {' '.join(args[:2])} failed in {cwd}: " + " | ".join(tail))
    return result.stdout


def module_source(go: str, module: str, version: str, cwd: Path) -> Path:
    """The pinned module's files in Go's module cache (downloaded and checked against go.sum
    and the checksum database when not there yet)."""
    info = json.loads(_go(go, ["mod", "download", "-json", f"{module}@{version}"], cwd))
    if info.get("Error") or not info.get("Dir"):
        raise ToolchainError(
            f"{module}@{version} cannot be downloaded: {info.get('Error', 'no directory')}; the "
            "Go module proxy must serve it (GOPROXY)"
        )
    return Path(info["Dir"])


def _with_generated_files(go: str, tool: Tool) -> Path:
    """A build module under BUILD_DIR for a tool whose package embeds generated files: the
    tool's go.mod, its module replaced by a writable copy of the pinned version (the module
    cache is read-only, and `go build -overlay` may not replace files there), in which the
    package's own generator has written those files. Returns where to build."""
    root = BUILD_DIR / tool.name
    shutil.rmtree(root, ignore_errors=True)
    copy = root / "module"
    pinned = module_versions(tool.module_dir)[tool.module]
    shutil.copytree(module_source(go, tool.module, pinned, tool.module_dir), copy)
    for path in [copy, *copy.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    go_mod = (tool.module_dir / "go.mod").read_text()
    (root / "go.mod").write_text(f"{go_mod}\nreplace {tool.module} => ./module\n")
    shutil.copyfile(tool.module_dir / "go.sum", root / "go.sum")
    package_dir = copy / tool.package.removeprefix(f"{tool.module}/")
    generator = root / "generator"
    source = f"./{package_dir.relative_to(root)}/{tool.generator}"
    _go(go, ["build", "-o", str(generator), source], root)
    result = subprocess.run(
        [str(generator)],
        cwd=package_dir,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "VERSION": tool.version()},
    )
    if result.returncode != 0:
        raise ToolchainError(
            f"{tool.generator} of {tool.package} failed: {result.stderr.strip()[-300:]}"
        )
    return root


def python_sdk_version() -> str:
    """The Python SDK requirements.txt pins (pulumi==X)."""
    found = re.search(r"^pulumi==(\S+)", (ROOT / "requirements.txt").read_text(), re.M)
    if found is None:
        raise ToolchainError("requirements.txt pins no `pulumi==VERSION`: pin the Python SDK")
    return found.group(1)


def install_sdk_scripts(go: str) -> dict[str, Path]:
    """SDK_SCRIPTS copied into BIN_DIR from the Python SDK's Go module at the version the
    project's Python SDK has."""
    source = module_source(go, PYTHON_SDK, f"v{python_sdk_version()}", TOOLS_MODULE)
    installed = {}
    for name, inside in SDK_SCRIPTS.items():
        target = path_of(name)
        target.unlink(missing_ok=True)
        shutil.copyfile(source / inside, target)
        target.chmod(0o755)
        installed[name] = target
    return installed


def _from_shared_cache(tool: Tool, target: Path) -> bool:
    """The binary of the same fingerprint copied from the machine's cache, stamped as built;
    False when the cache has none (or is off). A copy, not a link: nothing done to one
    clone's binary reaches the cache or another clone."""
    cache = shared_cache()
    if cache is None:
        return False
    fingerprint = _fingerprint(tool)
    cached = cache / fingerprint / tool.name
    if not cached.is_file():
        return False
    partial = target.with_name(f".{tool.name}.copying-{os.getpid()}")
    shutil.copy2(cached, partial)
    os.replace(partial, target)
    _stamp(tool.name).write_text(fingerprint)
    return True


def _into_shared_cache(tool: Tool, target: Path, *, only_if_missing: bool = False) -> None:
    """A copy of a binary just built (or found current, where the cache lacks it), for the
    next clone; a cache that cannot be written (a read-only home) costs nothing but the
    next build."""
    cache = shared_cache()
    if cache is None:
        return
    folder = cache / _fingerprint(tool)
    if only_if_missing and (folder / tool.name).is_file():
        return
    partial = folder / f".{tool.name}.copying-{os.getpid()}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy2(target, partial)
        os.replace(partial, folder / tool.name)
    except OSError:
        partial.unlink(missing_ok=True)


def build(
    names: list[str] | None = None, *, log: Callable[[str], object] = print
) -> dict[str, Path]:
    """Builds each named tool that is not current; Go's module and build caches are reused,
    so a rebuild after a clean checkout links but does not recompile. With the Python
    language host come the SDK's launchers (SDK_SCRIPTS)."""
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
            _into_shared_cache(tool, target, only_if_missing=True)
            log(f"  {name:<26} {tool.version():<12} up to date")
        elif _from_shared_cache(tool, target):
            log(f"  {name:<26} {tool.version():<12} from this machine's build cache")
        else:
            log(f"  {name:<26} {tool.version():<12} building {tool.package} ...")
            started = time.monotonic()
            where = _with_generated_files(go, tool) if tool.generator else tool.module_dir
            tags = ["-tags", tool.tags] if tool.tags else []
            _go(
                go,
                [
                    "build",
                    "-trimpath",
                    *tags,
                    "-ldflags",
                    tool.ldflags(),
                    "-o",
                    str(target),
                    tool.package,
                ],
                where,
                cgo=tool.cgo,
            )
            _stamp(name).write_text(_fingerprint(tool))
            _into_shared_cache(tool, target)
            log(f"  {name:<26} {tool.version():<12} built in {time.monotonic() - started:.0f} s")
        built[name] = target
        if name == "pulumi-language-python":
            built.update(install_sdk_scripts(go))
    return built


def require(names: list[str]) -> dict[str, Path]:
    """The named binaries, or a ToolchainError saying how to build them."""
    missing = [n for n in names if not is_built(n)]
    if missing:
        raise ToolchainError(
            f"{', '.join(missing)} not built from the current pins: run "
            f"`python -m loopback build {' '.join(missing)}` (needs Go)"
        )
    return {n: path_of(n) for n in names}
