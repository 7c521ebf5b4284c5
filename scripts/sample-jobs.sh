#!/usr/bin/env bash
# Submits examples/sample-jobs.yaml to the manager (KUBECONFIG) and waits until the Job
# and the JobSet finished and the LeaderWorkerSet's workload was admitted on a worker.
# Used by the CI workflow through `python -m components run -- scripts/sample-jobs.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
kubectl apply -f examples/sample-jobs.yaml

admitted_on_worker() {  # owner kind, owner name
  kubectl get workloads -n default -o json | .venv/bin/python -c '
import json, sys
kind, name = sys.argv[1], sys.argv[2]
for w in json.load(sys.stdin)["items"]:
    owner = (w["metadata"].get("ownerReferences") or [{}])[0]
    if owner.get("kind") == kind and owner.get("name") == name and w.get("status", {}).get("clusterName"):
        print(w["status"]["clusterName"]); sys.exit(0)
sys.exit(1)' "$1" "$2"
}

deadline=$((SECONDS + 900))
for owner in "Job sample-job" "JobSet sample-jobset" "LeaderWorkerSet sample-lws"; do
  until where=$(admitted_on_worker $owner); do
    [ $SECONDS -lt $deadline ] || { echo "timed out waiting for $owner to be admitted" >&2; exit 1; }
    sleep 5
  done
  echo "$owner admitted on $where"
done
kubectl wait --for=condition=Complete job/sample-job -n default --timeout=600s
kubectl wait --for=jsonpath='{.status.terminalState}'=Completed jobset/sample-jobset -n default --timeout=600s
echo "the Job and the JobSet completed on a worker; the LeaderWorkerSet runs there"
