#!/usr/bin/env bash
# Shared by up.sh and down.sh: the tool pins, installing them into .tools/bin, and the
# local Pulumi backend. Sourced, not run.

# One place for the tool pins; components/model/versions.py holds the same numbers for Python.
KIND_VERSION="v0.33.0"
PULUMI_VERSION="3.274.1"
# The Kubernetes the project builds (tools/go.mod's k8s.io/kubernetes, the kind node image's).
KUBECTL_VERSION="v1.36.4"
# The dev stack's passphrase (its salt is committed in stacks/Pulumi.dev.yaml).
DEV_PASSPHRASE="multikueue-fleet-dev"
TOOLS="${MKF_TOOLS_DIR:-$ROOT/.tools/bin}"

# A download folder in use (install_binary, install_pulumi) goes with an error, too.
DOWNLOADS=""
die() {
  [ -z "$DOWNLOADS" ] || rm -rf "$DOWNLOADS"
  printf 'error: %s\n' "$*" >&2
  exit 1
}
# Each step's heading, after the time the one before it took (a first run builds a lot; the
# times say where it went).
STEP_STARTED=""
step() {
  [ -z "$STEP_STARTED" ] || printf '   (%d s)\n' "$((SECONDS - STEP_STARTED))"
  STEP_STARTED=$SECONDS
  printf '\n== %s\n' "$*"
}

[ -f "$STACK_FILE" ] || die "no stack file $STACK_FILE; stacks are: $(ls stacks | sed -n 's/^Pulumi\.\(.*\)\.yaml$/\1/p' | tr '\n' ' ')"

platform() {
  local os arch
  os="$(uname -s | tr '[:upper:]' '[:lower:]')"
  arch="$(uname -m)"
  case "$arch" in
    x86_64|amd64) arch=amd64 ;;
    aarch64|arm64) arch=arm64 ;;
    *) die "unsupported CPU architecture $arch" ;;
  esac
  case "$os" in linux|darwin) ;; *) die "unsupported OS $os (use Linux or macOS)" ;; esac
  echo "$os $arch"
}

sha256_of() {
  if command -v sha256sum >/dev/null; then sha256sum "$1" | cut -d' ' -f1
  else shasum -a 256 "$1" | cut -d' ' -f1; fi
}

download() {  # url dest; fails quietly (the caller says what to do)
  curl --fail --silent --show-error --location --retry 2 --connect-timeout 10 --output "$2" "$1" 2>"$2.err"
}

# The pinned binaries are built from their Go modules (components/upstream/toolchain.py,
# the modules in tools/) where a release download cannot be reached: a firewall, a mirror,
# or no network but a Go module proxy.
build_from_modules() {  # what, tools...
  local what="$1"; shift
  command -v go >/dev/null \
    || die "$what: the release download failed ($(tail -1 "$TMP_ERR" 2>/dev/null)) and Go is not installed to build it from its module; install Go 1.26.8 or later (or put $what of the pinned version on PATH) and run again"
  # Measured on a fresh 2-core machine: the Pulumi CLI, its Python host and its Kubernetes
  # provider 12 minutes, kind seconds after Kubernetes' packages (README).
  echo "$what: the release download failed; building it from its Go module (once: about 15 minutes for the Pulumi CLI and its provider on a fresh machine, seconds after)"
  MKF_TOOLS_BIN="$TOOLS" .venv/bin/python -m loopback build "$@" \
    || die "building $what from its Go module failed (see above); put $what of the pinned version on PATH and run again"
}

# A tool of the pinned version: on PATH, in .tools/bin, downloaded, or built.
tool_version_is() {  # binary expected-version-line-substring
  [ -x "$1" ] && "$1" version 2>/dev/null | head -1 | grep -qF "$2"
}

