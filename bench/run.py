"""Benchmarks: secure vs plain ingest, secured vs unsecured selection query.

One command: ``.venv/bin/python -m bench.run`` (``make bench``). Every ratio compares two
runs on the same generated data in the same Spark session; results go to
``bench/results/run.json`` and ``docs/performance.md``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from pyspark.sql import functions as F

from bench.revocation_latency import write_section
from bench.workload import STREAM, hierarchy, write_landing
from streamshield.engine.ingest.ingest import ELEMENT_SCHEMA, Ingest
from streamshield.engine.ingest.ingest_job import IngestJob
from streamshield.engine.session import spark_session
from streamshield.engine.store.labelled_store import labelled_schema, read_stream
from streamshield.engine.views.secured_view import secured_view
from streamshield.policy.encoding import RoleCodec

ROOT = Path(__file__).resolve().parent.parent


def timed(start) -> float:
    began = time.perf_counter()
    start().awaitTermination()
    return time.perf_counter() - began


def plain_rows(spark, landing: Path, *extra):
    """The landing zone's tuples as plain Spark reads them (``extra``: more columns)."""
    source = (
        spark.readStream.schema(ELEMENT_SCHEMA)
        .option("pathGlobFilter", "*.jsonl")
        .json(str(landing / "*"))
        .filter(F.col("type") == "tuple")
    )
    values = F.from_json(F.col("values"), STREAM.ddl)
    return source.select(
        "stream", "provider", "seq", "tid", *extra, *(values[n].alias(n) for n in STREAM.names)
    )


def write_parquet(rows, out: Path) -> float:
    """Wall time of one ``availableNow`` stream writing ``rows`` to ``out/data``."""
    return timed(
        lambda: (
            rows.writeStream.format("parquet")
            .option("checkpointLocation", str(out / "_checkpoint"))
            .trigger(availableNow=True)
            .start(str(out / "data"))
        )
    )


def plain_ingest(spark, landing: Path, out: Path) -> float:
    return write_parquet(plain_rows(spark, landing), out)


def secure_ingest(spark, landing: Path, out: Path, n_roles: int) -> tuple[float, IngestJob]:
    ingest = Ingest(spark, hierarchy(n_roles), {STREAM.name: STREAM})
    job = IngestJob(ingest, landing, out)
    return timed(lambda: job.start(available_now=True)), job


def query(spark, frame, out: Path) -> float:
    result = frame.filter(F.col("value") > 50).select("id", "value")
    return timed(
        lambda: (
            result.writeStream.format("noop")
            .option("checkpointLocation", str(out))
            .trigger(availableNow=True)
            .start()
        )
    )


def run_config(
    spark, work: Path, n: int, per_sp: int, n_roles: int, by_tuple_id: bool = False
) -> dict:
    case = work / f"k{per_sp}-r{n_roles}-t{int(by_tuple_id)}"
    landing = write_landing(case / "landing", n, per_sp, n_roles, by_tuple_id=by_tuple_id)
    plain_s = min(plain_ingest(spark, landing, case / f"plain{i}") for i in range(2))
    secure = [secure_ingest(spark, landing, case / f"secure{i}", n_roles) for i in range(2)]
    secure_s, job = min(secure, key=lambda x: x[0])
    codec = RoleCodec(hierarchy(n_roles))
    plain_frame = spark.readStream.schema(
        spark.read.parquet(str(case / "plain0" / "data")).schema
    ).parquet(str(case / "plain0" / "data"))
    struct = labelled_schema(spark, STREAM.ddl, len(STREAM.names), codec.width)
    labelled = read_stream(spark, struct, job.store.path(STREAM.name))
    view = secured_view(labelled, STREAM, codec, ["r000"])
    q_plain = min(query(spark, plain_frame, case / f"qp{i}") for i in range(2))
    q_secure = min(query(spark, view, case / f"qs{i}") for i in range(2))
    return {
        "tuples": n,
        "tuples_per_sp": per_sp,
        "roles": n_roles,
        "scope": "tuple id" if by_tuple_id else "stream",
        "plain_ingest_s": round(plain_s, 2),
        "secure_ingest_s": round(secure_s, 2),
        "ingest_ratio": round(plain_s / secure_s, 3),
        "plain_query_s": round(q_plain, 2),
        "secured_query_s": round(q_secure, 2),
        "query_ratio": round(q_plain / q_secure, 3),
    }


def write_results(results: list[dict], n: int) -> None:
    (ROOT / "bench" / "results" / "run.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = [
        "# Benchmark results",
        "",
        '`make bench` runs `bench.table13` (section "Issue 13: every figure in one session"',
        "below). The first table is the earlier per-configuration bench,",
        f"`python -m bench.run --tuples {n}`, on this project's",
        "machine (2 cores); each time is the best of two runs, plain and secured measured in",
        "the same Spark session on the same generated data (8 providers, one stream).",
        "Ratios are throughput of the secured run relative to plain Spark (1.0 = no loss).",
        "",
        "| sp scope | tuples per sp | roles | plain ingest s | secure ingest s | ingest ratio |"
        " plain query s | secured query s | query ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['scope']} | {r['tuples_per_sp']} | {r['roles']} | {r['plain_ingest_s']} | "
            f"{r['secure_ingest_s']} | {r['ingest_ratio']} | {r['plain_query_s']} | "
            f"{r['secured_query_s']} | {r['query_ratio']} |"
        )
    # Only its own part (up to the first section): the rest is other benches' sections.
    write_section(ROOT / "docs" / "performance.md", "\n".join(lines) + "\n", lines[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tuples", type=int, default=100_000)
    parser.add_argument("--per-sp", type=int, nargs="*", default=[100, 10, 1])
    parser.add_argument("--roles", type=int, nargs="*", default=[1, 64, 500])
    parser.add_argument(
        "--scopes", nargs="*", choices=["stream", "tuple"], default=["stream", "tuple"]
    )
    args = parser.parse_args()
    spark = spark_session()
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="streamshield-bench-"))
    results = []
    run_config(spark, work / "warm-up", 20_000, 100, 1)  # JIT and caches, not reported
    try:
        for scope in args.scopes:
            for per_sp in args.per_sp:
                for n_roles in args.roles:
                    result = run_config(spark, work, args.tuples, per_sp, n_roles, scope == "tuple")
                    print(json.dumps(result), flush=True)
                    results.append(result)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_results(results, args.tuples)


if __name__ == "__main__":
    main()
