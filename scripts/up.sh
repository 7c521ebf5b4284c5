#!/usr/bin/env bash
# Brings up a stack (default: dev) from a fresh machine that has Docker and Python 3.11+.
#
#   scripts/up.sh [STACK]
#
# Installs the pinned kind and Pulumi CLI into .tools/bin when they are missing (checksums
# verified), uses Pulumi's local file backend in .pulumi-state (no account), validates the
# stack before anything touches a cluster, then provisions it.
set -euo pipefail
usage() {
  cat <<'EOF'
usage: scripts/up.sh [STACK]

Brings up the stack stacks/Pulumi.STACK.yaml (default: dev, a kind fleet of one manager and
two workers on this machine's Docker). Creates .venv from the pinned requirements (with the
`mkf` command in .venv/bin), validates the stack, installs the pinned kind and Pulumi CLI
into .tools/bin, renders the fleet to .render/STACK, runs `pulumi up` on the local file
backend in .pulumi-state, and writes each cluster's kubeconfig to .fleet/kubeconfigs.

  scripts/up.sh            the dev stack (passphrase: multikueue-fleet-dev, set for you)
  scripts/up.sh gke        any other stack: set PULUMI_CONFIG_PASSPHRASE first
  scripts/down.sh [STACK]  tears it down again

A kind or Pulumi CLI of the pinned version already on PATH is used; otherwise the release is
downloaded (checked against its published checksum) or, where that cannot be reached, built
from its Go module. MKF_TOOLS_DIR: where they go instead of .tools/bin.
EOF
}
case "${1:-}" in
  -h|--help|help) usage; exit 0 ;;
  -*) printf 'error: unknown option %s; usage: scripts/up.sh [STACK] (see --help)\n' "$1" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { printf 'error: one stack name at most, got %s; usage: scripts/up.sh [STACK]\n' "$*" >&2; exit 2; }
cd "$(dirname "$0")/.."
ROOT="$PWD"
STACK="${1:-dev}"
STACK_FILE="stacks/Pulumi.${STACK}.yaml"

source "$ROOT/scripts/env.sh"

step "Python environment (.venv)"
PYTHON="${PYTHON:-python3}"
command -v "$PYTHON" >/dev/null \
  || die "Python 3.11 or newer is needed and $PYTHON is not on PATH; install it (apt install python3 python3-venv, or brew install python@3.12) or set PYTHON=/path/to/python3.11"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || die "Python 3.11 or newer is needed; $PYTHON is $("$PYTHON" -V 2>&1); install a newer one or set PYTHON=/path/to/python3.11"
"$PYTHON" -c 'import ensurepip, venv' 2>/dev/null \
  || die "Python's venv module is missing; install it (Debian/Ubuntu: apt install python3-venv) and run again"
# A .venv this script made (its mark inside) and an interrupted run left half-made, or made
# with another Python, is rebuilt; one without the mark is the user's and is never removed.
if { [ -e .venv ] || [ -L .venv ]; } && ! .venv/bin/python -c 'import sys, pip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  [ -e .venv/.made-by-up.sh ] \
    || die ".venv is not an environment scripts/up.sh made, and it cannot run the program (it needs Python 3.11 or newer with pip); move it away (mv .venv .venv.mine) and run again"
  echo ".venv is incomplete or too old: rebuilding it"
  rm -rf .venv
fi
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv || { rm -rf .venv; die "could not create .venv with $PYTHON -m venv"; }
  touch .venv/.made-by-up.sh
fi
# --no-compile: each module is compiled when first imported (a few dozen of the thousands of
# pulumi-kubernetes' modules), not all of them now.
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-compile -r requirements.txt \
  || die "installing requirements.txt into .venv failed (see pip's message above)"
# The `mkf` command (pyproject.toml), from this checkout; again only when pyproject changed.
if [ ! -x .venv/bin/mkf ] || [ pyproject.toml -nt .venv/bin/mkf ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e . \
    || die "installing the mkf command into .venv failed (see pip's message above)"
fi

step "Validating $STACK_FILE"
# Before any download or cluster: a wrong stack file stops here with every problem listed.
.venv/bin/python -m components validate --stack "$STACK"
# Providers and whether an image is built, read through the typed model (flow-style YAML too).
read -r PROVIDERS BUILDS_IMAGE < <(.venv/bin/python -m scripts.stack_facts "$STACK")
case ",$PROVIDERS," in
  *,gke,*|*,eks,*)
    # Cloud SDKs only for stacks that have cloud clusters: Pulumi fetches the plugin of
    # every Pulumi package in .venv, used or not (components/resources/program_env.py).
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-compile -r requirements-cloud.txt \
      || die "installing requirements-cloud.txt into .venv failed (see pip's message above)"
    ;;
  *)
    # A note (never a removal) when an earlier run left cloud SDKs there.
    .venv/bin/python -m components.resources.program_env "$PROVIDERS"
    ;;
esac

# A cloud cluster's kubeconfig runs its credential plugin: without it `pulumi up` would create
# the clusters, then fail at the first Kubernetes call (components/resources/program_env.py
# CREDENTIAL_PLUGINS; `mkf up` and `mkf run` check the same).
case ",$PROVIDERS," in
  *,gke,*) command -v gke-gcloud-auth-plugin >/dev/null \
    || die "this stack has GKE clusters, whose kubeconfigs run gke-gcloud-auth-plugin, which is not on PATH; install it (gcloud components install gke-gcloud-auth-plugin, or Debian's google-cloud-cli-gke-gcloud-auth-plugin) and run again" ;;
