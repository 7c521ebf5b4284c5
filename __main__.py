"""The Pulumi program: stack config -> validated FleetSpec -> the Fleet -> exports.

Validation runs before any resource is registered; on error the run stops with every
problem listed and nothing changed on any cluster.
"""

import pulumi

from components.checks.load import load_checked
from components.model.problems import FleetConfigError
from components.model.stack_file import from_pulumi_config
from components.resources.fleet import Fleet
from components.resources.program_env import missing_credential_plugins

config, secret_keys = from_pulumi_config()
try:
    spec, problems = load_checked(
        config, pulumi.get_stack(), f"stack '{pulumi.get_stack()}'", secret_keys
    )
except FleetConfigError as exc:
    # RunError is printed as its message alone; any other exception gets Pulumi's
    # "Program failed with an unhandled exception" and a traceback (pulumi v3.259.0
    # sdk/python/cmd/pulumi-language-python-exec).
    raise pulumi.RunError(str(exc)) from None
for problem in problems:
    # A note needs no action: the info channel shows it once in `pulumi up`, and runs under
    # the mock engine (tests, benchmarks) do not print it at all.
    (pulumi.log.info if problem.severity == "note" else pulumi.log.warn)(str(problem))

# A GKE or EKS cluster's kubeconfig runs a credential plugin: without it `up` would create
# the clusters and fail at its first Kubernetes call. mkf and scripts/up.sh ask before
# Pulumi runs; this is the same check for a plain `pulumi up`.
missing = missing_credential_plugins(c.provider for c in spec.clusters)
if missing:
    message = "cannot create the fleet: missing " + "; ".join(missing)
    if not pulumi.runtime.is_dry_run():
        raise pulumi.RunError(message)
    pulumi.log.warn(message + " (`pulumi up` stops here)")

fleet = Fleet("fleet", spec)
manager = fleet.handles[spec.manager.name]

pulumi.export("fleet", spec.fleet_name)
pulumi.export(
    "clusters",
    [
        {
            "name": c.name,
            "role": c.role,
            "provider": c.provider,
            "kubernetesVersion": c.kubernetes_version,
            "context": fleet.handles[c.name].context,
        }
        for c in spec.clusters
    ],
)
# What `mkf status` checks follows what the stack installed (components/cli/status.py).
pulumi.export(
    "installs",
    {
        "kueue": spec.kueue.install,
        "dispatcher": spec.dispatcher.run if spec.dispatcher.enabled else "none",
    },
)
# `pulumi stack output --show-secrets kubeconfigs` to use them.
pulumi.export("kubeconfigs", {name: h.kubeconfig for name, h in fleet.handles.items()})
pulumi.export(
    "checks",
    [
        pulumi.Output.format(
            "kubectl --context {0} get multikueueclusters,admissionchecks,clusterqueues",
            manager.context,
        ),
        pulumi.Output.format(
            "kubectl --context {0} -n multikueue-fleet-system get deploy,lease", manager.context
        ),
        # Runnable as printed in the shell `mkf env` sets up (KUBECONFIG: the manager's first).
        "mkf controller explain --all",
    ],
)
if fleet.dispatcher_kubeconfig is not None:
    # dispatcher.run: local. Run it as the pod would (docs/dispatcher.md):
    #   pulumi stack output dispatcherSettings > .fleet/dispatcher.yaml
    #   pulumi stack output --show-secrets dispatcherKubeconfig > .fleet/dispatcher.kubeconfig
    #   python -m controller --kubeconfig .fleet/dispatcher.kubeconfig \
    #     --config .fleet/dispatcher.yaml run
    # (.fleet is ignored by git: the kubeconfig holds a live token.)
    pulumi.export("dispatcherSettings", fleet.dispatcher_settings)
    pulumi.export("dispatcherKubeconfig", fleet.dispatcher_kubeconfig)
