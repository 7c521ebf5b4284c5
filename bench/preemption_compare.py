"""Who preempted whom in one real run of the KWOK comparison, beside the simulation of the
same stream (issue 39, item 3: where the real fleet's preemptions part from the model's),
and the delays the run shows against those the model assumes.

    .venv-dev/bin/python bench/kwok_compare.py --seeds 1 --keep-workloads kept
    .venv-dev/bin/python bench/preemption_compare.py kept/1-AllAtOnce.json [--workers 3]

The file is one run's every Workload version (`--keep-workloads`), named SEED-DISPATCHER;
`--workers`, `--minutes` and `--time-scale` must be the run's, so that the stream drawn
again is the one it replayed. Preemptions count as both sides count them: a victim of a
MultiKueue copy on its worker (bench/fleet_metrics.py preemptions_of, dq_sim Stats.victims).
The third column simulates the stream again with the delays this run measured in place of
the KWOK settings' (bench/fleet_metrics.py delays), to show what they account for.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from dq_sim import Settings, Sim
from fleet_metrics import delays, preemptions_of
from fleet_replay import SIMULATED
from kwok_compare import KWOK_SETTINGS, stream_of

Victim = tuple[float, str, str, str]  # (time, worker, victim, preemptor)


def summary(victims: list[Victim], copies: set[str]) -> dict[str, str]:
    """The rows of one side; `copies`: the names of the stream's MultiKueue workloads."""
    by_copy = [v for v in victims if v[3] in copies]
    times = Counter(v[2] for v in by_copy)
    bundles = Counter((v[0], v[1], v[3]) for v in by_copy)  # one preemption's victims
    workers = Counter(v[1] for v in by_copy)
    return {
        "preemptions by a copy": str(len(by_copy)),
        "by worker": ", ".join(f"{w} {n}" for w, n in sorted(workers.items())),
        "victims (distinct)": str(len(times)),
        "of them preempted 3 times or more": str(sum(1 for n in times.values() if n >= 3)),
        "preemptors (distinct copies)": str(len({v[3] for v in by_copy})),
        "victims per preemption, median (max)": (
            f"{statistics.median(bundles.values()):g} ({max(bundles.values())})"
            if bundles
            else "n/a"
        ),
    }


def simulated(stream: Any, dispatcher: str, settings: Settings) -> list[Victim]:
    sim = Sim(stream.scenario, SIMULATED[dispatcher](), settings)
    sim.run()
    # The simulation names a workload of a job `<job>-<n>`; the real one, by its job.
    return [(t, w, v, p.rsplit("-", 1)[0]) for t, w, v, p in sim.stats.victims]


def mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def run_settings(measured: dict[str, list[float]]) -> Settings:
    """The simulation's delays as the run measured them. A copy's way to its worker (the
    manager's reads and its Create) is the clients' model (dq_clients.py), so the measured
    `admission` alone is `admission_delay` (the worker's Kueue: creation to admission) and
    `back` is `sync_delay` (the manager seeing an admission). Where the run has no reading,
    the KWOK settings' value stands."""
    admission, back = mean(measured["admission"]), mean(measured["back"])
    return replace(
        KWOK_SETTINGS,
        admission_delay=admission if admission == admission else KWOK_SETTINGS.admission_delay,
        sync_delay=back if back == back else KWOK_SETTINGS.sync_delay,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kept", type=Path, help="SEED-DISPATCHER.json from --keep-workloads")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--time-scale", type=float, default=60.0)
    args = parser.parse_args(argv)
    seed_text, _, dispatcher = args.kept.stem.partition("-")
    if not seed_text.isdigit() or dispatcher not in SIMULATED:
        parser.error(f"{args.kept}: not a SEED-DISPATCHER.json file of --keep-workloads")
    try:
        kept = json.loads(args.kept.read_text())
        manager, workers = kept[""], {k: v for k, v in kept.items() if k}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        print(f"error: {args.kept}: not a file of --keep-workloads ({exc})", file=sys.stderr)
        return 2
    stream = stream_of(args, int(seed_text))
    copies = {job.name for job in stream.scenario.jobs}
    measured = delays(manager, workers)
    fitted = run_settings(measured)
    sides = {
        "real": summary(preemptions_of(manager, workers), copies),
        "simulated": summary(simulated(stream, dispatcher, KWOK_SETTINGS), copies),
        "simulated, the run's delays": summary(simulated(stream, dispatcher, fitted), copies),
    }
    print(f"seed {seed_text}, {dispatcher}, {args.workers} workers\n")
    print("| | " + " | ".join(sides) + " |")
    print("|---|" + "---:|" * len(sides))
    for row in next(iter(sides.values())):
        print(f"| {row} | " + " | ".join(side[row] for side in sides.values()) + " |")
    print("\n| delay (s) | measured mean | readings | the KWOK settings | Settings field |")
    print("|---|---:|---:|---:|---|")
    clients = f"{KWOK_SETTINGS.worker_qps:g} QPS, burst {KWOK_SETTINGS.worker_burst}"
    for name, field in (("sync", ""), ("admission", "admission_delay"), ("back", "sync_delay")):
        values = measured[name]
        model = f"{getattr(KWOK_SETTINGS, field):g}" if field else f"clients: {clients}"
        print(f"| {name} | {mean(values):.2f} | {len(values)} | {model} | "
              f"{field or 'worker_qps, worker_burst'} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
