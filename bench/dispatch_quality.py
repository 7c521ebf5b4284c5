"""Dispatch quality: our policy beside Kueue's AllAtOnce and Incremental dispatchers, on the
same seeded traces of a simulated MultiKueue fleet (bench/dq_sim.py, bench/dq_dispatchers.py,
bench/dq_trace.py).

    .venv-dev/bin/python bench/dispatch_quality.py [--scenarios balanced-3 bursts ...]
        [--csv my-trace.csv --csv-workers 10] [--chart bench/dispatch_quality.png]
        [--write-benchmarks]

Prints one markdown table per scenario and the targets, writes the admission-time CDF
chart, and with --write-benchmarks puts the tables into BENCHMARKS.md between its
dispatch-quality markers.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

# The bench modules beside this file, and the project (controller/) above it.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from dq_dispatchers import AllAtOnce, Dispatcher, Incremental, OurPolicy
from dq_sim import Settings, Sim
from dq_trace import SCENARIOS, Scenario, TraceError, fleet, read_csv, scenario

from controller.model import Policy

ROOT = Path(__file__).resolve().parent.parent
BEGIN = "<!-- dispatch-quality:begin (written by bench/dispatch_quality.py) -->"
END = "<!-- dispatch-quality:end -->"


KUEUE = ("AllAtOnce", "Incremental")


def dispatchers() -> list[Dispatcher]:
    """Fresh dispatchers for one run: Kueue's two and the project's default policy."""
    return [  # Kueue's first (the KUEUE names), then ours
        AllAtOnce(),
        Incremental(),
        OurPolicy(Policy(), "policy"),
    ]


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def measure(sim: Sim) -> dict[str, float | list[float]]:
    wls = sim.wls
    waits = [
        w.admitted_at - w.first_reserved
        for w in wls
        if w.admitted_at is not None and w.first_reserved is not None
    ]
    jobs: dict[str, list] = {}
    for w in wls:
        jobs.setdefault(w.job.name, []).append(w)
    jct = [
        max(w.finished_at for w in parts) - parts[0].arrival  # type: ignore[type-var]
        for parts in jobs.values()
        if all(w.finished_at is not None for w in parts)
    ]
    finished = [w.finished_at for w in wls if w.finished_at is not None]
    start = min((w.arrival for w in wls), default=0.0)
    span = sim.now or 1.0
    return {
        "waits": waits,
        "p50": percentile(waits, 50),
        "p95": percentile(waits, 95),
        "p99": percentile(waits, 99),
        "jct_p50": percentile(jct, 50),
        "jct_p95": percentile(jct, 95),
        "makespan": (max(finished) - start) if finished else math.nan,
        "util": sum(w.share_area for w in sim.workers.values()) / len(sim.workers) / span,
        "copies": sim.stats.copies / max(len(wls), 1),
        "preemptions": sim.stats.preemptions,
        "evictions": sim.stats.evictions,
        "lost": sim.stats.lost_admissions,
        "never": sum(1 for w in wls if w.admitted_at is None),
        "workloads": len(wls),
        "decision_us": sim.stats.decision_seconds / max(sim.stats.decisions, 1) * 1e6,
        "decisions": sim.stats.decisions,
    }


def run_scenario(sc: Scenario, settings: Settings) -> dict[str, dict]:
    return {d.name: measure(Sim(sc, d, settings).run()) for d in dispatchers()}


def minutes(seconds: float) -> str:
    return "n/a" if math.isnan(seconds) else f"{seconds / 60:.1f}"


def table(sc: Scenario, rows: dict[str, dict]) -> str:
    out = [
        f"**{sc.name}**: {sc.about}; {len(sc.jobs)} jobs "
        f"({next(iter(rows.values()))['workloads']} workloads)",
        "",
        "| dispatcher | admit P50 | P95 | P99 | JCT P50 | JCT P95 | makespan | "
        "utilization | copies/wl | preemptions | evictions | lost admissions | never ran | "
        "µs/decision |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows.items():
        out.append(
            f"| {name} | {minutes(r['p50'])} | {minutes(r['p95'])} | {minutes(r['p99'])} | "
            f"{minutes(r['jct_p50'])} | {minutes(r['jct_p95'])} | {minutes(r['makespan'])} | "
            f"{r['util']:.0%} | {r['copies']:.2f} | {r['preemptions']} | {r['evictions']} | "
            f"{r['lost']} | {r['never']} | {r['decision_us']:.0f} |"
        )
    return "\n".join(out)


def targets(results: dict[str, tuple[Scenario, dict[str, dict]]], row: str = "policy") -> str:
    """The issue's targets for one of our rows, met or not, per scenario."""
    out = [
        f"| scenario | P95 {row} / AllAtOnce (≤ 1.10) | copies/wl (≤ 1.2) | "
        f"preemptions {row} / AllAtOnce (≤ 0.20) | P95 Incremental / {row} (≥ 2, uneven) |",
        "|---|---:|---:|---:|---:|",
    ]

    def verdict(ok: bool) -> str:
        return "met" if ok else "**missed**"

    for name, (sc, rows) in results.items():
        ours, aao, inc = rows[row], rows["AllAtOnce"], rows["Incremental"]
        ratio = ours["p95"] / aao["p95"] if aao["p95"] else math.inf
        pre = (
            ours["preemptions"] / aao["preemptions"]
            if aao["preemptions"]
            else (0.0 if not ours["preemptions"] else math.inf)
        )
        better = inc["p95"] / ours["p95"] if ours["p95"] else math.inf
        uneven = (
            f"{better:.1f}x {verdict(better >= 2)}" if sc.uneven else f"{better:.1f}x (even load)"
        )
        out.append(
            f"| {name} | {ratio:.2f} {verdict(ratio <= 1.1)} | "
            f"{ours['copies']:.2f} {verdict(ours['copies'] <= 1.2)} | "
            f"{ours['preemptions']}/{aao['preemptions']} {verdict(pre <= 0.2)} | {uneven} |"
        )
    return "\n".join(out)


