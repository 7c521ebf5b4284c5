#!/usr/bin/env bash
# Tears a stack down (default: dev): destroys every cluster and object it created, then
# removes the stack's state from the local backend (its stack file stays). Safe to run
# twice, and on a stack that was never brought up.
#
#   scripts/down.sh [STACK]
set -euo pipefail
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
read -r PROVIDERS _ < <(.venv/bin/python -m scripts.stack_facts "$STACK")
if [[ ",$PROVIDERS," =~ ,(existing|gke|eks), ]]; then
  # Clusters that outlive the fleet: Kueue's finalizers would hang destroy while work holds
  # quota. Hold the fleet's ClusterQueues and wait (MKF_DRAIN_TIMEOUT seconds, default 600).
  step "Stopping the fleet's ClusterQueues and waiting for running work to end"
  pulumi stack output --json --show-secrets --stack "$STACK" --non-interactive \
    | .venv/bin/python -m components.cli.teardown
fi
step "Destroying stack '$STACK'"
pulumi destroy --yes --stack "$STACK" --non-interactive
pulumi stack rm --yes --preserve-config --stack "$STACK" --non-interactive
echo "Stack '$STACK' is gone; stacks/Pulumi.${STACK}.yaml is kept."
