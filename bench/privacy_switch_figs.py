"""Figs. 8 and 9 of the privacy-switch paper, executed on Spark (the paper simulated them).

One command: ``python -m bench.privacy_switch_figs`` (full) or ``--quick`` (seconds, a
smoke run; ``tests/spark/test_privacy_switch_figs.py`` runs it). Export
``PYSPARK_PYTHON`` first (see docs/experiments.md).

* Fig. 8 (section 6.2): execution time of ``non-shared``, ``shared`` and ``switches``
  (every user has access) as the degree of sharing varies, for 3 queries / 15 operators
  and 5 queries / 25 operators.
* Fig. 9 (section 6.3): 3 queries / 20 operators; execution time of the shared network
  with post-filtering only and with switches as 0, 1 or 2 of the 3 queries lose all
  their users (every combination: 3 single and 3 double losses).

Networks come from ``bench.prs_networks`` (seeded), execution from ``bench.prs_executor``
(batch DataFrames over Parquet streams written once, untimed). Everything runs in one
Spark session. Every network runs every case once untimed (warm-up: JIT, planning and
code generation of its plans), then ``--reps`` times with the order of its cases rotated
per repetition, networks interleaved. ``--quick`` runs one network per
figure (Fig. 8 only for 3 queries), 100 rows, one repetition, no warm-up. Each sample is
one run of the whole network; a figure's time is the median over networks x
repetitions, with min and max; savings are medians of ratios paired within one network
and repetition. Post-filtering does the same work
whatever access was lost (every output job runs, outputs are dropped at the end), so it
is measured once per network and repetition and paired with every loss pattern.

Writes ``bench/results/privacy-switches.json``, ``docs/img/prs-fig8.png``,
``docs/img/prs-fig9.png`` and the section ``MEASURED`` of ``docs/experiments.md``
(``--out DIR`` puts all of them under DIR instead).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import pyspark

from bench.plots import plt
from bench.prs_executor import Executor, write_streams
from bench.prs_networks import GeneratedNetwork, generate
from bench.revocation_latency import write_section
from streamshield.engine.session import spark_session

ROOT = Path(__file__).resolve().parent.parent
MEASURED = "## Privacy switches, Figs. 8 and 9 on Spark: measured"
FIG8_SETTINGS = ((3, 15), (5, 25))
FIG9_SETTING = (3, 20)
DEGREES = (0.2, 0.5, 0.8)

# The paper's numbers, from its text (section 6.2 and 6.3). Figs. 8 and 9 themselves are
# not in our copy of the paper (only their captions), so nothing here is digitised from a
# plot: these are the averages the text states, over all degrees of sharing.
PAPER = {
    "fig8_sharing_saving": 0.92,
    "fig8_switch_overhead": 0.005,
    "fig9_saving_1_lost": 0.19,
    "fig9_saving_2_lost": 0.38,
    "fig9_mean_switches": 11,
}


@dataclass(frozen=True)
class Case:
    """One measured configuration of one network: a mode and the queries that lost all
    their users."""

    mode: str
    lost: frozenset[str] = frozenset()

    @property
    def label(self) -> str:
        lost = ",".join(sorted(self.lost)) or "-"
        return f"{self.mode}[{lost}]"


@dataclass
class Measured:
    figure: str
    queries: int
    operators: int
    degree: float
    generated: GeneratedNetwork
    cases: tuple[Case, ...]
    times: dict[str, list[float]]


def fig9_cases(names: Sequence[str], quick: bool) -> tuple[Case, ...]:
    cases = [Case("shared"), Case("switches")]
    for k in (1, 2):
        patterns = list(combinations(sorted(names), k))
        for lost in patterns[:1] if quick else patterns:
            cases.append(Case("switches", frozenset(lost)))
    return tuple(cases)


def fig8_settings(quick: bool) -> tuple[tuple[int, int], ...]:
    return FIG8_SETTINGS[:1] if quick else FIG8_SETTINGS


def plan(args: argparse.Namespace) -> list[Measured]:
    out = []
    for n, (queries, operators) in enumerate(fig8_settings(args.quick)):
        for degree in args.degrees:
            for i in range(args.networks):
                g = generate(queries, operators, degree, seed=args.seed + 100 * n + i)
                cases = (Case("non-shared"), Case("shared"), Case("switches"))
                out.append(Measured("fig8", queries, operators, degree, g, cases, {}))
    queries, operators = FIG9_SETTING
    for degree in args.degrees:
        for i in range(args.networks):
            g = generate(queries, operators, degree, seed=args.seed + 900 + i)
            cases = fig9_cases(list(g.queries), args.quick)
            out.append(Measured("fig9", queries, operators, degree, g, cases, {}))
    return out


def measure(executor: Executor, items: list[Measured], reps: int, warm_up: bool) -> None:
    """Every case of every network once, untimed (warm-up: a network's first run plans
    and compiles code for every one of its plans and was 1.5-3x slower than the later
    ones), then ``reps`` rounds over all networks, each network's cases rotated."""
    for item in items if warm_up else ():
        for case in item.cases:
            executor.run(case.mode, item.generated, item.generated.state(case.lost))
    for rep in range(reps):
        for n, item in enumerate(items):
            print(f"rep {rep + 1}/{reps}, network {n + 1}/{len(items)}", file=sys.stderr)
            k = rep % len(item.cases)
            for case in item.cases[k:] + item.cases[:k]:
                run = executor.run(case.mode, item.generated, item.generated.state(case.lost))
                item.times.setdefault(case.label, []).append(run.seconds)


