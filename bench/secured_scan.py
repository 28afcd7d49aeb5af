"""Secured selection vs the same plain query (the secured-scan rows of the performance table).

``python -m bench.secured_scan [--quick]``. One stream (``bench.workload``: 8 providers,
64 roles, an sp every 100 tuples granting 1-8 random roles) goes through secure ingest
once; its labelled Parquet files and a plain copy of the same rows (no labels) are then
hard-linked ``--copies`` times, so the queries scan ``tuples x copies`` rows of real
labels without rewriting them. The query is the one of ``bench.run``:
``value > 50`` projecting ``id, value``, run as a streaming query (``availableNow``, no-op
sink) over the plain files and over the secured view, for:

* ``every row``: a query holding every role (it reads every tuple);
* ``few rows``: a query holding one role (``r000``, which reads ~7% of the tuples);
* ``selective``: the every-row query with ``value > 99`` (1% of the rows), so what the
  scan itself costs shows without the output.

Plain and secured runs alternate in one Spark session (the order rotates each round;
``--legacy`` adds the view of ``bench.legacy_secured_view`` as a third arm, so both views
come from the same session and load), after one untimed run of each. Every ratio is plain
time / that arm's time within one round (1.0 = no loss; above 1 the secured query is
faster); we report the median and min-max over the rounds and the machine load, because
the machine is shared and noisy. Results go to ``bench/results/secured-scan.json`` and
the "Secured scans" section of docs/performance.md.

``--quick`` (tiny sizes, one pair) only proves that the bench runs and that the secured
query returns the rows it should; it asserts nothing about speed.
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
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from bench.experiment_common import clock, link_copies, run_noop
from bench.legacy_secured_view import legacy_secured_view
from bench.revocation_latency import write_section
from bench.workload import STREAM, hierarchy, write_landing
from streamshield.engine.ingest.ingest import Ingest
from streamshield.engine.ingest.ingest_job import IngestJob
from streamshield.engine.session import spark_session
from streamshield.engine.store.labelled_store import (
    META_FIELDS,
    labelled_schema,
    read_batches,
    read_stream,
)
from streamshield.engine.views.secured_view import secured_view
from streamshield.policy.encoding import RoleCodec

ROOT = Path(__file__).resolve().parent.parent
HEADING = "## Secured scans: secured selection vs the same plain query"
N_ROLES = 64
PER_SP = 100


def cases(n_roles: int) -> dict[str, tuple[list[str], Column]]:
    """Case name -> (the query's roles, its selection)."""
    every = [f"r{i:03d}" for i in range(n_roles)]
    return {
        "every row": (every, F.col("value") > 50),
        "few rows": (["r000"], F.col("value") > 50),
        "selective": (every, F.col("value") > 99),
    }


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def prepare(spark: SparkSession, work: Path, tuples: int, copies: int) -> tuple[Path, Path]:
    """Secure ingest once, a plain copy of the same rows, both linked ``copies`` times."""
    landing = write_landing(work / "landing", tuples, PER_SP, N_ROLES)
    job = IngestJob(Ingest(spark, hierarchy(N_ROLES), {STREAM.name: STREAM}), landing, work / "ss")
    job.start(available_now=True).awaitTermination()
    labelled = job.store.path(STREAM.name)
    plain = plain_copy(spark, labelled, work / "plain")
    return link_copies(labelled, work / "q_secured", copies), link_copies(
        plain, work / "q_plain", copies
    )


def plain_copy(spark: SparkSession, labelled: Path, plain: Path) -> Path:
    """The labelled rows without labels, ``reason`` or policy id: what plain Spark stores.

    One plain file per labelled file, the same rows in the same order: file count, row
    groups and column encodings then differ by the labels only (a plain copy written in
    one go packs small files together, and fewer files scan faster).
    """
    columns = [n for n, _ in META_FIELDS if n not in ("reason", "policy_id")] + list(STREAM.names)
    for n, file in enumerate(sorted(labelled.rglob("*.parquet"))):
        rows = spark.read.parquet(str(file)).select(*columns).coalesce(1)
        rows.write.parquet(str(plain / f"f{n:04d}"))
    return plain


def measure(args: argparse.Namespace) -> dict:
    spark = spark_session(app_name="streamshield-bench-scan")
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="streamshield-scan-"))
    started = clock()
    try:
        secured_dir, plain_dir = prepare(spark, work, args.tuples, args.copies)
        codec = RoleCodec(hierarchy(N_ROLES))
        struct = labelled_schema(spark, STREAM.ddl, len(STREAM.names), codec.width, summaries=True)
        plain_schema = spark.read.parquet(str(plain_dir)).schema
        rows = spark.read.schema(plain_schema).parquet(str(plain_dir)).count()

        def labelled() -> DataFrame:
            return read_stream(spark, struct, secured_dir)

        def arms(roles: list[str], selection: Column) -> dict[str, Callable[[], DataFrame]]:
            out = {
                "plain": lambda: spark.readStream.schema(plain_schema).parquet(str(plain_dir)),
                "secured": lambda: secured_view(labelled(), STREAM, codec, roles),
            }
            if args.legacy:
                out["legacy"] = lambda: legacy_secured_view(labelled(), STREAM, codec, roles)
            return {
                k: lambda f=f: f().filter(selection).select("id", "value") for k, f in out.items()
            }

        batch = read_batches(spark, struct, [secured_dir])
        warm = arms(["r000"], F.col("value") > 50)  # JIT and file listing: not reported
        for kind, build in warm.items():
            run_noop(build(), work / "warm-up" / kind)
        results = {}
        for name, (roles, selection) in cases(N_ROLES).items():
            expected = batch.filter(reference_visible(codec, roles) & selection).count()
            got = secured_view(batch, STREAM, codec, roles).filter(selection).count()
            if got != expected:
                raise RuntimeError(
                    f"{name}: the view returned {got} rows, the reference {expected}"
                )
            results[name] = {"secured_rows": got}
            results[name] |= pairs(
                work / name.replace(" ", "-"), args.repeats, arms(roles, selection)
            )
            print(json.dumps({name: results[name]}), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "command": "python -m bench.secured_scan " + " ".join(args.argv),
        "started": started,
        "finished": clock(),
        "load_before_after": [args.load, load()],
        "tuples_ingested": args.tuples,
        "copies": args.copies,
        "rows_scanned": rows,
        "roles": N_ROLES,
        "tuples_per_sp": PER_SP,
        "pairs": args.repeats,
        "cases": results,
    }


