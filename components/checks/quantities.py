"""Quotas that are valid quantities but almost surely not what was meant, refused with the
value that likely was: memory without a unit (bytes), and a count of devices (a GPU or any
other extended resource) written with a binary suffix or as a fraction; and warned about:
a plain cpu of 1000 or more (millicores without their unit).

Kubernetes' own rules behind them (v1.36, the version tools/go.mod pins):
- pkg/apis/core/helper/helpers.go, IsExtendedResourceName: a resource name with a domain
  prefix outside kubernetes.io (`nvidia.com/gpu`, `amd.com/gpu`) is an extended resource;
- pkg/apis/core/validation/validation.go, ValidateResourceQuantityValue: an extended
  resource in a pod's requests "must be an integer", so a fractional quota never admits
  anything a fraction was meant for;
- pkg/api/pod/warnings.go: memory and ephemeral-storage with a fractional byte value
  (`value.MilliValue()%1000 != 0`) are "invalid, must be an integer" (#79950): no pod asks
  for part of a byte, so such a quota is a typo (`100m` of memory is a tenth of a byte).
Kueue v0.19.2 keeps quotas as int64 (pkg/resources: CPU in thousandths, the rest in units):
a manager quota summed over the workers can pass that where no single quota does.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import ROUND_CEILING, Decimal

from components.model.fieldtypes import QUANTITY, quantity_limit, quantity_value
from components.model.problems import Problem, key_path
from components.model.spec import FleetSpec

MEBIBYTE = 1024**2
# Resources counted in bytes, where a plain number is bytes.
BYTE_RESOURCES = ("memory", "ephemeral-storage", "storage")
BINARY_SUFFIXES = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
# A plain cpu quota this large is more likely millicores written without their unit.
CPU_CORES_LIKELY_MILLI = 1000


def is_extended(resource: str) -> bool:
    """Kubernetes' IsExtendedResourceName: a prefixed name outside kubernetes.io."""
    if "/" not in resource or "kubernetes.io/" in resource:
        return False
    return not resource.startswith("requests.")


def counts_bytes(resource: str) -> bool:
    return resource in BYTE_RESOURCES or resource.startswith("hugepages-")


def _number(value: str) -> tuple[Decimal, str] | None:
    match = QUANTITY.fullmatch(value)
    if match is None:
        return None
    return Decimal(match.group(2)), match.group(3) or ""


def _as_written(number: Decimal) -> str:
    return format(number.normalize(), "f")


def _likely_bytes(number: Decimal) -> str:
    """What a plain number of memory most likely meant: gibibytes for a small number
    (8 -> 8Gi, 0.5 -> 512Mi), mebibytes for a large one (4096 -> 4096Mi)."""
    if number >= 1024:
        return f"{_as_written(number)}Mi"
    if number == number.to_integral_value():
        return f"{_as_written(number)}Gi"
    mebibytes = number * 1024
    if mebibytes == mebibytes.to_integral_value():
        return f"{_as_written(mebibytes)}Mi"
    return f"{_as_written(number)}Gi"


