"""A release manifest's text as the objects in it."""

from __future__ import annotations

from typing import Any

import yaml

# libyaml's loader when PyYAML was built with it: Kueue's manifest (its CRDs) takes the pure
# Python loader about ten times as long.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.load_all(text, Loader=LOADER) if isinstance(d, dict) and d.get("kind")]
