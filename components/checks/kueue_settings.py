"""The stack's `kueue` settings as Kueue 0.19 takes them at start-up: feature gates (in one
place, known, not locked to another value, with the gates they need), a topology only with
TopologyAwareScheduling, waitForPodsReady on the manager, and MultiKueue's origin label."""

from __future__ import annotations

from collections.abc import Iterator

from components.checks.rule import error, warn
from components.model import kueue_gates
from components.model.fieldtypes import is_label_value
from components.model.problems import Problem, did_you_mean, key_path
from components.model.spec import FleetSpec
from components.objects.kueue_config import pods_ready_problems


def written_gates(spec: FleetSpec) -> dict[str, bool]:
    """The feature gates the stack sets, in the Configuration or as flags."""
    return {**spec.kueue.feature_gates, **spec.kueue.feature_gate_flags}


def gates_in_one_place(spec: FleetSpec) -> Iterator[Problem]:
    if spec.kueue.feature_gates and spec.kueue.feature_gate_flags:
        yield error(
            "kueue.featureGateFlags",
            "feature gates are set both in the config and as --feature-gates flags",
            "Kueue refuses to start with both; move every gate to kueue.featureGates",
        )


def known_feature_gates(spec: FleetSpec) -> Iterator[Problem]:
    """Kueue stops at start-up on an unknown gate or a locked one set to another value."""
    for key in ("featureGates", "featureGateFlags"):
        gates = spec.kueue.feature_gates if key == "featureGates" else spec.kueue.feature_gate_flags
        for name, value in gates.items():
            path = key_path(key_path("kueue", key), name)
            if name in kueue_gates.REMOVED_GATES:
                yield error(
                    path,
                    f"feature gate '{name}' does not exist in Kueue 0.19 "
                    f"({kueue_gates.REMOVED_GATES[name]})",
                    "delete it: Kueue stops at start-up on an unknown gate",
                )
                continue
            gate = kueue_gates.GATES.get(name)
            if gate is None:
                yield error(
                    path,
                    f"unknown feature gate '{name}'",
                    f"{did_you_mean(name, kueue_gates.GATES)}Kueue stops at start-up on an "
                    "unknown gate",
                )
            elif gate.locked and value != gate.default:
                yield error(
                    path,
                    f"feature gate '{name}' is locked to {str(gate.default).lower()} in Kueue 0.19",
                    "delete it: Kueue refuses to change a locked gate",
                )
            elif gate.locked:
                yield warn(
                    path,
                    f"feature gate '{name}' is locked in 0.19 and will be removed",
                    "delete it now, or the next Kueue minor will refuse to start",
                )


def gate_dependencies(spec: FleetSpec) -> Iterator[Problem]:
    """Gates Kueue refuses to start with unless the gates they need are on
    (kueue_gates.gate_problems)."""
    prefix = "kueue.featureGateFlags" if spec.kueue.feature_gate_flags else "kueue.featureGates"
    yield from kueue_gates.gate_problems(written_gates(spec), prefix)


def topology_flavors_need_tas(spec: FleetSpec) -> Iterator[Problem]:
    if not kueue_gates.effective(written_gates(spec), "TopologyAwareScheduling") and any(
        f.topology for f in spec.queues.flavors
    ):
        yield error(
            "kueue.featureGates.TopologyAwareScheduling",
            "TopologyAwareScheduling is off but a flavor uses a topology",
            "turn the gate on or remove `topology` from the flavors",
        )


def pods_ready(spec: FleetSpec) -> Iterator[Problem]:
    """waitForPodsReady on a manager whose jobs' status MultiKueue does not mirror
    (kueue_config.pods_ready_problems)."""
    yield from pods_ready_problems(spec)


def multikueue_origin(spec: FleetSpec) -> Iterator[Problem]:
    """The origin (mkf-<fleetName> by default) is stamped as a label value."""
    origin = spec.kueue.multikueue.origin or ""
    if not is_label_value(origin) or not origin:
        yield error(
            "kueue.multiKueue.origin",
            f"'{origin}' is not a valid label value",
            "Kueue stamps the origin as a label on remote objects: use at most 63 letters, "
            "digits, '-', '_', '.'",
        )
