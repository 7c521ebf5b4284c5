"""Where the waits of one real run went (issue 39, item 3): each measured admission wait
split into the way to the worker (the dispatcher, then MultiKueue making the copy) and the
worker's queue, with the manager's queue before it, from a run's kept Workloads.

    .venv-dev/bin/python bench/kwok_compare.py --seeds 5 --keep-workloads kept
    .venv-dev/bin/python bench/wait_parts.py kept/5-AllAtOnce.json kept/5-policy.json [--longest 8]

One table per file (SEED-DISPATCHER.json of `--keep-workloads`): each part's mean and
percentiles over the run's workloads, then its longest waits part by part
(bench/fleet_metrics.py wait_parts says what each part holds).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fleet_metrics import PARTS, RecordError, percentile, wait_parts

COLUMNS = ("manager queue (before it)", *PARTS, "wait")


def report(path: Path, longest: int) -> str:
    """The tables of one kept run."""
    kept = json.loads(path.read_text())
    if not isinstance(kept, dict) or "" not in kept:
        raise RecordError('no manager Workloads in it (the "" key of --keep-workloads)')
    parts = wait_parts(kept[""], {k: v for k, v in kept.items() if k})
    if not parts:
        raise RecordError("no workload with its taken copy admitted on a worker")
    rows = {name: (*p, p[1] + p[2]) for name, p in parts.items()}
    lines = [
        f"{path.name}: {len(rows)} workloads admitted on a worker",
        "",
        "| part (s) | mean | P50 | P90 | P99 | max |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for i, column in enumerate(COLUMNS):
        values = [r[i] for r in rows.values()]
        cells = [statistics.fmean(values), *(percentile(values, p) for p in (50, 90, 99))]
        cells.append(max(values))
        lines.append(f"| {column} | " + " | ".join(f"{c:.1f}" for c in cells) + " |")
    lines += ["", "| longest waits | " + " | ".join(COLUMNS) + " |", "|---|" + "---:|" * 4]
    for name, row in sorted(rows.items(), key=lambda kv: -kv[1][-1])[:longest]:
        lines.append(f"| {name.split('/', 1)[-1]} | " + " | ".join(f"{c:.0f}" for c in row) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kept", type=Path, nargs="+", help="SEED-DISPATCHER.json files")
    parser.add_argument("--longest", type=int, default=8, help="waits listed part by part")
    args = parser.parse_args(argv)
    for path in args.kept:
        try:
            print(report(path, args.longest) + "\n")
        except (OSError, ValueError, RecordError, KeyError, TypeError, AttributeError) as exc:
            print(f"error: {path}: not a file of --keep-workloads ({exc})", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