# A release binary into .tools/bin, checked against the digest published beside it; built
# from its Go module where the release cannot be reached.
install_binary() {  # name url checksum-url tools-to-build...
  local name="$1" url="$2" sums="$3"; shift 3
  local tmp; tmp="$(mktemp -d)"; DOWNLOADS="$tmp"; TMP_ERR="$tmp/$name.err"
  if download "$url" "$tmp/$name" && download "$sums" "$tmp/$name.sum"; then
    # The checksum file's first word (kind's names the file after it; kubectl's is bare).
    [ "$(sha256_of "$tmp/$name")" = "$(head -1 "$tmp/$name.sum" | cut -d' ' -f1 | tr -d '[:space:]')" ] \
      || die "$name download does not match its published checksum"
    install -m 0755 "$tmp/$name" "$TOOLS/$name"
  else
    rm -f "$TOOLS/$name"
    build_from_modules "$name" "$@"
  fi
  rm -rf "$tmp"
  DOWNLOADS=""
}

install_kind() {
  local found; found="$(command -v kind || true)"
  if [ -n "$found" ] && [ "$found" != "$TOOLS/kind" ] && tool_version_is "$found" "$KIND_VERSION "; then
    echo "kind $KIND_VERSION: $found"; ln -sf "$found" "$TOOLS/kind"; return
  fi
  tool_version_is "$TOOLS/kind" "$KIND_VERSION " && return
  read -r os arch < <(platform)
  local base="https://github.com/kubernetes-sigs/kind/releases/download/${KIND_VERSION}"
  echo "installing kind ${KIND_VERSION} into .tools/bin"
  install_binary kind "$base/kind-${os}-${arch}" "$base/kind-${os}-${arch}.sha256sum" kind
}