def stats(values: Sequence[float], digits: int = 3) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
    }


def paired(item: Measured, numerator: str, denominator: str) -> list[float]:
    return [a / b for a, b in zip(item.times[numerator], item.times[denominator], strict=True)]


def summarise(items: list[Measured], args: argparse.Namespace) -> dict:
    fig8: dict[str, dict] = {}
    for queries, operators in fig8_settings(args.quick):
        key = f"{queries}q-{operators}ops"
        fig8[key] = {}
        for degree in args.degrees:
            mine = [
                m
                for m in items
                if m.figure == "fig8" and m.degree == degree and m.queries == queries
            ]
            row = {
                mode: stats([t for m in mine for t in m.times[Case(mode).label]])
                for mode in ("non-shared", "shared", "switches")
            }
            shared = [r for m in mine for r in paired(m, "shared[-]", "non-shared[-]")]
            switch = [r for m in mine for r in paired(m, "switches[-]", "shared[-]")]
            row["sharing_saving"] = round(1 - statistics.median(shared), 3)
            row["switch_overhead"] = round(statistics.median(switch) - 1, 3)
            row["networks"] = [m.generated.summary() for m in mine]
            fig8[key][str(degree)] = row
    fig9: dict[str, dict] = {}
    for degree in args.degrees:
        mine = [m for m in items if m.figure == "fig9" and m.degree == degree]
        row = {
            "post-filter": stats([t for m in mine for t in m.times["shared[-]"]]),
            "switches, full access": stats([t for m in mine for t in m.times["switches[-]"]]),
        }
        for k in (1, 2):
            labels = [c.label for c in mine[0].cases if len(c.lost) == k]
            times = [t for m in mine for c in m.cases if len(c.lost) == k for t in m.times[c.label]]
            ratios = [
                r
                for m in mine
                for c in m.cases
                if len(c.lost) == k
                for r in paired(m, c.label, "shared[-]")
            ]
            off = [
                len(_off(m.generated, c)) / m.generated.operators
                for m in mine
                for c in m.cases
                if len(c.lost) == k
            ]
            row[f"switches, {k} lost"] = stats(times)
            row[f"saving_{k}_lost"] = round(1 - statistics.median(ratios), 3)
            row[f"operators_off_{k}_lost"] = round(statistics.mean(off), 3)
            row[f"patterns_{k}_lost"] = len(labels)
        overhead = [r for m in mine for r in paired(m, "switches[-]", "shared[-]")]
        row["switch_overhead"] = round(statistics.median(overhead) - 1, 3)
        row["networks"] = [m.generated.summary() for m in mine]
        fig9[str(degree)] = row
    return {"fig8": fig8, "fig9": fig9}


def _off(generated: GeneratedNetwork, case: Case) -> frozenset:
    from streamshield.network.switch_state import operators_off

    return operators_off(generated.network, generated.state(case.lost))


# -- plots and tables ---------------------------------------------------------------------


def _errorbar(ax, xs, rows, label, **style) -> None:  # type: ignore[no-untyped-def]
    med = [r["median"] for r in rows]
    low = [r["median"] - r["min"] for r in rows]
    high = [r["max"] - r["median"] for r in rows]
    ax.errorbar(xs, med, yerr=[low, high], marker="o", capsize=3, label=label, **style)


Line = tuple[list[float], str, str, str]
"""y values, label, marker, line style."""


def _relative_panel(ax, xs: list[float], ours: list[Line], paper: list[tuple[float, str]]) -> None:  # type: ignore[no-untyped-def]
    """Our percentages per degree against the paper's (horizontal: averages from its text)."""
    for ys, label, marker, style in ours:
        ax.plot(xs, ys, marker=marker, ls=style, label=label)
    for (value, label), colour in zip(paper, ("k", "grey"), strict=False):
        ax.axhline(100 * value, color=colour, ls="--", label=f"paper: {label} (text)")
    ax.set_title("relative, ours vs the paper's averages (stated in its text)", fontsize=10)
    ax.set_ylabel("% (median of paired ratios)")