def _whole_bytes(exact: Decimal) -> str:
    whole = int(exact.to_integral_value(rounding=ROUND_CEILING))
    for power, suffix in reversed(list(enumerate(BINARY_SUFFIXES, start=1))):
        if whole >= 1024**power and whole % 1024**power == 0:
            return f"{whole // 1024**power}{suffix}"
    mebibytes = -(-whole // MEBIBYTE)
    return f"{mebibytes}Mi" if whole >= MEBIBYTE else str(whole)


def quantity_problems(resource: str, value: str, path: str) -> Iterator[Problem]:
    """The mistakes in one quota value of `resource`."""
    parsed = _number(value)
    if parsed is None:
        return  # not a quantity at all: the model has said so
    number, suffix = parsed
    if counts_bytes(resource) and not suffix and 0 < number < MEBIBYTE:
        likely = _likely_bytes(number)
        yield Problem(
            path,
            f"{resource} {value} is {value} bytes (a number without a unit counts bytes), "
            "too little to admit any pod",
            f"did you mean {likely}? Write the unit: {likely}",
        )
        return
    exact = quantity_value(value)
    if counts_bytes(resource) and exact is not None and exact != exact.to_integral_value():
        yield Problem(
            path,
            f"{resource} {value} is {_as_written(exact)} bytes, a fraction of a byte, which "
            "Kubernetes calls invalid for memory and storage ('must be an integer')",
            f"write a whole number of bytes with a unit, such as {_whole_bytes(exact)}",
        )
        return
    if resource == "cpu" and exact is not None and exact >= quantity_limit("cpu"):
        yield Problem(
            path,
            f"cpu {value} is too large: Kueue counts cpu in thousandths in a 64-bit integer "
            "and treats a quota this large as unlimited",
            f"use less than {quantity_limit('cpu'):.0f} cores",
        )
        return
    if resource == "cpu" and not suffix and number >= CPU_CORES_LIKELY_MILLI:
        # cpu counts cores; 8000 is far more than one queue on one cluster usually gets, and
        # is what 8000m (8 cores) looks like with its unit forgotten. A warning, silenced by
        # writing the same number with the decimal suffix k (8k is 8000 cores).
        cores = number / 1000
        yield Problem(
            path,
            f"cpu {value} is {value} CPU cores (cpu counts cores; millicores need the unit m)",
            f"if you meant {_as_written(cores)} cores, write {_as_written(cores)} or {value}m; "
            f"if you meant {value} cores, write {_as_written(cores)}k to say so",
            "warning",
        )
    if not is_extended(resource):
        return
    if suffix in BINARY_SUFFIXES:
        total = number * Decimal(1024) ** (BINARY_SUFFIXES.index(suffix) + 1)
        yield Problem(
            path,
            f"{resource} {value} means {_as_written(total)} devices: {resource} is a count, "
            f"and {suffix} multiplies it by {1024 ** (BINARY_SUFFIXES.index(suffix) + 1)}",
            f"did you mean {_as_written(number)}? Write the count without a unit",
        )
        return
    scale = {"m": Decimal("0.001"), "": Decimal(1)}.get(suffix)
    if scale is not None and (number * scale) != (number * scale).to_integral_value():
        whole = max(1, int((number * scale).to_integral_value()))
        yield Problem(
            path,
            f"{resource} {value} is a fraction of a device: Kubernetes refuses a pod that "
            f"asks for part of an extended resource ('must be an integer'), so no workload "
            "could ever use it",
            f"write a whole number, such as {whole}",
        )


def quota_quantities(spec: FleetSpec) -> Iterator[Problem]:
    """Every quota of the stack: the ClusterQueues' (nominal, borrowing and lending
    limits), each worker's own, and managerQuota."""
    for cq in spec.queues.cluster_queues:
        for group in cq.resource_groups:
            for fq in group.flavors:
                for resource, quota in fq.resources.items():
                    path = key_path(key_path(fq.path, "resources"), resource)
                    yield from quantity_problems(resource, quota.nominal, path)
                    for field, value in (
                        ("borrowingLimit", quota.borrowing_limit),
                        ("lendingLimit", quota.lending_limit),
                    ):
                        if value is not None:
                            yield from quantity_problems(resource, value, key_path(path, field))
        for flavor, resources in (cq.manager_quota or {}).items():
            base = key_path(key_path(cq.path, "managerQuota"), flavor)
            for resource, value in resources.items():
                yield from quantity_problems(resource, value, key_path(base, resource))
    for worker in spec.workers:
        for cq_name, flavors in worker.quotas.items():
            for flavor, resources in flavors.items():
                base = key_path(key_path(key_path(worker.path, "quotas"), cq_name), flavor)
                for resource, value in resources.items():
                    yield from quantity_problems(resource, value, key_path(base, resource))


def manager_quota_sums_fit(spec: FleetSpec) -> Iterator[Problem]:
    """A ClusterQueue without managerQuota gets the workers' sum on the manager; each
    worker's quota fits Kueue's int64, their sum may not."""
    from components.objects.queues import worker_quota_sum

    for cq in spec.queues.cluster_queues:
        chosen = cq.manager_quota or {}
        for flavor, resources in worker_quota_sum(spec, cq).items():
            for resource, total in resources.items():
                if resource in chosen.get(flavor, {}):
                    continue
                value = quantity_value(total)
                limit = quantity_limit(resource)
                if value is not None and value >= limit:
                    unit = "thousandths of a core" if resource == "cpu" else "units"
                    yield Problem(
                        key_path(key_path(key_path(cq.path, "managerQuota"), flavor), resource),
                        f"the workers' quotas of {resource} in '{flavor}' add up to {total}, "
                        "the manager's quota when managerQuota is unset, which is more than "
                        f"Kueue counts in an int64 of {unit} (less than {limit:.0f}; more "
                        "becomes unlimited)",
                        "lower the workers' quotas, or set this managerQuota to what the "
                        "manager may admit",
                    )
