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
import sys
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from bench import experiment_common as ec
from bench.plots import Panel, markdown_table, save_figure
from bench.run import plain_ingest
from streamshield.engine.secured_view import secured_view

DOCS = Path(__file__).resolve().parent.parent / "docs"
COLUMNS = [
    "sweep",
    "tuples_per_sp",
    "roles",
    "pass_rate",
    "plain_ingest_ms_per_1k",
    "secure_ingest_ms_per_1k",
    "ingest_ratio",
    "query_rows",
    "plain_query_ms_per_1k",
    "secured_query_ms_per_1k",
    "query_ratio",
]


def measure(spark: SparkSession, case: Path, w: ec.Workload, copies: int, repeats: int) -> dict:
    """One configuration: ingest (a) and query (b), plain and secured."""
    landing = ec.write_landing(case / "landing", w)
    plain_s = ec.best(lambda i: plain_ingest(spark, landing, case / f"plain{i}"), repeats)
    secure_s = ec.best(lambda i: ec.secure_ingest(spark, landing, case / f"ss{i}", w), repeats)
    labelled = ec.labelled_path(case / "ss0")
    struct = ec.labelled_struct(spark, w)
    batch = spark.read.schema(struct).option("recursiveFileLookup", "true").parquet(str(labelled))
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
    q_plain = ec.best(plain_query, max(repeats, 2))
    q_secured = ec.best(secured_query, max(repeats, 2))
    per_1k = 1000.0
    return {
        "tuples_per_sp": w.per_sp,
        "roles": w.state,
        "pass_rate": round(passed / total, 3),
        "plain_ingest_ms_per_1k": plain_s * per_1k * 1000 / total,
        "secure_ingest_ms_per_1k": secure_s * per_1k * 1000 / total,
        "ingest_ratio": round(plain_s / secure_s, 3),
        "query_rows": rows,
        "plain_query_ms_per_1k": q_plain * per_1k * 1000 / rows,
        "secured_query_ms_per_1k": q_secured * per_1k * 1000 / rows,
        "query_ratio": round(q_plain / q_secured, 3),
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
            result = {"sweep": sweep, **measure(spark, work / f"c{n}", w, args.copies, 1)}
            print(result, flush=True)
            results.append(result)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def figure(results: list[dict], args: argparse.Namespace) -> Path:
    """Fig. 13 as the paper's panels: ingest (a) and query (b), vs sp ratio and vs roles."""
    ratio = [r for r in results if r["sweep"] == "sp ratio"]
    roles = [r for r in results if r["sweep"] == "roles"]
    unit = "ms per 1000 tuples"
    panels = [
        Panel(
            f"(a) secure ingest vs sp ratio ({args.base_roles} roles)",
            "tuples per sp",
            unit,
            [r["tuples_per_sp"] for r in ratio],
            {
                "secure ingest (SS analyser)": [r["secure_ingest_ms_per_1k"] for r in ratio],
                "plain Spark ingest": [r["plain_ingest_ms_per_1k"] for r in ratio],
            },
            log_x=True,
        ),
        Panel(
            f"(a) secure ingest vs roles (1 sp / {args.base_ratio} tuples)",
            "roles in the SS state",
            unit,
            [r["roles"] for r in roles],
            {
                "secure ingest (SS analyser)": [r["secure_ingest_ms_per_1k"] for r in roles],
                "plain Spark ingest": [r["plain_ingest_ms_per_1k"] for r in roles],
            },
            log_x=True,
        ),
        Panel(
            f"(b) query vs sp ratio ({args.base_roles} roles)",
            "tuples per sp",
            unit,
            [r["tuples_per_sp"] for r in ratio],
            {
                "secured view (SS filter)": [r["secured_query_ms_per_1k"] for r in ratio],
                "plain Spark": [r["plain_query_ms_per_1k"] for r in ratio],
            },
            log_x=True,
        ),
        Panel(
            f"(b) query vs roles (1 sp / {args.base_ratio} tuples)",
            "roles in the SS state",
            unit,
            [r["roles"] for r in roles],
            {
                "secured view (SS filter)": [r["secured_query_ms_per_1k"] for r in roles],
                "plain Spark": [r["plain_query_ms_per_1k"] for r in roles],
            },
            log_x=True,
        ),
    ]
    path = Path(args.out) / "img" / "fig13.png"
    return save_figure(panels, path, "Fig. 13 on Spark: Security Shield cost")


def write_outputs(results: list[dict], args: argparse.Namespace, started: str) -> None:
    out = Path(args.out)
    figure(results, args)
    text = [
        "# Fig. 13 on Spark: measured",
        "",
        f"`python -m bench.paper_fig13{''.join(' ' + a for a in args.argv)}`,",
        f"started {started}, finished {ec.clock()}; {args.tuples} tuples per configuration",
        f"({ec.Workload(args.tuples, 1, 1).providers} channels), query over "
        f"{args.copies} hard-linked copies of the labelled files. Ratios are plain time /",
        "secured time (1.0 = no loss). ![Fig. 13](img/fig13.png)",
        "",
        markdown_table(results, COLUMNS),
        "",
    ]
    (out / "fig13.md").write_text("\n".join(text))


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, runs in seconds")
    parser.add_argument("--out", default=str(DOCS), help="writes fig13.md and img/fig13.png")
    parser.add_argument("--tuples", type=int, default=10_000)
    parser.add_argument("--copies", type=int, default=50, help="query rows = tuples x copies")
    parser.add_argument("--ratios", type=int, nargs="+", default=[1, 5, 10, 50, 100])
    parser.add_argument("--roles", type=int, nargs="+", default=[1, 10, 100, 500])
    parser.add_argument("--base-roles", type=int, default=10, help="roles of the ratio sweep")
    parser.add_argument("--base-ratio", type=int, default=10, help="tuples per sp, roles sweep")
    args = parser.parse_args(argv)
    if args.quick:
        args.tuples, args.copies = 800, 2
        args.ratios, args.roles, args.base_roles, args.base_ratio = [10], [2], 2, 10
    args.argv = argv if argv is not None else []
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv if argv is not None else sys.argv[1:])
    started = ec.clock()
    write_outputs(run(args), args, started)


if __name__ == "__main__":
    main()