def pairs(case: Path, repeats: int, arms: dict[str, Callable[[], DataFrame]]) -> dict:
    """``repeats`` rounds of every arm, the order rotating each round; per arm the times and
    the ratio plain time / arm time of each round (median, min, max)."""
    times: dict[str, list[float]] = {kind: [] for kind in arms}
    kinds = list(arms)
    for i in range(repeats):
        for kind in kinds[i % len(kinds) :] + kinds[: i % len(kinds)]:
            times[kind].append(run_noop(arms[kind](), case / f"{kind}{i}"))
    out: dict = {f"{kind}_s": [round(x, 3) for x in xs] for kind, xs in times.items()}
    for kind in kinds[1:]:
        ratios = [p / s for p, s in zip(times["plain"], times[kind], strict=True)]
        out[f"{kind}_ratio"] = {
            "median": round(statistics.median(ratios), 3),
            "min": round(min(ratios), 3),
            "max": round(max(ratios), 3),
        }
    return out


def reference_visible(codec: RoleCodec, roles: list[str]) -> Column:
    """The secured view's tests spelled out independently: the row passed ingest, and its
    tuple and ``value`` labels allow the query (a value the query cannot read is NULL in
    the view, and NULL fails the selection)."""
    query = [(w, q) for w, q in enumerate(codec.query(roles)) if q]
    test = F.col("reason") == "pass"
    for obj in (0, 2):  # the tuple, value
        meets = [F.col(f"_ss_r{obj}_{w}").bitwiseAND(F.lit(q)) != 0 for w, q in query]
        misses = [F.col(f"_ss_d{obj}_{w}").bitwiseAND(F.lit(q)) == 0 for w, q in query]
        any_meets = meets[0]
        for m in meets[1:]:
            any_meets = any_meets | m
        test = test & any_meets
        for m in misses:
            test = test & m
    return test


