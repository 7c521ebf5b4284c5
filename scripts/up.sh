#!/usr/bin/env bash
# Brings up a stack (default: dev) from a fresh machine that has Docker and Python 3.11+.
#
#   scripts/up.sh [STACK]
#
# Installs the pinned kind and Pulumi CLI into .tools/bin when they are missing (checksums
# verified), uses Pulumi's local file backend in .pulumi-state (no account), validates the
# stack before anything touches a cluster, then provisions it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
STACK="${1:-dev}"
STACK_FILE="stacks/Pulumi.${STACK}.yaml"

# One place for the tool pins; components/versions.py holds the same numbers for Python.
KIND_VERSION="v0.33.0"
PULUMI_VERSION="3.272.0"
TOOLS="${MKF_TOOLS_DIR:-$ROOT/.tools/bin}"

die() { printf 'error: %s\n' "$*" >&2; exit 1; }
step() { printf '\n== %s\n' "$*"; }

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

download() {  # url dest
  curl --fail --silent --show-error --location --retry 3 --output "$2" "$1" \
    || die "could not download $1"
}

install_kind() {
  if [ -x "$TOOLS/kind" ] && [ "$("$TOOLS/kind" version -q 2>/dev/null)" = "${KIND_VERSION#v}" ]; then
    return
  fi
  read -r os arch < <(platform)
  local base="https://github.com/kubernetes-sigs/kind/releases/download/${KIND_VERSION}"
  local tmp; tmp="$(mktemp -d)"
  echo "installing kind ${KIND_VERSION} into .tools/bin"
  download "$base/kind-${os}-${arch}" "$tmp/kind"
  download "$base/kind-${os}-${arch}.sha256sum" "$tmp/kind.sha256sum"
  [ "$(sha256_of "$tmp/kind")" = "$(cut -d' ' -f1 "$tmp/kind.sha256sum")" ] \
    || die "kind download does not match its published checksum"
  install -m 0755 "$tmp/kind" "$TOOLS/kind"
  rm -rf "$tmp"
}

install_pulumi() {
  if [ -x "$TOOLS/pulumi/pulumi" ] && \
     [ "$("$TOOLS/pulumi/pulumi" version 2>/dev/null)" = "v${PULUMI_VERSION}" ]; then
    return
  fi
  read -r os arch < <(platform)
  [ "$arch" = amd64 ] && arch=x64
  local asset="pulumi-v${PULUMI_VERSION}-${os}-${arch}.tar.gz"
  local base="https://github.com/pulumi/pulumi/releases/download/v${PULUMI_VERSION}"
  local tmp; tmp="$(mktemp -d)"
  echo "installing Pulumi CLI ${PULUMI_VERSION} into .tools/bin"
  download "$base/$asset" "$tmp/$asset"
  download "$base/pulumi-${PULUMI_VERSION}-checksums.txt" "$tmp/checksums.txt"
  local want; want="$(grep " ${asset}\$" "$tmp/checksums.txt" | cut -d' ' -f1)"
  [ -n "$want" ] && [ "$(sha256_of "$tmp/$asset")" = "$want" ] \
    || die "Pulumi CLI download does not match its published checksum"
  rm -rf "$TOOLS/pulumi"
  tar -xzf "$tmp/$asset" -C "$TOOLS"
  rm -rf "$tmp"
}

step "Python environment (.venv)"
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt

step "Validating $STACK_FILE"
# Before any download or cluster: a wrong stack file stops here with every problem listed.
.venv/bin/python -m components validate --stack "$STACK"

if grep -qE '^\s*provider:\s*kind\b' "$STACK_FILE" || ! grep -qE '^\s*provider:' "$STACK_FILE"; then
  step "Docker"
  command -v docker >/dev/null || die "this stack runs on kind, which needs Docker; install Docker and run again"
  docker info >/dev/null 2>&1 || die "Docker is installed but not running (docker info failed); start Docker and run again"
fi

step "Tools"
mkdir -p "$TOOLS"
install_kind
install_pulumi
export PATH="$TOOLS:$TOOLS/pulumi:$PATH"

step "Pulumi stack '$STACK' (local file backend)"
mkdir -p .pulumi-state
export PULUMI_BACKEND_URL="file://$ROOT/.pulumi-state"
if [ -z "${PULUMI_CONFIG_PASSPHRASE:-}" ] && [ -z "${PULUMI_CONFIG_PASSPHRASE_FILE:-}" ]; then
  # The dev stack holds no secret of value (its kind clusters live and die on this
  # machine), so it has a documented passphrase. Every other stack must bring its own.
  [ "$STACK" = dev ] || die "set PULUMI_CONFIG_PASSPHRASE (or _FILE) for stack '$STACK'"
  export PULUMI_CONFIG_PASSPHRASE="multikueue-fleet-dev"
fi
pulumi stack select --create "$STACK" --non-interactive

step "Offline render of what each cluster gets (.render/$STACK)"
.venv/bin/python -m components render --stack "$STACK" --out ".render/$STACK"

step "Provisioning"
# The program validates and exports the fleet plan; the components that create the
# clusters and register the rendered objects are the project's next milestone. Until
# they land, stop here rather than run an `up` that would create nothing.
cat <<MSG
Stack '$STACK' is valid and rendered to .render/$STACK; kind and the Pulumi CLI are
installed in .tools/bin and the stack exists in .pulumi-state.
Provisioning is not available yet in this version: the Pulumi components that create
the clusters are not part of it. Nothing was created on Docker.
MSG
exit 3
