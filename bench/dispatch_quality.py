"""Dispatch quality: our policy beside Kueue's AllAtOnce and Incremental dispatchers and an
oracle, on the same seeded traces of a simulated MultiKueue fleet (bench/dq_sim.py,
bench/dq_dispatchers.py, bench/dq_trace.py), over several seeds.

    .venv-dev/bin/python bench/dispatch_quality.py [--scenario balanced-3 bursts ...]
        [--seeds 8] [--jobs 2] [--csv my-trace.csv --csv-workers 10]
        [--chart bench/dispatch_quality.png] [--write-benchmarks]
        [--strategy BestFit] [--hedge-clusters 5 ...] [--hedge-share-percent 90]

Prints one markdown table per scenario (median over the seeds, min-max beside it) and the
targets, writes the admission-time CDF chart (median curve, min-max band), and with
--write-benchmarks puts the tables into BENCHMARKS.md between its dispatch-quality markers.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

# The bench modules beside this file, and the project (controller/) above it.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from dq_dispatchers import AllAtOnce, Incremental, Oracle, OurPolicy, Present
from dq_sim import Dispatcher, Settings, Sim
from dq_trace import SCENARIOS, Scenario, TraceError, fleet, read_csv, scenario

from controller.model import STRATEGIES, Policy

ROOT = Path(__file__).resolve().parent.parent
BEGIN = "<!-- dispatch-quality:begin (written by bench/dispatch_quality.py) -->"
END = "<!-- dispatch-quality:end -->"


KUEUE = ("AllAtOnce", "Incremental")
ORACLE = "oracle"
PRESENT = "present"  # the oracle's view of the present, no run times: a reachable bound
Measures = dict[str, float | list[float]]
# dispatcher -> one measure per seed, in seed order
Rows = dict[str, list[Measures]]


# Variants of the policy measured beside its default, each a row of its own: (row, policy).
Variants = tuple[tuple[str, Policy], ...]


def variants(strategy: str, hedges: list[int], share: float) -> Variants:
    """The rows `--strategy` and `--hedge-clusters` ask for: the policy with that strategy
    (where it is not the default's), and with it hedging on each of `hedges` clusters (1 is
    off). A row that would be the default policy's, or another row's again, is left out."""
    default = Policy()
    named = "" if strategy == default.strategy else f"{strategy}, "
    rows: list[tuple[str, Policy]] = [(f"policy, {strategy}", Policy(strategy=strategy))]
    rows += [
        (
            f"policy, {named}hedge {n}",
            Policy(strategy=strategy, hedge_clusters=n, hedge_share=share),
        )
        for n in hedges
    ]
    kept: list[tuple[str, Policy]] = []
    for row, policy in rows:
        if policy != default and all(policy != p for _, p in kept):
            kept.append((row, policy))
    return tuple(kept)


def dispatchers(extra: Variants = ()) -> list[Dispatcher]:
    """Fresh dispatchers for one run: Kueue's two, the project's default policy (and each
    variant of it in `extra`), the bound a dispatcher could reach (`present`) and the
    oracle."""
    return [  # Kueue's first (the KUEUE names), then ours, then the limit
        AllAtOnce(),
        Incremental(),
        OurPolicy(Policy(), "policy"),
        *(OurPolicy(policy, row) for row, policy in extra),
        Present(),
        Oracle(),
    ]


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def measure(sim: Sim) -> Measures:
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


def _run_one(task: tuple[Scenario, int, Settings, Variants]) -> Measures:
    sc, index, settings, extra = task
    return measure(Sim(sc, dispatchers(extra)[index], settings).run())


def run_all(
    scenarios: list[Scenario], settings: Settings, jobs: int = 1, extra: Variants = ()
) -> dict[str, Rows]:
    """Every dispatcher on every scenario (one Scenario per seed, seeds in order), in `jobs`
    processes. Returns scenario name -> dispatcher -> measures per seed."""
    names = [d.name for d in dispatchers(extra)]
    tasks = [(sc, i, settings, extra) for sc in scenarios for i in range(len(names))]
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            # The biggest runs first, so that no process is left with one at the end.
            order = sorted(range(len(tasks)), key=lambda t: -len(tasks[t][0].jobs))
            futures = {t: pool.submit(_run_one, tasks[t]) for t in order}
            results = [futures[t].result() for t in range(len(tasks))]
    else:
        results = [_run_one(t) for t in tasks]
    out: dict[str, Rows] = {}
    for (sc, i, _, _), result in zip(tasks, results, strict=True):
        out.setdefault(sc.name, {n: [] for n in names})[names[i]].append(result)
    return out


def run_scenario(sc: Scenario, settings: Settings) -> dict[str, Measures]:
    """One seed of one scenario, every dispatcher."""
    return {name: rows[0] for name, rows in run_all([sc], settings)[sc.name].items()}


def median(rows: list[Measures], key: str) -> float:
    values = [float(r[key]) for r in rows if not math.isnan(float(r[key]))]  # type: ignore[arg-type]
    return statistics.median(values) if values else math.nan


def spread(rows: list[Measures], key: str, show: str = "{:.1f}", scale: float = 1.0) -> str:
    """The median over seeds, and min-max beside it when there is more than one seed."""
    values = [float(r[key]) / scale for r in rows]  # type: ignore[arg-type]
    if any(math.isnan(v) for v in values):
        return "n/a"
    mid = show.format(statistics.median(values))
    if len(values) == 1:
        return mid
    return f"{mid} ({show.format(min(values))}-{show.format(max(values))})"


def table(sc: Scenario, rows: Rows) -> str:
    first = next(iter(rows.values()))
    seeds = len(first)
    jobs = f"{len(sc.jobs)} jobs, {first[0]['workloads']} workloads"
    if seeds > 1:
        jobs = f"{seeds} seeds; seed {sc.seed}: {jobs}"
    out = [
        f"**{sc.name}**: {sc.about}; {jobs}",
        "",
        "| dispatcher | admit P50 | P95 | P99 | JCT P95 | utilization | copies/wl | "
        "preemptions | evictions | lost | never ran | µs/decision |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows.items():
        out.append(
            f"| {name} | {spread(r, 'p50', scale=60)} | {spread(r, 'p95', scale=60)} | "
            f"{spread(r, 'p99', scale=60)} | {spread(r, 'jct_p95', scale=60)} | "
            f"{spread(r, 'util', '{:.0%}')} | {spread(r, 'copies', '{:.2f}')} | "
            f"{spread(r, 'preemptions', '{:.0f}')} | {spread(r, 'evictions', '{:.0f}')} | "
            f"{spread(r, 'lost', '{:.0f}')} | {spread(r, 'never', '{:.0f}')} | "
            f"{median(r, 'decision_us'):.0f} |"
        )
    return "\n".join(out)


# Issue 39's bounds: median copies per workload, and preemptions against AllAtOnce's.
COPIES_BOUND = 1.5
PREEMPTION_SHARE = 0.25


def targets(results: dict[str, tuple[Scenario, Rows]], row: str = "policy") -> str:
    """The targets for one of our rows, met or not, per scenario, on the medians over
    seeds: issue 39's, a tail no worse than AllAtOnce's (P95 and P99), at most
    COPIES_BOUND copies per workload, at most PREEMPTION_SHARE of AllAtOnce's preemptions where
    it preempts; and issue 30's, twice Incremental's P95
    where load is uneven, and within 1.5x of the `present` bound's P95 and P99."""
    out = [
        f"| scenario | P95 {row} / AllAtOnce (≤ 1) | P99 {row} / AllAtOnce (≤ 1) | "
        f"copies/wl (≤ {COPIES_BOUND}) | preemptions {row} / AllAtOnce (≤ {PREEMPTION_SHARE}) | "
        f"P95 Incremental / {row} (≥ 2, uneven) | P95, P99 {row} / {PRESENT} (≤ 1.5x) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]

    def verdict(ok: bool) -> str:
        return "met" if ok else "**missed**"

    def ratio(a: float, b: float) -> float:
        return a / b if b else (0.0 if not a else math.inf)

    def minutes(a: float, b: float, ok: bool) -> str:
        return f"{a / 60:.1f} / {b / 60:.1f} min {verdict(ok)}"

    for name, (sc, rows) in results.items():
        ours, aao, inc = rows[row], rows["AllAtOnce"], rows["Incremental"]
        p95, p95_aao, p95_inc = median(ours, "p95"), median(aao, "p95"), median(inc, "p95")
        p99, p99_aao = median(ours, "p99"), median(aao, "p99")
        copies = median(ours, "copies")
        pre, pre_aao = median(ours, "preemptions"), median(aao, "preemptions")
        better = ratio(p95_inc, p95)
        uneven = (
            f"{better:.1f}x {verdict(better >= 2)}" if sc.uneven else f"{better:.1f}x (even load)"
        )
        preempts = (
            f"{pre:.0f} / {pre_aao:.0f} {verdict(ratio(pre, pre_aao) <= PREEMPTION_SHARE)}"
            if pre_aao
            else f"{pre:.0f} / 0 (no preemption)"
        )
        bound = ""
        if PRESENT in rows:
            b95, b99 = median(rows[PRESENT], "p95"), median(rows[PRESENT], "p99")
            worst = max(ratio(p95, b95), ratio(p99, b99))
            bound = f"{ratio(p95, b95):.1f}x, {ratio(p99, b99):.1f}x {verdict(worst <= 1.5)}"
        out.append(
            f"| {name} | {minutes(p95, p95_aao, p95 <= p95_aao)} | "
            f"{minutes(p99, p99_aao, p99 <= p99_aao)} | "
            f"{copies:.2f} {verdict(copies <= COPIES_BOUND)} | "
            f"{preempts} | {uneven} | {bound} |"
        )
    return "\n".join(out)


def _cdf(waits: list[float], n: int, grid: list[float]) -> list[float]:
    ordered = sorted(waits)
    out, i = [], 0
    for x in grid:
        while i < len(ordered) and ordered[i] / 60 <= x:
            i += 1
        out.append(i / max(n, 1))
    return out


def chart(results: dict[str, tuple[Scenario, Rows]], path: Path) -> None:
    """Admission-time CDF per dispatcher, one panel per scenario: the median over seeds,
    and the band from the lowest to the highest."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, len(results))
    rows = math.ceil(len(results) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    grid = [0.01 * 10 ** (k / 40) for k in range(0, 201)]  # 0.01 to 1,000 minutes
    for ax, (name, (sc, by)) in zip(axes.flat, results.items(), strict=False):
        for dispatcher, runs in by.items():
            curves = [_cdf(r["waits"], int(r["workloads"]), grid) for r in runs]  # type: ignore[arg-type]
            mid = [statistics.median(c[k] for c in curves) for k in range(len(grid))]
            low = [min(c[k] for c in curves) for k in range(len(grid))]
            high = [max(c[k] for c in curves) for k in range(len(grid))]
            (line,) = ax.step(grid, mid, where="post", label=dispatcher)
            if len(curves) > 1:
                ax.fill_between(grid, low, high, step="post", alpha=0.15, color=line.get_color())
        ax.set_xscale("log")
        ax.set_title(f"{name} ({len(sc.workers)} workers)", fontsize=10)
        ax.set_xlabel("quota reserved → admitted on a worker (min)")
        ax.set_ylabel("share of workloads")
        ax.set_ylim(0, 1.02)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    for ax in list(axes.flat)[len(results) :]:
        ax.set_visible(False)
    fig.suptitle(
        "Time to admission, CDF: median over seeds, band min-max "
        "(a curve below 1 at the right: workloads never admitted)"
    )
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
    parser.add_argument(
        "--scenario",
        "--scenarios",
        dest="scenarios",
        nargs="*",
        default=list(SCENARIOS),
        choices=SCENARIOS,
        help="the scenarios to run (all by default; none with only --csv)",
    )
    parser.add_argument("--seeds", type=int, default=8, help="run seeds 1..N of each scenario")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--csv", type=Path, help="replay this trace as well (one seed)")
    parser.add_argument(
        "--csv-workers", type=int, default=10, help="64 cores each, 16 GPUs on every third"
    )
    parser.add_argument("--staleness", type=float, default=Settings.staleness)
    parser.add_argument("--admission-delay", type=float, default=Settings.admission_delay)
    parser.add_argument("--release-delay", type=float, default=Settings.release_delay)
    parser.add_argument("--chart", type=Path, default=ROOT / "bench" / "dispatch_quality.png")
    parser.add_argument("--write-benchmarks", action="store_true")
    parser.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default=Policy().strategy,
        help="the strategy of the variant rows (a row of its own where it is not the default's)",
    )
    parser.add_argument(
        "--hedge-clusters",
        type=int,
        nargs="+",
        default=[],
        metavar="N",
        help="also run the policy hedging on N clusters (1, off, to 20; a row each, but "
        "where it is the default policy)",
    )
    parser.add_argument(
        "--hedge-share-percent",
        type=int,
        default=90,
        help="the share of each queue a workload needs to be hedged (1 to 100)",
    )
    args = parser.parse_args(argv)
    if any(not 1 <= n <= 20 for n in args.hedge_clusters) or not (
        1 <= args.hedge_share_percent <= 100
    ):
        print(
            "error: --hedge-clusters takes whole numbers from 1 (off) to 20, "
            "--hedge-share-percent one from 1 to 100",
            file=sys.stderr,
        )
        return 2
    extra = variants(args.strategy, args.hedge_clusters, args.hedge_share_percent / 100)
    if (
        args.staleness <= 0
        or args.admission_delay < 0
        or args.release_delay < 0
        or args.csv_workers < 1
        or args.seeds < 1
        or args.jobs < 1
    ):
        print(
            "error: --staleness must be more than 0 s, --admission-delay and --release-delay "
            "at least 0 s, --csv-workers, --seeds and --jobs at least 1",
            file=sys.stderr,
        )
        return 2
    settings = Settings(
        admission_delay=args.admission_delay,
        staleness=args.staleness,
        release_delay=args.release_delay,
    )
    chosen = [scenario(n, seed) for n in args.scenarios for seed in range(1, args.seeds + 1)]
    if args.csv:
        try:
            workers = fleet(args.csv_workers, gpu_workers=tuple(range(0, args.csv_workers, 3)))
            chosen.append(read_csv(args.csv, workers))
        except TraceError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if not chosen:
        print("error: nothing to run; name --scenario or give --csv FILE", file=sys.stderr)
        return 2
    by_name = run_all(chosen, settings, args.jobs, extra)
    first = {}
    for sc in chosen:
        first.setdefault(sc.name, sc)
    results = {name: (first[name], rows) for name, rows in by_name.items()}
    for sc, rows in results.values():
        print(table(sc, rows) + "\n", flush=True)
    summary = "\n\n".join(
        targets(results, row)
        for row in next(iter(results.values()))[1]
        if row not in KUEUE and row not in (ORACLE, PRESENT)
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