esac
case ",$PROVIDERS," in
  *,eks,*) command -v aws >/dev/null \
    || die "this stack has EKS clusters, whose kubeconfigs run \`aws eks get-token\`, and the AWS CLI is not on PATH; install the AWS CLI v2 and run again" ;;
esac

if [[ ",$PROVIDERS," == *,kind,* || "$BUILDS_IMAGE" == yes ]]; then
  step "Docker"
  why="this stack runs on kind"
  [[ ",$PROVIDERS," == *,kind,* ]] || why="this stack builds the dispatcher image"
  command -v docker >/dev/null || die "$why, which needs Docker; install Docker and run again"
  docker info >/dev/null 2>&1 || die "Docker is installed but not running (docker info failed); start Docker and run again"
fi
DEBIAN_STAND_IN=localhost/multikueue-fleet/stand-in/docker.io/library/debian:bookworm-slim
if [[ ",$PROVIDERS," == *,kind,* ]]; then
  step "Pre-flight for kind (this host, the node image)"
  # One line per lack, with its fix, before any cluster exists (components/checks/kind_host.py).
  # Where the node image is all it lacks and Go is here, exit 3: build it here instead.
  can_build=()
  command -v go >/dev/null && can_build=(--can-build)
  preflight=0
  .venv/bin/python -m components.checks.kind_host "$STACK_FILE" "${can_build[@]}" || preflight=$?
  if [ "$preflight" = 3 ]; then
    step "Building kind's node image and the fleet's images here (python -m kindnode build)"
    # Nothing can be pulled here: the node image, the fleet's images and a registry mirror
    # for them, built from their Go modules and Debian's packages (14 minutes on a fresh
    # machine, seconds after). The stack file is left as it is: the image and mirror go in
    # stacks/local/$STACK.yaml, ignored by git (components/model/host_local.py).
    # The Debian base, kept under the project's name (kindnode/images.py DEBIAN), or where an
    # earlier build imported it: under the published name, with the build's label.
    [ "$(id -u)" = 0 ] || docker image inspect "$DEBIAN_STAND_IN" >/dev/null 2>&1 \
      || [ "$(docker image inspect --format '{{index .Config.Labels "io.multikueue-fleet.stand-in"}}' debian:bookworm-slim 2>/dev/null)" = debootstrap ] \
      || die "building the node image starts from Debian's debootstrap, which needs root: run \`sudo .venv/bin/python -m kindnode build --for-stack $STACK\` once, then scripts/up.sh again"
    started=$SECONDS
    MKF_TOOLS_BIN="$TOOLS" .venv/bin/python -m kindnode build --for-stack "$STACK" \
      || die "building the kind images failed (see above); fix what it names and run again"
    echo "built in $((SECONDS - started)) s"
    .venv/bin/python -m components.checks.kind_host "$STACK_FILE" || exit 1
  elif [ "$preflight" != 0 ]; then
    exit 1
  fi
fi

step "Tools"
install_tools
install_kubectl

step "Pulumi stack '$STACK' (local file backend)"
use_local_backend "$STACK"
private_engine_tmp
trap 'rm -rf "$ENGINE_TMP"' EXIT
pulumi stack select --create "$STACK" --non-interactive

step "Offline render of what each cluster gets (.render/$STACK)"
.venv/bin/python -m components render --stack "$STACK" --out ".render/$STACK"

step "Provisioning"
checkpoints_for "$PROVIDERS"
# A provider's Python traceback shown as its one line of cause (components/cli/pulumi_output.py).
UP_LOG="$(mktemp)"
trap 'rm -f "$UP_LOG"; rm -rf "$ENGINE_TMP"' EXIT
up_once() {
  pulumi up --yes --stack "$STACK" --non-interactive 2>&1 | tee "$UP_LOG" \
    | .venv/bin/python -m components.cli.pulumi_output
}
if ! up_once; then
  # An API server that did not answer in time (pulumi-kubernetes: "configured Kubernetes
  # cluster is unreachable", here a kind cluster's, busy starting on a loaded host) is worth
  # one more `up`: it goes on from what the first one made. Any other failure stops here.
  grep -q "configured Kubernetes cluster is unreachable" "$UP_LOG" || exit 1
  echo "a cluster's API server did not answer in time: running pulumi up once more (it goes on from where it stopped)"
  up_once
fi
# What `python -m components status --dir .fleet` reads: each cluster's kubeconfig (0600)
# and a summary, from the stack's outputs.
pulumi stack output --json --show-secrets --stack "$STACK" \
  | .venv/bin/python -c 'import json, sys; from pathlib import Path; from components.cli.automation import write_fleet_dir; write_fleet_dir(Path(".fleet"), sys.argv[1], json.load(sys.stdin))' "$STACK"
printf '   (%d s)\n' "$((SECONDS - STEP_STARTED))"
echo
echo "The fleet is up, in $((SECONDS / 60)) min $((SECONDS % 60)) s. Its tools and kubeconfigs in your shell (kubectl, pulumi, mkf):"
echo "  eval \"\$(.venv/bin/mkf env $STACK)\""
echo "Then check it with:"
pulumi stack output checks --stack "$STACK" --json \
  | .venv/bin/python -c 'import json, sys; print("\n".join("  " + c for c in json.load(sys.stdin)))'
echo "  mkf status"
echo "Kubeconfigs: .fleet/kubeconfigs/"
echo "Tear it down: scripts/down.sh $STACK"