def chart(results: dict[str, tuple[Scenario, dict[str, dict]]], path: Path) -> None:
    """Admission-time CDF per dispatcher, one panel per scenario."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, len(results))
    rows = math.ceil(len(results) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax, (name, (sc, by)) in zip(axes.flat, results.items(), strict=False):
        for dispatcher, r in by.items():
            waits = sorted(max(w / 60, 0.01) for w in r["waits"])
            n = r["workloads"]
            ys = [(i + 1) / n for i in range(len(waits))]
            ax.step(waits, ys, where="post", label=dispatcher)
        ax.set_xscale("log")
        ax.set_title(f"{name} ({len(sc.workers)} workers)", fontsize=10)
        ax.set_xlabel("quota reserved → admitted on a worker (min)")
        ax.set_ylabel("share of workloads")
        ax.set_ylim(0, 1.02)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    for ax in list(axes.flat)[len(results) :]:
        ax.set_visible(False)
    fig.suptitle("Time to admission, CDF (a curve below 1 at the right: workloads never admitted)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write_benchmarks(text: str, path: Path) -> str:
    """Replace what is between the markers in BENCHMARKS.md; the error says how to fix."""
    doc = path.read_text()
    if BEGIN not in doc or END not in doc:
        return f"{path}: no dispatch-quality markers; add the lines {BEGIN} and {END}"
    head, rest = doc.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    path.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}")
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", nargs="*", default=list(SCENARIOS), choices=SCENARIOS)
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--csv", type=Path, help="replay this trace as well")
    parser.add_argument(
        "--csv-workers", type=int, default=10, help="64 cores each, 16 GPUs on every third"
    )
    parser.add_argument("--staleness", type=float, default=Settings.staleness)
    parser.add_argument("--admission-delay", type=float, default=Settings.admission_delay)
    parser.add_argument("--chart", type=Path, default=ROOT / "bench" / "dispatch_quality.png")
    parser.add_argument("--write-benchmarks", action="store_true")
    args = parser.parse_args(argv)
    if args.staleness <= 0 or args.admission_delay < 0 or args.csv_workers < 1:
        print(
            "error: --staleness must be more than 0 s, --admission-delay at least 0 s and "
            "--csv-workers at least 1",
            file=sys.stderr,
        )
        return 2
    settings = Settings(admission_delay=args.admission_delay, staleness=args.staleness)
    chosen = [scenario(n, args.seed) for n in args.scenarios]
    if args.csv:
        try:
            workers = fleet(args.csv_workers, gpu_workers=tuple(range(0, args.csv_workers, 3)))
            chosen.append(read_csv(args.csv, workers))
        except TraceError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if not chosen:
        print("error: nothing to run; name --scenarios or give --csv FILE", file=sys.stderr)
        return 2
    results = {}
    for sc in chosen:
        results[sc.name] = (sc, run_scenario(sc, settings))
        print(table(sc, results[sc.name][1]) + "\n", flush=True)
    summary = "\n\n".join(
        targets(results, row) for row in next(iter(results.values()))[1] if row not in KUEUE
    )
    print(summary)
    chart(results, args.chart)
    print(f"\nchart: {args.chart}")
    if args.write_benchmarks:
        tables = "\n\n".join(table(sc, rows) for sc, rows in results.values())
        problem = write_benchmarks(f"{tables}\n\nTargets:\n\n{summary}", ROOT / "BENCHMARKS.md")
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
