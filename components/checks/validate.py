"""Fleet-wide checks on a FleetSpec, run before any resource is registered: the one list of
every rule, in the order their problems are reported.

The typed model (spec.py) has already refused every value of the wrong shape; the rules
look across values: references between queues, uniqueness, what the manager and the
workers must agree on. Each rule is a plain function of the spec that yields Problems
naming the config path at fault and how to fix it (rule.py); RULES lists them all, and
every problem is reported at once. The rules come from what Kueue 0.19 refuses at start-up
or silently breaks on (research/kueue-api.md), and from what MultiKueue needs across
manager and workers. They live one module per subject, as Kueue keeps one webhook file per
kind: clusters.py, nodes.py, frameworks.py, kueue_settings.py, credentials.py,
existing_kueue.py, kubeconfigs.py, dispatcher.py, queues.py, cluster_queues.py,
flavors.py, local_queues.py, quantities.py and cloud.py.
"""

from __future__ import annotations

from components.checks.cloud import (
    cloud_cluster_names,
    eks_gpu_ami_architecture,
    gke_gpu_machine_types,
    gke_gpu_zones,
)
from components.checks.cluster_queues import (
    borrowing_needs_reclaim,
    cluster_queue_name_as_pod_label,
    covered_resources_per_group,
    flavor_fungibility_preference,
    flavor_resource_pairs,
    flavors_per_group,
    lending_limit_within_nominal,
    limits_need_a_cohort,
    resource_group_count,
    resource_groups,
    total_covered_resources,
    total_flavors,
)
from components.checks.clusters import (
    cluster_names_unique,
    clusters_distinct,
    cordon_is_a_setting,
    kind_name_length,
    kind_workers_need_a_kind_manager,
    worker_count,
)
from components.checks.credentials import (
    cluster_profile_mode,
    kueue_image_needs_custom_mount,
    worker_kubeconfigs,
)
from components.checks.dispatcher import dispatcher, dispatcher_durations
from components.checks.existing_kueue import existing_kueue
from components.checks.flavors import (
    flavor_item_counts,
    flavor_topologies,
    topologies,
    topology_level_length,
    unique_taints,
)
from components.checks.frameworks import (
    external_frameworks,
    frameworks_listed_once,
    integrations_are_known_and_installed,
    known_frameworks,
    workers_run_the_managers_frameworks,
)
from components.checks.kubeconfigs import worker_servers
from components.checks.kueue_settings import (
    gate_dependencies,
    gates_in_one_place,
    known_feature_gates,
    multikueue_origin,
    pods_ready,
    topology_flavors_need_tas,
)
from components.checks.local_queues import (
    local_queue_name_as_label,
    local_queue_namespaces,
    local_queues,
)
from components.checks.nodes import gpu_quota_has_gpu_nodes, node_labels_kubelet_accepts
from components.checks.quantities import manager_quota_sums_fit, quota_quantities
from components.checks.queues import (
    manager_quota,
    queue_names_unique,
    quotas_admit_something,
    worker_quotas_refer_to_queues,
)
from components.checks.rule import Rule
from components.model.problems import Problem
from components.model.spec import FleetSpec

# Every rule, in the order problems are reported. A rule is a function of the spec that
# yields Problems; add new ones here (Kueue gate rules live in kueue_gates.py and are
# registered here too).
RULES: list[Rule] = [
    worker_count,
    cluster_names_unique,
    clusters_distinct,
    kind_name_length,
    kind_workers_need_a_kind_manager,
    node_labels_kubelet_accepts,
    gpu_quota_has_gpu_nodes,
    known_frameworks,
    workers_run_the_managers_frameworks,
    integrations_are_known_and_installed,
    external_frameworks,
    gates_in_one_place,
    known_feature_gates,
    gate_dependencies,
    topology_flavors_need_tas,
    pods_ready,
    multikueue_origin,
    cluster_profile_mode,
    kueue_image_needs_custom_mount,
    existing_kueue,
    worker_kubeconfigs,
    dispatcher,
    queue_names_unique,
    topologies,
    flavor_topologies,
    resource_groups,
    limits_need_a_cohort,
    borrowing_needs_reclaim,
    cordon_is_a_setting,
    worker_quotas_refer_to_queues,
    manager_quota,
    quotas_admit_something,
    quota_quantities,
    manager_quota_sums_fit,
    local_queues,
    # Values checked against the component that consumes them (the kubeconfig loader,
    # the release that creates a namespace, the dispatcher's settings loader).
    worker_servers,
    frameworks_listed_once,
    local_queue_namespaces,
    dispatcher_durations,
    # Cloud values the provider refuses at `up` (cloud.py).
    gke_gpu_zones,
    gke_gpu_machine_types,
    eks_gpu_ami_architecture,
    cloud_cluster_names,
    # Kueue's own limits and rules for the objects the fleet writes, with their upstream
    # references (kueue_rules.RULE_INVENTORY).
    resource_group_count,
    covered_resources_per_group,
    flavors_per_group,
    total_flavors,
    total_covered_resources,
    flavor_resource_pairs,
    lending_limit_within_nominal,
    flavor_fungibility_preference,
    cluster_queue_name_as_pod_label,
    flavor_item_counts,
    unique_taints,
    topology_level_length,
    local_queue_name_as_label,
]


def validate(spec: FleetSpec) -> list[Problem]:
    """Every fleet-wide problem of one stack, errors and warnings together."""
    return [problem for rule in RULES for problem in rule(spec)]
