"""Every experiment figure of the papers in one command: ``python -m bench.figures``.

* ``python -m bench.figures`` (``make figures``) re-measures everything with each
  bench's default sizes, one after the other (more than an hour on 2 shared cores), and
  redraws every plot, per-figure page and generated table of ``docs/experiments.md``.
* ``--render`` only redraws from the committed results JSON (``bench/results/*.json``):
  seconds, no Spark; what to run after changing a plot or a paper value.
* ``--quick --out DIR`` is the proof that the command works (the test suite runs it):
  it redraws every figure from the committed JSON into DIR, through the same render
  code as a full run, and measures the Borealis SecFilter figure at tiny sizes (the
  other benches' quick measurements take minutes and are tests of their own:
  tests/spark/test_experiments.py and neighbours). SP Fig. 15b and Borealis Figs.
  11-12 and 14 are redrawn from their JSON too: their own ``--quick`` modes start a
  server or fresh JVMs, minutes on the loaded machine (documented commands, not tests).

Each figure follows the convention of :mod:`bench.plots` (the paper's values beside
ours, median with min-max bars, panel letters, caption, generated table).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from bench import (
    borealis_latency,
    borealis_secfilter,
    borealis_setup,
    cw_table1,
    paper_fig13,
    paper_fig14,
    paper_fig16,
    privacy_switch_figs,
    sp_fig15b,
)
from bench.revocation_latency import write_section

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def _paper_figs(module, name: str) -> Callable[[Path, bool], None]:  # type: ignore[no-untyped-def]
    """SP Figs. 13/14/16, Borealis: ``--render`` from the committed JSON, or measure."""

    def run(out: Path, measure: bool) -> None:
        if measure:
            module.main([])
        else:
            module.main(["--render", "--json", str(RESULTS / name), "--out", str(out)])

    return run


def _borealis(out: Path, measure: bool) -> None:
    """The cheapest bench: ``--quick`` measures it for real (one small batch, seconds),
    so the quick mode runs one measurement end to end besides redrawing."""
    if measure:
        borealis_secfilter.main([])
    elif out.resolve() == (ROOT / "docs").resolve():  # --render
        borealis_secfilter.main(["--render"])
    else:
        borealis_secfilter.main(["--quick", "--out", str(out)])


def _privacy_switches(out: Path, measure: bool) -> None:
    if measure:
        privacy_switch_figs.main([])
        return
    result = json.loads((RESULTS / "privacy-switches.json").read_text())
    privacy_switch_figs.plot_fig8(result, out / "img" / "prs-fig8.png")
    privacy_switch_figs.plot_fig9(result, out / "img" / "prs-fig9.png")
    section = privacy_switch_figs.markdown(result, result["command"])
    write_section(out / "experiments.md", section, privacy_switch_figs.MEASURED)


def _cw_table1(out: Path, measure: bool) -> None:
    paths = ["--plot", str(out / "img" / "cw-table1.png"), "--results", str(out / "experiments.md")]
    if measure:
        cw_table1.main(paths)
    else:
        cw_table1.main(["--render", "--json", str(RESULTS / "cw-table1.json"), *paths])


FIGURES: dict[str, Callable[[Path, bool], None]] = {
    "SP Fig. 13": _paper_figs(paper_fig13, "fig13.json"),
    "SP Fig. 14": _paper_figs(paper_fig14, "fig14.json"),
    "SP Fig. 15b": _paper_figs(sp_fig15b, "fig15b.json"),
    "SP Fig. 16": _paper_figs(paper_fig16, "fig16.json"),
    "Borealis Figs. 11-12": _paper_figs(borealis_setup, "borealis-setup.json"),
    "Borealis Figs. 13, 15": _borealis,
    "Borealis Fig. 14": _paper_figs(borealis_latency, "borealis-latency.json"),
    "PrS Figs. 8-9": _privacy_switches,
    "CW Table 1": _cw_table1,
}


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="redraw all from JSON into --out")
    parser.add_argument("--render", action="store_true", help="redraw all from the JSON only")
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="docs directory")
    parser.add_argument("--only", nargs="+", choices=list(FIGURES), help="a subset")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.quick and args.out.resolve() == (ROOT / "docs").resolve():
        parser.error("--quick writes a throw-away copy: give --out DIR (not docs/)")
    measure = not (args.quick or args.render)
    if measure and args.out.resolve() != (ROOT / "docs").resolve():
        parser.error("a full run writes docs/ and bench/ of the repository: no --out")
    done = []
    for name in args.only or FIGURES:
        print(f"{name}: {'measuring' if measure else 'rendering'}", flush=True)
        FIGURES[name](args.out, measure)
        done.append(name)
    return done


if __name__ == "__main__":
    main()