def _finish(fig, axes, xs: list[float], path: Path) -> None:  # type: ignore[no-untyped-def]
    for ax in axes:
        ax.set_xlabel("degree of sharing (%)")
        ax.set_xticks(xs)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_fig8(result: dict, path: Path) -> None:
    fig8, degrees = result["fig8"], result["config"]["degrees"]
    xs = [100 * d for d in degrees]
    fig, axes = plt.subplots(1, len(fig8) + 1, figsize=(5.4 * (len(fig8) + 1), 4.2))
    for ax, (key, rows) in zip(axes, fig8.items(), strict=False):
        for mode in ("non-shared", "shared", "switches"):
            _errorbar(ax, xs, [rows[str(d)][mode] for d in degrees], f"ours: {mode}")
        ax.set_yscale("log", base=2)
        ax.set_title(
            f"Fig. 8 on Spark, {key.replace('q-', ' queries, ').replace('ops', ' operators')}",
            fontsize=10,
        )
        ax.set_ylabel("network execution time (s, log2; median, min-max)")
    ours: list[Line] = []
    for key, rows in fig8.items():
        ours.append(
            (
                [100 * rows[str(d)]["sharing_saving"] for d in degrees],
                f"ours {key}: sharing saves",
                "o",
                "-",
            )
        )
        ours.append(
            (
                [100 * rows[str(d)]["switch_overhead"] for d in degrees],
                f"ours {key}: switches cost",
                "s",
                ":",
            )
        )
    paper = [
        (PAPER["fig8_sharing_saving"], "sharing saves ~92%"),
        (PAPER["fig8_switch_overhead"], "switches cost ~0.5%"),
    ]
    _relative_panel(axes[-1], xs, ours, paper)
    _finish(fig, axes, xs, path)


def plot_fig9(result: dict, path: Path) -> None:
    fig9, degrees = result["fig9"], result["config"]["degrees"]
    xs = [100 * d for d in degrees]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for series in ("post-filter", "switches, full access", "switches, 1 lost", "switches, 2 lost"):
        _errorbar(axes[0], xs, [fig9[str(d)][series] for d in degrees], f"ours: {series}")
    axes[0].set_title("Fig. 9 on Spark: 3 queries, 20 operators, 0-2 lose all users", fontsize=10)
    axes[0].set_ylabel("network execution time (s; median, min-max)")
    axes[0].set_ylim(bottom=0)
    ours: list[Line] = []
    for k, marker in ((1, "o"), (2, "s")):
        ours.append(
            (
                [100 * fig9[str(d)][f"saving_{k}_lost"] for d in degrees],
                f"ours: switches save vs post-filter, {k} lost",
                marker,
                "-",
            )
        )
        ours.append(
            (
                [100 * fig9[str(d)][f"operators_off_{k}_lost"] for d in degrees],
                f"ours: operators off, {k} lost",
                marker,
                ":",
            )
        )
    paper = [
        (PAPER["fig9_saving_1_lost"], "19% saving, 1 lost"),
        (PAPER["fig9_saving_2_lost"], "38% saving, 2 lost"),
    ]
    _relative_panel(axes[1], xs, ours, paper)
    _finish(fig, axes, xs, path)


def _cell(s: dict) -> str:
    return f"{s['median']:.2f} [{s['min']:.2f}-{s['max']:.2f}]"


