"""Plain ingest, secure ingest before a change, this tree's, and this tree's without its
per-file sort, interleaved in one Spark session.

    python -m bench.ingest_arms --tuples 100000 --configs 100x1,100x500 --reps 3

``before``: ``engine/ingest/ingest.py`` of ``--before`` (default fd4f5e8, with per-row scan
summaries); ``secure``: this tree; ``nosort``: this tree with
``sortWithinPartitions`` made a no-op, the cost of sorting each file by ``lo`` (files
then skip fewer pages; never a correctness change). A configuration is tuples-per-sp x
roles; the arms' order rotates every repetition. Prints every run with its passes and
the 1-minute load, then per arm the median (min-max) time, plain/arm ratio and median
passes; ``--out`` keeps them as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
from pathlib import Path

from pyspark.sql import DataFrame

from bench.ingest_before_after import old_module, timed_job
from bench.run import plain_ingest
from bench.workload import STREAM, hierarchy, write_landing
from streamshield.engine.ingest.ingest import Ingest
from streamshield.engine.session import spark_session

SORT = DataFrame.sortWithinPartitions


def secure(spark, cls, landing: Path, out: Path, roles: int) -> tuple[float, dict]:
    total, passes = timed_job(cls(spark, hierarchy(roles), {STREAM.name: STREAM}), landing, out)
    passes["other"] = total - sum(passes.values())
    return total, passes


def run_arm(spark, old, arm: str, land: Path, out: Path, roles: int) -> tuple[float, dict]:
    if arm == "plain":
        return plain_ingest(spark, land, out), {}
    if arm == "nosort":
        DataFrame.sortWithinPartitions = lambda self, *cols, **kw: self  # type: ignore
    try:
        return secure(spark, old.Ingest if arm == "before" else Ingest, land, out, roles)
    finally:
        DataFrame.sortWithinPartitions = SORT  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tuples", type=int, default=100_000)
    parser.add_argument("--configs", default="100x1,100x500")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--arms", default="plain,before,secure,nosort")
    parser.add_argument("--before", default="fd4f5e8")
    parser.add_argument("--out", default="/tmp/ingest-arms.json")
    args = parser.parse_args()
    arms = args.arms.split(",")
    old = old_module(args.before)
    spark = spark_session()
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="ingest-arms-"))
    warm = write_landing(work / "warm", 20_000, 100, 1)
    for arm in arms:
        run_arm(spark, old, arm, warm, work / f"warm-{arm}", 1)
    results: list[dict] = []
    for config in args.configs.split(","):
        per_sp, roles = (int(x) for x in config.split("x"))
        land = write_landing(work / config, args.tuples, per_sp, roles)
        times: dict[str, list[float]] = {a: [] for a in arms}
        passes: dict[str, list[dict]] = {a: [] for a in arms}
        for i in range(args.reps):
            for arm in arms[i % len(arms) :] + arms[: i % len(arms)]:
                seconds, spent = run_arm(spark, old, arm, land, work / f"{config}-{arm}{i}", roles)
                times[arm].append(seconds)
                passes[arm].append(spent)
                shown = {k: round(v, 3) for k, v in spent.items()}
                print(config, i, arm, round(seconds, 3), shown, "load", os.getloadavg()[0])
        result: dict = {"config": config, "tuples": args.tuples, "load": os.getloadavg()}
        for arm in arms:
            entry: dict = {"s": times[arm], "median_s": statistics.median(times[arm])}
            if arm != "plain" and "plain" in times:
                ratios = [p / s for p, s in zip(times["plain"], times[arm], strict=True)]
                entry["plain_over_arm"] = [statistics.median(ratios), min(ratios), max(ratios)]
                entry["passes_s"] = {
                    k: round(statistics.median(p[k] for p in passes[arm]), 3)
                    for k in passes[arm][0]
                }
            result[arm] = entry
        print("RESULT", json.dumps(result), flush=True)
        results.append(result)
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
