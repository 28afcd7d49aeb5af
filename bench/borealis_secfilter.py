"""Secured-Borealis paper, Figs. 13 and 15: what SecFilter adds per tuple, and its share.

``python -m bench.borealis_secfilter [--quick]``. The paper times its SecFilter
(labelling at the input, filtering at the output) per tuple as the tuple rate grows
(Fig. 13: "stays in a certain range around 60 nanoseconds") and as a share of the
processing time of queries of 4-64 boxes (Fig. 15: "from around 9% to around 1%").

Ours delivers in micro-batches, so the tuple rate is the size of a micro-batch (at a
1 s trigger, N tuples per batch is N tuples per second). Per batch size this reuses
:func:`bench.delivery_cost.measure`: SecFilter delivery of one batch shaped like a
secured query's output against a plain fan-out of the same batch, the two arms
interleaved round by round. Per round:

* Fig. 13: (SecFilter - plain) / tuples, in ns per tuple;
* Fig. 15: (SecFilter - plain) / SecFilter, the share of delivery's time that is
  SecFilter's (the paper's x axis is query size; ours is batch size: see
  docs/experiments.md).

Writes ``bench/results/borealis-secfilter.json`` and the figure; ``--render`` redraws
from the JSON.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench import delivery_cost, plots
from bench import experiment_common as ec
from bench.plots import (
    Caption,
    Panel,
    PaperPoint,
    Series,
    publish,
)

DOCS = Path(__file__).resolve().parent.parent / "docs"
# The paper's figures are not in our copy (captions only); both values are stated in
# its text (section 4.2): ~60 ns per tuple whatever the rate; 9% falling to 1%.
PAPER = {"ns_per_tuple": 60.0, "share_pct_simplest": 9.0, "share_pct_largest": 1.0}


def run(args: argparse.Namespace) -> list[dict]:
    spark = ec.session()
    rows = []
    for n in args.rows:
        times = delivery_cost.measure(spark, n, args.repeats)
        pairs = list(zip(times["plain"], times["secured"], strict=True))
        row = {
            "tuples": n,
            "plain_s": [round(p, 4) for p in times["plain"]],
            "secfilter_s": [round(s, 4) for s in times["secured"]],
            "overhead_ns_per_tuple": [round((s - p) * 1e9 / n, 1) for p, s in pairs],
            "share_pct": [round(100 * (s - p) / s, 2) for p, s in pairs],
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def panels(result: dict) -> list[Panel]:
    rows = result["rows"]
    xs = [r["tuples"] for r in rows]
    ends = (xs[0], xs[-1])
    return [
        Panel(
            "SecFilter overhead per tuple vs tuples per micro-batch [paper 13]",
            "tuples per micro-batch (= tuples/s at a 1 s trigger)",
            "ns per tuple, log",
            xs,
            [
                Series(
                    "SecFilter delivery - plain fan-out", [r["overhead_ns_per_tuple"] for r in rows]
                )
            ],
            paper=[PaperPoint(x, PAPER["ns_per_tuple"], "~60 ns at every rate") for x in ends],
            log_x=True,
            log_y=True,
        ),
        Panel(
            "SecFilter share of delivery time [paper 15]",
            "tuples per micro-batch",
            "% of the SecFilter delivery time",
            xs,
            [Series("(SecFilter - plain) / SecFilter", [r["share_pct"] for r in rows])],
            note="9% of the processing time for a 4-box query, falling to 1% at 64 boxes "
            "(its x axis is query size, not batch size)",
            log_x=True,
        ),
        Panel(
            "delivery time per batch, both arms",
            "tuples per micro-batch",
            "s per batch",
            xs,
            [
                Series("plain fan-out", [r["plain_s"] for r in rows]),
                Series("SecFilter delivery", [r["secfilter_s"] for r in rows]),
            ],
            log_x=True,
        ),
    ]


def render(result: dict, out: Path) -> Path:
    figure = panels(result)
    caption = Caption.of(result)
    title = "Secured Borealis Figs. 13 and 15 on Spark: SecFilter per tuple and its share"
    return publish(figure, out, "borealis-secfilter", title, caption, columns=3)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = plots.experiment_parser(
        __doc__, "borealis-secfilter", DOCS, "one tiny batch, one round"
    )
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds per size")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.repeats = [5_000], 1
    return args


def fields(args: argparse.Namespace) -> dict:
    """What this bench adds to its results JSON (measured now)."""
    return {
        "data": f"one batch of {', '.join(str(n) for n in args.rows)} rows shaped like a "
        f"secured query's output, one subscriber; {args.repeats} interleaved rounds "
        "after one warm-up of each arm",
        "paper": PAPER,
        "rows": run(args),
    }


def main(argv: list[str] | None = None) -> dict:
    return plots.run_experiment(
        argv, parse, "borealis_secfilter", "borealis-secfilter", DOCS, fields, render
    )


if __name__ == "__main__":
    main()
