"""Secure ingest's two ways of collecting a batch, in one process.

    python -m bench.ingest_collect --rounds 9

One landing of ``--tuples`` tuples at 1 sp per tuple and 64 roles (``bench.workload``),
one ``Ingest`` warmed by an untimed run, then plain ingest and secure ingest collecting
*grouped* and *flat* (``Ingest.flat``, engine/ingest/ingest.py) rotate, each a fresh
``availableNow`` query. Prints each arm's median seconds, the ratio plain / secure per
round (median, min-max) and each secure arm's median seconds per pass, with the load
average before and after. In one process so that the arms share the machine's state.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
from pathlib import Path

from bench.ingest_passes import secure_ingest, warmed
from bench.run import plain_ingest
from bench.workload import write_landing
from streamshield.engine.session import spark_session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tuples", type=int, default=10_000)
    parser.add_argument("--per-sp", type=int, default=1)
    parser.add_argument("--roles", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    spark = spark_session()
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="streamshield-bench-collect-"))
    try:
        landing = write_landing(work / "landing", args.tuples, args.per_sp, args.roles)
        ingest, _ = warmed(spark, landing, work, args.roles)
        plain_ingest(spark, landing, work / "plain-warm-up")
        times: dict[str, list[float]] = {"plain": [], "grouped": [], "flat": []}
        passes: dict[str, list[dict]] = {"grouped": [], "flat": []}
        arms = list(times)
        print("load before", os.getloadavg(), flush=True)
        for i in range(args.rounds):
            for arm in arms[i % 3 :] + arms[: i % 3]:
                out = work / f"{arm}{i}"
                if arm == "plain":
                    times[arm].append(plain_ingest(spark, landing, out))
                else:
                    ingest.flat = arm == "flat"  # how this run's one batch is collected
                    seconds, spent = secure_ingest(spark, landing, out, args.roles, ingest)
                    times[arm].append(seconds)
                    passes[arm].append(spent)
                shutil.rmtree(out, ignore_errors=True)
        print("load after", os.getloadavg(), flush=True)
        for arm, values in times.items():
            print(arm, "median s", round(statistics.median(values), 3), flush=True)
        for arm in ("grouped", "flat"):
            ratios = [p / s for p, s in zip(times["plain"], times[arm], strict=True)]
            per_pass = {
                k: round(statistics.median(p[k] for p in passes[arm]), 3) for k in passes[arm][0]
            }
            print(
                arm,
                f"ratio {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})",
                per_pass,
                flush=True,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
