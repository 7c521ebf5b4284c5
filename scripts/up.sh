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

source "$ROOT/scripts/env.sh"

step "Python environment (.venv)"
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
if grep -qE '^\s*provider:\s*(gke|eks)\b' "$STACK_FILE"; then
  # Cloud SDKs only for stacks that have cloud clusters.
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-cloud.txt
fi

step "Validating $STACK_FILE"
# Before any download or cluster: a wrong stack file stops here with every problem listed.
.venv/bin/python -m components validate --stack "$STACK"

if grep -qE '^\s*provider:\s*kind\b' "$STACK_FILE" || ! grep -qE '^\s*provider:' "$STACK_FILE"; then
  step "Docker"
  command -v docker >/dev/null || die "this stack runs on kind, which needs Docker; install Docker and run again"
  docker info >/dev/null 2>&1 || die "Docker is installed but not running (docker info failed); start Docker and run again"
fi

step "Tools"
install_tools

step "Pulumi stack '$STACK' (local file backend)"
use_local_backend "$STACK"
pulumi stack select --create "$STACK" --non-interactive

step "Offline render of what each cluster gets (.render/$STACK)"
.venv/bin/python -m components render --stack "$STACK" --out ".render/$STACK"

step "Provisioning"
pulumi up --yes --stack "$STACK" --non-interactive
echo
echo "The fleet is up. Check it with:"
pulumi stack output checks --stack "$STACK" --json \
  | .venv/bin/python -c 'import json, sys; print("\n".join("  " + c for c in json.load(sys.stdin)))'
echo "Kubeconfigs: pulumi stack output kubeconfigs --show-secrets --stack $STACK"
echo "Tear it down: scripts/down.sh $STACK"
