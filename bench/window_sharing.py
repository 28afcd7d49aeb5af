"""N users' window queries on one stream: each a window query of its own, or branches of
one window network (engine/sharing/window_network.py); with ``--kind
aggregates``, N aggregates without a window: each Spark's streaming aggregation of its
own, or folding branches of the stream's selection network (engine/sharing/aggregate_fold.py).

One command: ``.venv/bin/python -m bench.window_sharing [--queries 1 4 8] [--rows 5000]
[--kind windows|aggregates|sliding]``.

Setup as ``bench/sharing_scale.py`` (engine level, a fresh pipeline per case, the same
ward-B channel and policy, roles cycling C, GP, ND, E, D). User ``i`` registers, through
``CqlService.submit``, ``SELECT patient_id, beats_per_min FROM HeartRate [RANGE 60] WHERE
patient_id >= k`` when ``i`` is even and ``SELECT count(*) AS n FROM HeartRate [ROWS 500]``
when odd: in a network every RANGE query shares one node, the ROWS counts one node per
role. The arms differ only in ``CqlService.share`` and ``share_windows``. Per case: a
warm-up batch, then ``--batches`` timed batches of ``--rows`` tuples; a batch's time is
the driver's wall time from its ingest returning until every query's
``processAllAvailable`` returned. Cases interleaved (rep by rep, arms alternating, order
rotated); median, min and max per (arm, N), and the load average next to each.
Results: ``bench/results/window-sharing.json`` (``aggregate-sharing.json``), each
run appended to the earlier ones with its ``--label``.

Aggregates: user ``i`` registers ``SELECT patient_id, count(*) AS n, avg(beats_per_min)
AS a FROM HeartRate WHERE patient_id >= k GROUP BY patient_id`` when even and ``SELECT
count(*) AS n, max(beats_per_min) AS hi FROM HeartRate`` when odd; the arms differ in
``CqlService.share`` and ``share_aggregates``. With ``--kind sliding`` the same
aggregates over ``[RANGE 60 SLIDE 30]`` (HeartRate's event time is a bigint: no
watermark): each Spark's windowed streaming aggregation of its own, or folding branches
keyed by their window (``share_sliding``, lang/sliding_fold.py); results
``bench/results/sliding-sharing.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from bench.sharing_scale import ROLES, THRESHOLDS, Sink, batches, load
from streamshield.engine.pipeline import Pipeline
from streamshield.engine.queries.streaming_queries import CallbackSink
from streamshield.engine.session import spark_session
from streamshield.engine.tuning import STREAMING
from streamshield.examples.hospital_catalog import hospital_catalog
from streamshield.policy.elements import Element

ROOT = Path(__file__).resolve().parent.parent


def user_query(i: int) -> tuple[str, tuple[str, ...]]:
    roles = ROLES[i % len(ROLES)]
    if i % 2:
        return "SELECT count(*) AS n FROM HeartRate [ROWS 500]", roles
    k = THRESHOLDS[(i // 2) % len(THRESHOLDS)]
    text = f"SELECT patient_id, beats_per_min FROM HeartRate [RANGE 60] WHERE patient_id >= {k}"
    return text, roles


def aggregate_query(i: int) -> tuple[str, tuple[str, ...]]:
    roles = ROLES[i % len(ROLES)]
    if i % 2:
        return "SELECT count(*) AS n, max(beats_per_min) AS hi FROM HeartRate", roles
    k = THRESHOLDS[(i // 2) % len(THRESHOLDS)]
    text = (
        "SELECT patient_id, count(*) AS n, avg(beats_per_min) AS a FROM HeartRate "
        f"WHERE patient_id >= {k} GROUP BY patient_id"
    )
    return text, roles


def sliding_query(i: int) -> tuple[str, tuple[str, ...]]:
    """``aggregate_query`` over ``[RANGE 60 SLIDE 30]``: a sliding-window aggregate."""
    text, roles = aggregate_query(i)
    return text.replace("FROM HeartRate", "FROM HeartRate [RANGE 60 SLIDE 30]"), roles


KINDS = {"windows": user_query, "aggregates": aggregate_query, "sliding": sliding_query}


def run_case(
    spark, tmp: Path, n: int, share: bool, data: list[list[Element]], kind: str = "windows"
) -> dict:
    root = tmp / f"n{n}-{share}-{time.monotonic_ns()}"
    tuning = replace(STREAMING, share=share, share_windows=share, share_aggregates=share)
    pipeline = Pipeline(spark, hospital_catalog(root / "catalog.db"), root, tuning=tuning)
    queries, sinks, times, loads = [], [], [], []
    try:
        for i in range(n):
            text, roles = KINDS[kind](i)
            sinks.append(Sink())
            queries.append(
                pipeline.cql.submit(pipeline.cql.admit(text, roles), CallbackSink(sinks[-1]))
            )
        for b, items in enumerate(data):
            assert not pipeline.landing.append(items).rejected
            pipeline.ingest_available()
            started = time.perf_counter()
            for query in queries:
                query.process_all_available()
            if b == 0:
                rows = [s.rows for s in sinks]
                for s in sinks:
                    s.counting = False
                continue  # warm-up
            times.append(time.perf_counter() - started)
            loads.append(load())
    finally:
        for query in queries:
            pipeline.cql.stop(query.name)
        shutil.rmtree(root, ignore_errors=True)
    return {"n": n, "share": share, "seconds": times, "load": loads, "warmup_rows": rows}


def _earlier(out: Path) -> list[dict]:
    """The runs already in ``out``, kept so that a new run is compared with them (a
    file of one run, the earlier format, is that run)."""
    if not out.exists():
        return []
    earlier = json.loads(out.read_text())
    return earlier.get("runs", [{"label": "earlier", **earlier}])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--rows", type=int, default=5_000)
    parser.add_argument("--batches", type=int, default=2, help="timed batches per case")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--kind", choices=sorted(KINDS), default="windows")
    parser.add_argument("--label", default="", help="what this run measures (kept with it)")
    parser.add_argument("--out", default="", help="results file (default: by --kind)")
    args = parser.parse_args()
    spark = spark_session("local[2]", "window-sharing")
    spark.sparkContext.setLogLevel("ERROR")
    data = batches(args.batches + 1, args.rows, args.seed)
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.reps):
            order = (
                args.queries[rep % len(args.queries) :] + args.queries[: rep % len(args.queries)]
            )
            for n in order:
                for share in (rep % 2 == 0, rep % 2 == 1):  # arms alternate first
                    case = run_case(spark, Path(tmp), n, share, data, args.kind)
                    print(json.dumps(case), flush=True)
                    cases.append(case)
    summary = {}
    for n in args.queries:
        for share in (False, True):
            values = [t for c in cases if c["n"] == n and c["share"] is share for t in c["seconds"]]
            loads = [x for c in cases if c["n"] == n and c["share"] is share for x in c["load"]]
            summary[f"{'network' if share else 'alone'}-{n}"] = {
                "median_s": round(statistics.median(values), 3),
                "min_s": round(min(values), 3),
                "max_s": round(max(values), 3),
                "load": [min(loads), max(loads)],
            }
    print(json.dumps(summary, indent=1))
    name = {"windows": "window", "aggregates": "aggregate"}.get(args.kind, args.kind)
    out = Path(args.out) if args.out else ROOT / "bench" / "results" / f"{name}-sharing.json"
    run = {"label": args.label, "args": vars(args), "cases": cases, "summary": summary}
    out.write_text(json.dumps({"runs": [*_earlier(out), run]}, indent=1))
    spark.stop()


if __name__ == "__main__":
    main()
