#!/usr/bin/env bash
# Tears a stack down (default: dev): destroys every cluster and object it created, then
# removes the stack's state from the local backend (its stack file stays). Safe to run
# twice, and on a stack that was never brought up.
#
#   scripts/down.sh [STACK]
set -euo pipefail
case "${1:-}" in
  -h|--help|help)
    printf '%s\n' "usage: scripts/down.sh [STACK]" "" \
      "Destroys every cluster and object the stack (default: dev) created and forgets its" \
      "state in .pulumi-state; the stack file stays. Safe to run twice."
    exit 0 ;;
  -*) printf 'error: unknown option %s; usage: scripts/down.sh [STACK]\n' "$1" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { printf 'error: one stack name at most, got %s; usage: scripts/down.sh [STACK]\n' "$*" >&2; exit 2; }
cd "$(dirname "$0")/.."
ROOT="$PWD"
STACK="${1:-dev}"
STACK_FILE="stacks/Pulumi.${STACK}.yaml"

source "$ROOT/scripts/env.sh"

# The local backend keeps a stack's state in .pulumi/stacks/<project>/<stack>.json (older
# CLIs: without the project folder; .json.gz with PULUMI_DIY_BACKEND_GZIP, .json.zst with
# PULUMI_DIY_BACKEND_ZSTD: pulumi v3.259.0 pkg/backend/diy/store.go). None: nothing was
# brought up, and nothing is downloaded to find that out.
found=""
for f in "$ROOT"/.pulumi-state/.pulumi/stacks/{,*/}"$STACK".json{,.gz,.zst}; do
  [ -f "$f" ] && found="$f"
done
if [ -z "$found" ]; then
  echo "stack '$STACK' does not exist in .pulumi-state: nothing to tear down"
  exit 0
fi
install_tools
use_local_backend "$STACK"
private_engine_tmp
trap 'rm -rf "$ENGINE_TMP"' EXIT
read -r PROVIDERS _ < <(.venv/bin/python -m scripts.stack_facts "$STACK")
if [[ ",$PROVIDERS," =~ ,existing, ]]; then
  # Clusters that outlive the fleet (only `existing` ones: kind, GKE and EKS clusters the
  # stack created go whole, their objects with them): Kueue's finalizers would hang destroy
  # while work holds quota. Hold the fleet's ClusterQueues and wait (MKF_DRAIN_TIMEOUT
  # seconds, default 600).
  step "Stopping the fleet's ClusterQueues and waiting for running work to end"
  pulumi stack output --json --show-secrets --stack "$STACK" --non-interactive \
    | .venv/bin/python -m components.cli.teardown
fi
step "Destroying stack '$STACK'"
checkpoints_for "$PROVIDERS"
pulumi destroy --yes --stack "$STACK" --non-interactive 2>&1 | .venv/bin/python -m components.cli.pulumi_output
# A kind create cut short (up.sh interrupted while kind was creating) is in the state only
# as a pending create, which destroy skips; the stack's own marks say what it left.
.venv/bin/python -m components.resources.kind_creates "$STACK"
pulumi stack rm --yes --preserve-config --stack "$STACK" --non-interactive
# The kubeconfigs and summary up.sh wrote for this stack (credentials of clusters that are
# gone), and nothing else: another stack's, or a file of yours in .fleet/, stays.
if .venv/bin/python -c 'import sys; from pathlib import Path; from components.cli.automation import forget_fleet_dir; sys.exit(not forget_fleet_dir(Path(".fleet"), sys.argv[1]))' "$STACK"; then
  echo "Removed from .fleet/ the kubeconfigs and summary of stack '$STACK'."
fi
echo "Stack '$STACK' is gone; stacks/Pulumi.${STACK}.yaml is kept."
