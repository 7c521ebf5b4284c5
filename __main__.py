"""The Pulumi program: stack config -> validated FleetSpec -> the fleet -> exports.

Validation runs before any resource is registered; on error the run stops with every
problem listed and nothing changed on any cluster.
"""

import pulumi

from components.config_source import from_pulumi_config, load_checked

config, secret_keys = from_pulumi_config()
spec, problems = load_checked(
    config, pulumi.get_stack(), f"stack '{pulumi.get_stack()}'", secret_keys
)
for problem in problems:
    pulumi.log.warn(str(problem))

pulumi.export("fleet", spec.fleet_name)
pulumi.export(
    "clusters",
    [
        {
            "name": c.name,
            "role": c.role,
            "provider": c.provider,
            "kubernetesVersion": c.kubernetes_version,
        }
        for c in spec.clusters
    ],
)
