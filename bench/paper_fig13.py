"""Security-punctuations paper, Fig. 13: Security Shield cost vs sp ratio and vs roles.

``python -m bench.paper_fig13 [--quick]``. Two sweeps, as in the paper: the sp ratio
(tuples per policy) at a fixed SS state, and the SS state (roles of the query) at a
fixed ratio; about 50% of the tuples are filtered. Per configuration it measures, on
the same data in the same Spark session:

* (a) secure ingest, our SS analyser (labels every tuple), against plain Spark ingest
  of the same landing files (JSON -> Parquet);
* (b) a query (``value > 50``) through the secured view (SS filter + masking) against
  the same query on the same rows without labels; the labelled files are hard-linked
  ``--copies`` times so the query has enough rows for its per-tuple cost to show.

Times are ms per 1000 tuples, the paper's unit. The sweeps share one configuration,
which is therefore measured twice: the two rows show the noise of the machine.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from bench import experiment_common as ec
from bench import plots
from bench.plots import (
    Caption,
    Panel,
    PaperPoint,
    Series,
    markdown_table,
    publish,
)
from bench.run import plain_ingest
from streamshield.engine.store.labelled_store import read_batches
from streamshield.engine.views.secured_view import secured_view

DOCS = Path(__file__).resolve().parent.parent / "docs"
COLUMNS = [
    "sweep",
    "tuples_per_sp",
    "roles",
    "pass_rate",
    "plain_ingest_ms_per_1k",
    "secure_ingest_ms_per_1k",
    "query_rows",
    "plain_query_ms_per_1k",
    "secured_query_ms_per_1k",
]
# The paper's numbers (section 6.1), ms per 1000 tuples. Its figures are not in our copy
# of the paper (captions only), so every value is one its text states, none digitised:
# ~4 ms at one sp per tuple (Fig. 13a); 1.31 ms at 1 role, 11.31 ms at 500 (Fig. 13b).
CONFIG = ("tuples", "copies", "repeats", "ratios", "roles", "base_roles", "base_ratio")
PAPER = {"sp_ratio": {1: 4.0}, "roles": {1: 1.31, 500: 11.31}}


def measure(spark: SparkSession, case: Path, w: ec.Workload, copies: int, repeats: int) -> dict:
    """One configuration: ingest (a) and query (b), plain and secured, every sample kept
    (the arms interleaved round by round)."""
    landing = ec.write_landing(case / "landing", w)
    ingest = ec.interleaved(
        {
            "plain_ingest": lambda i: plain_ingest(spark, landing, case / f"plain{i}"),
            "secure_ingest": lambda i: ec.secure_ingest(spark, landing, case / f"ss{i}", w),
        },
        repeats,
    )
    labelled = ec.labelled_path(case / "ss0")
    struct = ec.labelled_struct(spark, w)
    batch = read_batches(spark, struct, [labelled])
    total = batch.count()
    passed = batch.filter(ec.ss_condition(w)).count()

    secured_dir = ec.link_copies(labelled, case / "q_secured", copies)
    plain_dir = ec.link_copies(case / "plain0" / "data", case / "q_plain", copies)
    plain_schema = spark.read.parquet(str(plain_dir)).schema

    def plain_query(i: int) -> float:
        source = spark.readStream.schema(plain_schema).parquet(str(plain_dir))
        query = source.filter(F.col("value") > 50).select("id", "value")
        return ec.run_noop(query, case / f"qp{i}")

    def secured_query(i: int) -> float:
        source = ec.read_stream(spark, secured_dir, struct)
        view = secured_view(source, ec.STREAM, w.codec(), w.query_roles)
        return ec.run_noop(view.filter(F.col("value") > 50).select("id", "value"), case / f"qs{i}")

    rows = total * copies
    query = ec.interleaved({"plain_query": plain_query, "secured_query": secured_query}, repeats)

    def per_1k(seconds: list[float], n: int) -> list[float]:
        return [round(s * 1e6 / n, 3) for s in seconds]

    return {
        "tuples_per_sp": w.per_sp,
        "roles": w.state,
        "pass_rate": round(passed / total, 3),
        "query_rows": rows,
        "plain_ingest_ms_per_1k": per_1k(ingest["plain_ingest"], total),
        "secure_ingest_ms_per_1k": per_1k(ingest["secure_ingest"], total),
        "plain_query_ms_per_1k": per_1k(query["plain_query"], rows),
        "secured_query_ms_per_1k": per_1k(query["secured_query"], rows),
    }


def run(args: argparse.Namespace) -> list[dict]:
    spark = ec.session()
    work = Path(tempfile.mkdtemp(prefix="streamshield-fig13-"))
    results: list[dict] = []
    try:
        if not args.quick:  # JIT, caches and the first Python workers: not reported
            measure(spark, work / "warm-up", ec.Workload(2000, 10, 10), 1, 1)
        plan = [("sp ratio", k, args.base_roles) for k in args.ratios]
        plan += [("roles", args.base_ratio, r) for r in args.roles]
        for n, (sweep, per_sp, state) in enumerate(plan):
            w = ec.Workload(args.tuples, per_sp, state)
            result = {
                "sweep": sweep,
                **measure(spark, work / f"c{n}", w, args.copies, args.repeats),
            }
            print(result, flush=True)
            results.append(result)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def panels(result: dict) -> list[Panel]:
    """Fig. 13 as the paper's two panels, each split into ingest and query, plus the
    roles sweep normalised to 1 role (the paper's growth 1.31 -> 11.31 ms)."""
    rows = result["rows"]
    ratio = [r for r in rows if r["sweep"] == "sp ratio"]
    roles = [r for r in rows if r["sweep"] == "roles"]
    cfg = result["config"]
    unit = "ms per 1000 tuples, log"
    text = "SS operator alone"

    def series(chosen: list[dict], key: str, label: str) -> Series:
        return Series(label, [r[key] for r in chosen])

    ingest = ("secure_ingest_ms_per_1k", "secure ingest (SS analyser)")
    plain_ingest_ = ("plain_ingest_ms_per_1k", "plain Spark ingest")
    secured = ("secured_query_ms_per_1k", "query via secured view (SS filter)")
    plain_query_ = ("plain_query_ms_per_1k", "same query, plain Spark")
    paper_ratio = [PaperPoint(k, v, text) for k, v in PAPER["sp_ratio"].items()]
    paper_roles = [PaperPoint(k, v, text) for k, v in PAPER["roles"].items()]
    out = []
    for title, chosen, knob, xlabel, paper in (
        (
            f"vs sp ratio, ingest ({cfg['base_roles']} roles) [paper 13a]",
            ratio,
            "tuples_per_sp",
            "tuples per sp",
            paper_ratio,
        ),
        (
            f"vs sp ratio, query ({cfg['base_roles']} roles) [paper 13a]",
            ratio,
            "tuples_per_sp",
            "tuples per sp",
            paper_ratio,
        ),
        (
            f"vs roles, ingest (1 sp / {cfg['base_ratio']} tuples) [paper 13b]",
            roles,
            "roles",
            "roles in the SS state",
            paper_roles,
        ),
        (
            f"vs roles, query (1 sp / {cfg['base_ratio']} tuples) [paper 13b]",
            roles,
            "roles",
            "roles in the SS state",
            paper_roles,
        ),
    ):
        if not chosen:
            continue
        arms = (ingest, plain_ingest_) if "ingest" in title else (secured, plain_query_)
        out.append(
            Panel(
                title,
                xlabel,
                unit,
                [r[knob] for r in chosen],
                [series(chosen, key, label) for key, label in arms],
                paper=paper,
                log_x=True,
                log_y=True,
            )
        )
    if len(roles) > 1:
        base = {key: statistics.median(roles[0][key]) for key, _ in (ingest, secured)}
        first = min(PAPER["roles"])
        out.append(
            Panel(
                "vs roles, normalised to the fewest roles [paper 13b]",
                "roles in the SS state",
                "cost / cost at the fewest roles",
                [r["roles"] for r in roles],
                [
                    Series(label, [[v / base[key] for v in r[key]] for r in roles])
                    for key, label in (ingest, secured)
                ],
                paper=[
                    PaperPoint(k, v / PAPER["roles"][first], text)
                    for k, v in PAPER["roles"].items()
                ],
                reference=1.0,
                log_x=True,
            )
        )
    return out


def render(result: dict, out: Path) -> Path:
    """Plot, per-figure page and generated section of docs/experiments.md from ``result``."""
    figure = panels(result)
    caption = Caption.of(result)
    path = publish(figure, out, "fig13", "Fig. 13 on Spark: Security Shield cost", caption)
    (out / "fig13.md").write_text(
        "\n".join(
            [
                "# Fig. 13 on Spark: measured",
                "",
                f"`{result['command']}`; {caption.markdown()} Every sample of every point (ms per",
                "1000 tuples), the arms interleaved round by round. ![Fig. 13](img/fig13.png)",
                "",
                markdown_table(result["rows"], COLUMNS),
                "",
            ]
        )
    )
    return path


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = plots.experiment_parser(__doc__, "fig13", DOCS, "tiny sizes, runs in seconds")
    parser.add_argument("--tuples", type=int, default=10_000)
    parser.add_argument("--copies", type=int, default=50, help="query rows = tuples x copies")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds per point")
    parser.add_argument("--ratios", type=int, nargs="+", default=[1, 5, 10, 50, 100])
    parser.add_argument("--roles", type=int, nargs="+", default=[1, 10, 100, 500])
    parser.add_argument("--base-roles", type=int, default=10, help="roles of the ratio sweep")
    parser.add_argument("--base-ratio", type=int, default=10, help="tuples per sp, roles sweep")
    args = parser.parse_args(argv)
    if args.quick:
        args.tuples, args.copies, args.repeats = 800, 2, 1
        args.ratios, args.roles, args.base_roles, args.base_ratio = [10], [2], 2, 10
    return args


def fields(args: argparse.Namespace) -> dict:
    """What this bench adds to its results JSON (measured now)."""
    return {
        "data": f"{args.tuples} tuples per configuration, queries over {args.copies} "
        f"hard-linked copies; {args.repeats} interleaved rounds per point",
        "config": {k: getattr(args, k) for k in CONFIG},
        "paper": PAPER,
        "rows": run(args),
    }


def main(argv: list[str] | None = None) -> dict:
    return plots.run_experiment(argv, parse, "paper_fig13", "fig13", DOCS, fields, render)


if __name__ == "__main__":
    main()
