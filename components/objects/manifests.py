"""A release manifest's text as the objects in it, and objects as YAML text."""

from __future__ import annotations

from typing import Any

import yaml

# libyaml's loader when PyYAML was built with it: Kueue's manifest (its CRDs) takes the pure
# Python loader about ten times as long.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.load_all(text, Loader=LOADER) if isinstance(d, dict) and d.get("kind")]


class PlainDumper(yaml.SafeDumper):
    """YAML as a person or kubectl reads it: a value the builders share between two places
    (one verbs list in several RBAC rules, one schema in several CRD properties) is written
    out at each, never as an `&id001` anchor and `*id001` alias."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def yaml_text(obj: Any) -> str:
    """One object (or a config embedded in one) as YAML, keys in the builders' order."""
    return yaml.dump(obj, Dumper=PlainDumper, sort_keys=False)
