"""Kubernetes resource quantities: parse with the official client, sum, print readably.

The manager's ClusterQueue quota defaults to the sum of the workers' quotas, so sums are
printed in the unit the user wrote ("8Gi" + "8Gi" -> "16Gi"), not in bytes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from decimal import Decimal

# The official client's functions, without loading the whole client at every command's start.
from controller.api import format_quantity, parse_quantity

_SUFFIX = re.compile(r"([a-zA-Z]*)$")
_BINARY = ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki")
_DECIMAL = ("E", "P", "T", "G", "M", "k")


def parse(quantity: str | int | float) -> Decimal:
    """The quantity as a number; ValueError with a readable message when it is not one."""
    try:
        return parse_quantity(quantity)
    except (ValueError, TypeError) as exc:
        raise ValueError(
            f"'{quantity}' is not a Kubernetes quantity (for example 8, 500m, 32Gi)"
        ) from exc


def is_valid(quantity: str) -> bool:
    try:
        parse(quantity)
    except ValueError:
        return False
    return True


def _suffix(quantity: str) -> str:
    match = _SUFFIX.search(str(quantity))
    return match.group(1) if match else ""


def _format(value: Decimal, preferred: str) -> str:
    if value == 0:
        return "0"
    candidates = [preferred] if preferred else []
    candidates += [*_BINARY] if preferred in _BINARY else [*_DECIMAL]
    for suffix in [*candidates, ""]:
        try:
            text = format_quantity(value, suffix)
        except ValueError:
            continue
        number = text[: len(text) - len(suffix)] if suffix else text
        if "." not in number and "e" not in number.lower():
            return text
    if value == value.to_integral_value():
        return str(int(value))
    return format_quantity(value, "m")


def total(quantities: Iterable[str]) -> str:
    """The sum, in the first quantity's unit when it divides evenly."""
    items = [str(q) for q in quantities]
    value = sum((parse(q) for q in items), Decimal(0))
    return _format(value, _suffix(items[0]) if items else "")


def equal(a: str, b: str) -> bool:
    return parse(a) == parse(b)
