"""Quotas people get wrong: memory without a unit, a GPU count with a binary suffix or a
fraction. Each is one error at its config path (and line), naming the likely value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from components.checks.quantities import is_extended, quota_quantities
from tests.helpers.fleet_config import base, load, only, problems_of
from tests.helpers.stack_texts import cli, write_stack

RESOURCES = "queues.clusterQueues[0].resourceGroups[0].flavors[0].resources"


def with_gpus(quota: Any, memory: Any = "8Gi") -> dict[str, Any]:
    config = base()
    group = config["queues"]["clusterQueues"][0]["resourceGroups"][0]
    group["coveredResources"] = ["cpu", "memory", "nvidia.com/gpu"]
    group["flavors"][0]["resources"] = {"cpu": 4, "memory": memory, "nvidia.com/gpu": quota}
    return config


def quota_errors(config: dict[str, Any]) -> list[Any]:
    """The errors of this rule alone (a quota can break Kueue's other rules too, such as a
    lendingLimit above nominalQuota: tests/unit/test_kueue_rules.py has those)."""
    spec, problems = load(config)
    assert spec is not None, problems
    return [p for p in quota_quantities(spec) if p.severity == "error"]


@pytest.mark.parametrize(
    ("memory", "likely"),
    [(8, "8Gi"), ("64", "64Gi"), (0.5, "512Mi"), (4096, "4096Mi"), ("1000", "1000Gi")],
)
def test_memory_without_a_unit_is_bytes(memory: Any, likely: str) -> None:
    (problem,) = quota_errors(with_gpus(1, memory=memory))
    assert problem.path == f"{RESOURCES}.memory"
    assert f"memory {memory} is {memory} bytes" in problem.message
    assert problem.hint.startswith(f"did you mean {likely}?")


@pytest.mark.parametrize("memory", [0, "0", "8Gi", "1048576", "2e9", "512M", 1048576 * 4])
def test_memory_with_a_unit_or_at_least_a_mebibyte_is_fine(memory: Any) -> None:
    assert quota_errors(with_gpus(1, memory=memory)) == []


@pytest.mark.parametrize(
    ("gpus", "message", "fix"),
    [
        ("4Gi", "nvidia.com/gpu 4Gi means 4294967296 devices", "did you mean 4?"),
        ("2Ki", "nvidia.com/gpu 2Ki means 2048 devices", "did you mean 2?"),
        (0.5, "nvidia.com/gpu 0.5 is a fraction of a device", "such as 1"),
        ("500m", "nvidia.com/gpu 500m is a fraction of a device", "such as 1"),
        ("2.5", "nvidia.com/gpu 2.5 is a fraction of a device", "such as 2"),
    ],
)
def test_a_device_count_with_a_binary_suffix_or_a_fraction(
    gpus: Any, message: str, fix: str
) -> None:
    (problem,) = quota_errors(with_gpus(gpus))
    assert problem.path == f"{RESOURCES}.nvidia.com/gpu"
    assert problem.message.startswith(message), problem.message
    assert fix in problem.hint


@pytest.mark.parametrize("gpus", [0, 1, "8", "2000m", {"nominalQuota": 4, "borrowingLimit": 2}])
def test_whole_device_counts_are_fine(gpus: Any) -> None:
    config = with_gpus(gpus)
    if isinstance(gpus, dict):
        config["queues"]["clusterQueues"][0]["cohort"] = "all"
    assert quota_errors(config) == []


def test_every_place_a_quota_is_written_is_checked() -> None:
    config = with_gpus({"nominalQuota": 4, "borrowingLimit": "1.5", "lendingLimit": "1Ki"})
    cq = config["queues"]["clusterQueues"][0]
    cq["cohort"] = "all"
    cq["managerQuota"] = {"default-flavor": {"memory": 16}}
    config["workers"][0]["quotas"] = {"cq": {"default-flavor": {"nvidia.com/gpu": "0.25"}}}
    paths = sorted(p.path for p in quota_errors(config))
    assert paths == sorted(
        [
            f"{RESOURCES}.nvidia.com/gpu.borrowingLimit",
            f"{RESOURCES}.nvidia.com/gpu.lendingLimit",
            "queues.clusterQueues[0].managerQuota.default-flavor.memory",
            "workers[0].quotas.cq.default-flavor.nvidia.com/gpu",
        ]
    )


@pytest.mark.parametrize(
    ("name", "extended"),
    [
        ("nvidia.com/gpu", True),
        ("amd.com/gpu", True),
        ("example.com/foo", True),
        ("cpu", False),
        ("memory", False),
        ("kubernetes.io/batch", False),
        ("requests.nvidia.com/gpu", False),
    ],
)
def test_what_counts_as_an_extended_resource(name: str, extended: bool) -> None:
    assert is_extended(name) is extended


def test_validate_names_the_line_and_the_likely_value(tmp_path: Path) -> None:
    stack = {"config": {f"multikueue-fleet:{k}": v for k, v in with_gpus("1Gi", memory=16).items()}}
    path = write_stack(tmp_path, "q", yaml.safe_dump(stack, sort_keys=False))
    result = cli("validate", "--stack", str(path))
    assert result.returncode == 1
    assert "error: " + RESOURCES + ".memory: memory 16 is 16 bytes" in result.stderr
    assert "fix: did you mean 16Gi? Write the unit: 16Gi" in result.stderr
    assert "nvidia.com/gpu 1Gi means 1073741824 devices" in result.stderr
    assert f"at: {path}:" in result.stderr
    assert "Traceback" not in result.stderr


def cpu_warnings(cpu: Any) -> list[Any]:
    config = with_gpus(1)
    config["queues"]["clusterQueues"][0]["resourceGroups"][0]["flavors"][0]["resources"]["cpu"] = (
        cpu
    )
    spec, problems = load(config)
    assert spec is not None, problems
    return [p for p in quota_quantities(spec) if p.severity == "warning"]


@pytest.mark.parametrize(("cpu", "cores"), [(8000, "8"), ("1500", "1.5"), (1000, "1")])
def test_a_large_plain_cpu_is_likely_millicores(cpu: Any, cores: str) -> None:
    (problem,) = cpu_warnings(cpu)
    assert problem.path == f"{RESOURCES}.cpu"
    assert f"cpu {cpu} is {cpu} CPU cores" in problem.message
    assert f"if you meant {cores} cores, write {cores} or {cpu}m" in problem.hint
    assert f"write {cores}k to say so" in problem.hint


@pytest.mark.parametrize("cpu", [4, "999", "8000m", "8k", "500m", "64"])
def test_cpu_in_cores_or_with_a_unit_is_fine(cpu: Any) -> None:
    assert cpu_warnings(cpu) == []


def test_validate_warns_about_cpu_8000(tmp_path: Path) -> None:
    config = with_gpus(1)
    config["queues"]["clusterQueues"][0]["resourceGroups"][0]["flavors"][0]["resources"]["cpu"] = (
        8000
    )
    stack = {"config": {f"multikueue-fleet:{k}": v for k, v in config.items()}}
    path = write_stack(tmp_path, "q", yaml.safe_dump(stack, sort_keys=False))
    result = cli("validate", "--stack", str(path))
    assert result.returncode == 0, result.stderr  # a warning: the stack is valid
    assert f"warning: {RESOURCES}.cpu: cpu 8000 is 8000 CPU cores" in result.stderr


# --- fractional bytes and int64 sums (issue 29) ------------------------------------------


def _cq_resources(config: dict, **resources: object) -> dict:
    config["queues"]["clusterQueues"][0]["resourceGroups"][0]["flavors"][0]["resources"] = resources
    return config


FLAVOR = "queues.clusterQueues[0].resourceGroups[0].flavors[0]"


def test_a_fractional_byte_quota_is_refused() -> None:
    config = _cq_resources(base(), cpu=4, memory="100m")  # a tenth of a byte
    problem = only(problems_of(config), f"{FLAVOR}.resources.memory")
    assert "a fraction of a byte" in problem.message and "must be an integer" in problem.message
    config = _cq_resources(base(), cpu=4, memory="1.1Ki")  # 1126.4 bytes
    assert "1126.4 bytes" in only(problems_of(config), f"{FLAVOR}.resources.memory").message


def test_a_whole_byte_quota_with_a_fraction_written_is_accepted() -> None:
    config = _cq_resources(base(), cpu="1.5", memory="1.5Gi")
    assert [p for p in problems_of(config) if p.severity == "error"] == []


def test_a_manager_sum_past_int64_is_refused_and_a_managerquota_accepted() -> None:
    big = "5000000000000000"  # 5e15 each fits (at most 9.2e15); two workers' sum does not
    config = _cq_resources(base(), cpu=big, memory="8Gi")
    problem = only(problems_of(config), "queues.clusterQueues[0].managerQuota.default-flavor.cpu")
    assert "add up to" in problem.message and "int64" in problem.message
    config["queues"]["clusterQueues"][0]["managerQuota"] = {
        "default-flavor": {"cpu": big, "memory": "16Gi"}
    }
    assert [p for p in problems_of(config) if p.severity == "error"] == []


def test_the_int64_limit_is_per_resource_as_kueue_counts_it() -> None:
    """Kueue v0.19.2 (pkg/resources/amount.go AmountFromQuantity) counts cpu in thousandths
    and memory in bytes: 9Pi of memory is fine, 9Ei is not; cpu stops below 9.2e15 cores."""
    config = _cq_resources(base(), cpu=4, memory="9Pi")
    assert [p for p in problems_of(config) if p.severity == "error"] == []
    config = _cq_resources(base(), cpu=4, memory="9Ei")
    assert "too large" in only(problems_of(config), f"{FLAVOR}.resources.memory").message
    config = _cq_resources(base(), cpu="9223372036854775", memory="8Gi")
    problem = only(problems_of(config), f"{FLAVOR}.resources.cpu")
    assert "thousandths" in problem.message and "9223372036854775" in problem.hint
    # Two workers of 5Ei memory each: each fits, the manager's sum does not.
    config = _cq_resources(base(), cpu=4, memory="5Ei")
    problem = only(
        problems_of(config), "queues.clusterQueues[0].managerQuota.default-flavor.memory"
    )
    assert "add up to" in problem.message and "int64 of units" in problem.message