PULUMI_DIR=""
install_pulumi() {
  # Binaries straight in .tools/bin (an older up.sh unpacked the release to .tools/bin/pulumi/).
  [ -d "$TOOLS/pulumi" ] && rm -rf "$TOOLS/pulumi"
  local found; found="$(command -v pulumi || true)"
  if [ -n "$found" ] && [ "$found" != "$TOOLS/pulumi" ] && tool_version_is "$found" "v${PULUMI_VERSION}"; then
    # Its folder goes before .tools/bin on PATH (install_tools): the CLI and the plugins
    # beside it, not an older CLI or plugin left in .tools/bin.
    echo "Pulumi CLI v$PULUMI_VERSION: $found"; PULUMI_DIR="$(dirname "$found")"
    # Linked into .tools/bin too, the plugins beside it with it: what `mkf env` puts on a
    # fresh shell's PATH (a stale CLI or plugin of the same name there is replaced).
    local each
    for each in "$PULUMI_DIR"/pulumi "$PULUMI_DIR"/pulumi-*; do
      if [ -f "$each" ]; then ln -sf "$each" "$TOOLS/$(basename "$each")" 2>/dev/null || true; fi
    done
    return 0
  fi
  tool_version_is "$TOOLS/pulumi" "v${PULUMI_VERSION}" && return
  read -r os arch < <(platform)
  [ "$arch" = amd64 ] && arch=x64
  local asset="pulumi-v${PULUMI_VERSION}-${os}-${arch}.tar.gz"
  local base="https://github.com/pulumi/pulumi/releases/download/v${PULUMI_VERSION}"
  local tmp; tmp="$(mktemp -d)"; DOWNLOADS="$tmp"; TMP_ERR="$tmp/$asset.err"
  echo "installing Pulumi CLI ${PULUMI_VERSION} into .tools/bin"
  if download "$base/$asset" "$tmp/$asset" && download "$base/pulumi-${PULUMI_VERSION}-checksums.txt" "$tmp/checksums.txt"; then
    local want; want="$(grep " ${asset}\$" "$tmp/checksums.txt" | cut -d' ' -f1)"
    [ -n "$want" ] && [ "$(sha256_of "$tmp/$asset")" = "$want" ] \
      || die "Pulumi CLI download does not match its published checksum"
    tar -xzf "$tmp/$asset" -C "$tmp"
    install -m 0755 "$tmp"/pulumi/* "$TOOLS/"
  else
    # The CLI, its Python language host and the kubernetes provider (Pulumi would download
    # the provider at the first `up`, from the same release host): built from tools/pulumi*.
    build_from_modules "the Pulumi CLI" pulumi pulumi-language-python pulumi-resource-kubernetes
  fi
  rm -rf "$tmp"
  DOWNLOADS=""
}

install_kubectl() {
  # What the commands up.sh prints and the how-tos run: the user's own kubectl where PATH has
  # one (any kubectl within one minor version of the clusters works), else the pinned one in
  # .tools/bin, which `mkf env` puts on PATH.
  local found; found="$(command -v kubectl || true)"
  if [ -n "$found" ] && [ "$found" != "$TOOLS/kubectl" ]; then echo "kubectl: $found"; return; fi
  [ -x "$TOOLS/kubectl" ] && "$TOOLS/kubectl" version --client 2>/dev/null \
    | grep -qF "Client Version: $KUBECTL_VERSION" && return
  read -r os arch < <(platform)
  local url="https://dl.k8s.io/release/${KUBECTL_VERSION}/bin/${os}/${arch}/kubectl"
  echo "installing kubectl ${KUBECTL_VERSION} into .tools/bin (none on PATH)"
  install_binary kubectl "$url" "$url.sha256" kubectl
}

use_local_backend() {  # stack
  mkdir -p "$ROOT/.pulumi-state"
  export PULUMI_BACKEND_URL="file://$ROOT/.pulumi-state"
  if [ "$1" = dev ]; then
    # The dev stack holds no secret of value (its kind clusters live and die on this
    # machine), so it has a documented passphrase, and its salt is committed in
    # stacks/Pulumi.dev.yaml. Pulumi refuses any other passphrase for that salt, so one
    # set in the environment for other stacks is not used here.
    if [ -n "${PULUMI_CONFIG_PASSPHRASE_FILE:-}" ] \
      || { [ -n "${PULUMI_CONFIG_PASSPHRASE:-}" ] && [ "$PULUMI_CONFIG_PASSPHRASE" != "$DEV_PASSPHRASE" ]; }; then
      echo "note: the dev stack uses its documented passphrase; PULUMI_CONFIG_PASSPHRASE(_FILE) from your environment is not used for it"
    fi
    unset PULUMI_CONFIG_PASSPHRASE_FILE
    export PULUMI_CONFIG_PASSPHRASE="$DEV_PASSPHRASE"
  elif [ -z "${PULUMI_CONFIG_PASSPHRASE:-}" ] && [ -z "${PULUMI_CONFIG_PASSPHRASE_FILE:-}" ]; then
    die "set PULUMI_CONFIG_PASSPHRASE (or _FILE) for stack '$1'"
  fi
}

# A TMPDIR of the engine's own under the ignored state folder (0700), which the caller removes
# on exit: pulumi-kubernetes leaves each provider's kubeconfig, client key included, in
# $TMPDIR at every preview, up and destroy. The folder is made, and those of commands that
# are gone (killed) removed, as mkf does it (components/cli/engine_tmp.py).
private_engine_tmp() {
  ENGINE_TMP="$(.venv/bin/python -m components.cli.engine_tmp "$ROOT/.pulumi-state" "$$")" \
    || die "could not make a temporary folder for the Pulumi engine under .pulumi-state/tmp"
  export TMPDIR="$ENGINE_TMP"
}

# A stack of kind clusters only: Pulumi writes its state once at the end of an update rather
# than after every step (PULUMI_SKIP_CHECKPOINTS, pulumi v3.274.1 pkg/backend/snapshot.go).
# Each checkpoint rewrites the whole state file, some 18 MB for the dev stack (Kueue's CRDs,
# three times), which made `up` and `destroy` take minutes of CPU for nothing. Safe for kind
# only: a cluster whose create was not recorded is adopted by the next `up` (its owner
# label), objects are applied server-side, and every delete is idempotent; a cloud cluster
# missing from the state would be left running, so cloud stacks keep every checkpoint.
checkpoints_for() {  # providers (comma-separated)
  if [ "$1" = kind ]; then
    export PULUMI_SKIP_CHECKPOINTS=true
  else
    unset PULUMI_SKIP_CHECKPOINTS
  fi
}

install_tools() {
  mkdir -p "$TOOLS"
  install_kind
  install_pulumi
  # .venv first: a language host built from its Go module (no release reachable) runs the
  # first python3 on PATH rather than Pulumi.yaml's virtualenv (program_env.program_path).
  export PATH="$ROOT/.venv/bin:${PULUMI_DIR:+$PULUMI_DIR:}$TOOLS:$PATH"
}
