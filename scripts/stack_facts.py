"""What the scripts need to know about a stack, read through the typed model (never with
grep, which misreads flow-style YAML): one line, `<providers> <builds-image>`, e.g.
`gke,kind yes`. Run from the project root: `.venv/bin/python -m scripts.stack_facts STACK`."""

from __future__ import annotations

import sys

from components.checks.load import load_stack
from components.model.problems import FleetConfigError
from components.model.stack_file import stack_path


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m scripts.stack_facts STACK", file=sys.stderr)
        return 2
    try:
        spec, _ = load_stack(str(stack_path(argv[0])))
    except (FleetConfigError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    providers = ",".join(sorted({c.provider for c in spec.clusters}))
    print(providers, "yes" if spec.dispatcher.builds_image else "no")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