READING = """\
What the secured scan reads (engine/views/secured_view.py, engine/views/scan_summary.py): for a READ
query with 64 roles, the tuple's reader and denied word of the READ block and the reader
and denied words of each attribute the query uses; a batch stores only the words it needs
(policy/stored_words.py: no attribute word equal to the tuple's, no word zero in every
row), and a word a file lacks is read as a constant, not per row. A query whose roles
leave bits out (the few-rows role) also reads `_ss_scan_lo` / `_ss_scan_hi`, the lowest and
highest READ bit of the tuple's readers: ingest sorts each file by `lo` and writes pages
of 10,000 rows, and the range test `lo <= max(query bit) AND hi >= min(query bit)` is pushed
to Parquet, whose page statistics skip the pages no row of which the query's roles can
read. The range test never decides (policy/reader_range.py; a property test and the
conformance suite hold that it keeps every row the bitwise test passes), and files
written before the summaries read NULL there and are scanned as before.

What remains: the bitwise tests themselves run per row that is read, and a role high in
the role order skips little (files are sorted by the lowest reader bit), and a user
predicate on a masked attribute stays inside `CASE WHEN label THEN predicate ELSE false
END`, which Parquet cannot use.
"""


def markdown(result: dict) -> str:
    lines = [
        HEADING,
        "",
        f"`{result['command']}`",
        f"({result.get('bench_seconds', '?')} s); load average (1, 5, 15 min) before / after:",
        f"{result['load_before_after'][0]} / {result['load_before_after'][1]} (2 cores shared",
        f"with other agents' Spark jobs). {result['tuples_ingested']} tuples through secure",
        f"ingest ({result['roles']} roles, an sp every {result['tuples_per_sp']} tuples granting",
        f"1-8 random roles), scanned as {result['copies']} hard-linked copies:",
        f"{result['rows_scanned']} rows; query `value > 50` (selective: `value > 99`)",
        f"projecting `id, value`. {result['pairs']} interleaved rounds per case in one Spark",
        "session; ratio = plain time / secured time within a round (1.0 = no loss, above 1",
        "the secured query is faster). `every row`: a query holding all 64 roles; `few rows`:",
        "one role (reads ~7% of the tuples).",
        "",
        "| case | secured rows | plain s (median) | secured s (median) | ratio median |"
        " ratio min-max | legacy / secured time (median, min-max) |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    for name, r in result["cases"].items():
        for kind in ("secured", "legacy"):
            if f"{kind}_ratio" not in r:
                continue
            ratio = r[f"{kind}_ratio"]
            gain = ""
            if kind == "secured" and "legacy_s" in r:
                x = [old / new for old, new in zip(r["legacy_s"], r["secured_s"], strict=True)]
                gain = f"{statistics.median(x):.2f} ({min(x):.2f}-{max(x):.2f})"
            lines.append(
                f"| {name}{' (legacy view)' if kind == 'legacy' else ''} | "
                f"{r['secured_rows']} | {statistics.median(r['plain_s']):.2f} | "
                f"{statistics.median(r[f'{kind}_s']):.2f} | {ratio['median']} | "
                f"{ratio['min']}-{ratio['max']} | {gain} |"
            )
    return "\n".join(lines) + "\n\n" + READING


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: proves it runs")
    parser.add_argument("--tuples", type=int, default=100_000, help="through secure ingest")
    parser.add_argument("--copies", type=int, default=40, help="rows scanned = tuples x copies")
    parser.add_argument("--repeats", type=int, default=7, help="interleaved rounds per case")
    parser.add_argument(
        "--legacy", action="store_true", help="also the view as it was before issue 13"
    )
    parser.add_argument(
        "--render", action="store_true", help="only rewrite the docs section from --json"
    )
    parser.add_argument("--json", default=str(ROOT / "bench" / "results" / "secured-scan.json"))
    parser.add_argument("--results", default=str(ROOT / "docs" / "performance.md"))
    args = parser.parse_args(argv)
    if args.quick:
        args.tuples, args.copies, args.repeats = 4_000, 2, 1
    args.argv = argv
    args.load = load()
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.render:
        result = json.loads(Path(args.json).read_text())
        write_section(Path(args.results), markdown(result), HEADING)
        return result
    began = time.perf_counter()
    result = measure(args)
    result["bench_seconds"] = round(time.perf_counter() - began, 1)
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    write_section(Path(args.results), markdown(result), HEADING)
    print(markdown(result))
    return result


if __name__ == "__main__":
    main()