def markdown(result: dict, command: str) -> str:
    c = result["config"]
    lines = [
        MEASURED,
        "",
        f"Generated by `{command}` ({result['seconds']:.0f} s; "
        f"1-minute load average {result['load_before']} before, {result['load_after']} "
        "after, on the shared 2 cores). "
        f"{c['rows']} rows per stream, {c['networks']} networks per degree and setting, "
        f"{c['reps']} interleaved repetitions after one warm-up run of every case; times "
        "are seconds for one run of the whole network, median [min-max] over networks x "
        "repetitions; savings are medians of ratios paired within one network and "
        "repetition.",
        "",
        "**Fig. 8** (every user has access):",
        "",
        "| setting | degree | operators shared | non-shared s | shared s | switches s "
        "| sharing saves | switches cost |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, rows in result["fig8"].items():
        for d in c["degrees"]:
            r = rows[str(d)]
            shared = statistics.mean(n["degree"] for n in r["networks"])
            lines.append(
                f"| {key} | {d:.0%} | {shared:.0%} | {_cell(r['non-shared'])} "
                f"| {_cell(r['shared'])} | {_cell(r['switches'])} "
                f"| {r['sharing_saving']:.1%} | {r['switch_overhead']:+.1%} |"
            )
    lines += [
        "",
        f"Paper (text, averaged over its degrees): sharing saves ~"
        f"{PAPER['fig8_sharing_saving']:.0%}, switches cost ~"
        f"{PAPER['fig8_switch_overhead']:.1%}.",
        "",
        "**Fig. 9** (3 queries, 20 operators; post-filter = shared network, outputs of "
        "queries without users dropped at the end):",
        "",
        "| degree | switches placed | post-filter s | switches s | 1 lost s | 2 lost s "
        "| saving 1 lost | saving 2 lost | operators off 1 / 2 lost | switches cost |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for d in c["degrees"]:
        r = result["fig9"][str(d)]
        placed = statistics.mean(n["switches"] for n in r["networks"])
        lines.append(
            f"| {d:.0%} | {placed:.1f} | {_cell(r['post-filter'])} "
            f"| {_cell(r['switches, full access'])} | {_cell(r['switches, 1 lost'])} "
            f"| {_cell(r['switches, 2 lost'])} | {r['saving_1_lost']:.1%} "
            f"| {r['saving_2_lost']:.1%} | {r['operators_off_1_lost']:.0%} / "
            f"{r['operators_off_2_lost']:.0%} | {r['switch_overhead']:+.1%} |"
        )
    lines += [
        "",
        f"Paper (text): {PAPER['fig9_saving_1_lost']:.0%} saving with 1 query lost, "
        f"{PAPER['fig9_saving_2_lost']:.0%} with 2; on average "
        f"{PAPER['fig9_mean_switches']} switches per network.",
        "",
        "Plots: `docs/img/prs-fig8.png`, `docs/img/prs-fig9.png`; raw samples in "
        "`bench/results/privacy-switches.json`.",
        "",
    ]
    return "\n".join(lines)


def load() -> float:
    return round(os.getloadavg()[0], 1)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, a smoke run")
    parser.add_argument("--rows", type=int, help="rows per stream (full 400000, quick 100)")
    parser.add_argument("--reps", type=int, help="timed repetitions (full 3, quick 1)")
    parser.add_argument("--networks", type=int, help="networks per degree (full 2, quick 1)")
    parser.add_argument("--degrees", type=float, nargs="+")
    parser.add_argument("--seed", type=int, default=8)
    parser.add_argument("--out", type=Path, help="root for bench/, docs/ (default: repo)")
    args = parser.parse_args(argv)
    quick = args.quick
    args.rows = args.rows or (100 if quick else 400_000)
    args.reps = args.reps or (1 if quick else 3)
    args.networks = args.networks or (1 if quick else 2)
    args.degrees = args.degrees or ([0.5] if quick else list(DEGREES))
    return args


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse(argv)
    out = args.out or ROOT
    spark = spark_session(app_name="streamshield-prs-figs")
    spark.sparkContext.setLogLevel("ERROR")
    tmp = Path(tempfile.mkdtemp(prefix="ss-prs-"))
    began, load_before = time.perf_counter(), load()
    try:
        executor = Executor(spark, write_streams(spark, tmp, args.rows, args.seed))
        items = plan(args)
        measure(executor, items, args.reps, warm_up=not args.quick)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    command = "python -m bench.privacy_switch_figs" + (" --quick" if args.quick else "")
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": command,
        "seconds": round(time.perf_counter() - began, 1),
        "load_before": load_before,
        "load_after": load(),
        "spark": pyspark.__version__,
        "cores": os.cpu_count(),
        "config": {
            "rows": args.rows,
            "reps": args.reps,
            "networks": args.networks,
            "degrees": args.degrees,
            "seed": args.seed,
            "fig8_settings": fig8_settings(args.quick),
            "fig9_setting": FIG9_SETTING,
        },
        "paper": PAPER,
        **summarise(items, args),
        "samples": [
            {
                "figure": m.figure,
                "degree": m.degree,
                "network": m.generated.summary(),
                "times": {k: [round(t, 4) for t in v] for k, v in m.times.items()},
            }
            for m in items
        ],
    }
    (out / "bench" / "results").mkdir(parents=True, exist_ok=True)
    (out / "bench" / "results" / "privacy-switches.json").write_text(
        json.dumps(result, indent=2) + "\n"
    )
    plot_fig8(result, out / "docs" / "img" / "prs-fig8.png")
    plot_fig9(result, out / "docs" / "img" / "prs-fig9.png")
    write_section(out / "docs" / "experiments.md", markdown(result, command), MEASURED)
    return result


if __name__ == "__main__":
    main()
