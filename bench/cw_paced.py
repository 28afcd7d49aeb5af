"""Chinese-Wall Table 1 measured the paper's way: tuples arriving at its rate.

``python -m bench.cw_paced [--quick]``. Paper 2 (section 6.1) feeds its MessageLog
tuples into the query at 50,000 tuples per second (2,500 for the join) and reports the
execution time from the first tuple in to the last tuple out, vanilla vs CW-DSMS.
:mod:`bench.cw_table1` instead drains each query as fast as Spark can, which shows every
per-row cost in full and is the stricter figure. This bench is the paper's quantity:
each arm (the same ``vanilla`` and ``level`` plans as ``bench.cw_table1``, built by its
:func:`~bench.cw_table1.arm`) runs as a Structured Streaming query over Spark's ``rate``
source at the paper's rate, ``n`` tuples (value ``v`` arrives about ``v / rate`` s after
the start; the first 2M take 40 s), each micro-batch through the arm into the no-op sink
(``foreachBatch``: a [ROWS 100] window or a join is computed within a micro-batch, the
same for both arms). Measured per run: the wall time from the query's start until the
batch holding the last tuple is through the arm, and the driver JVM's CPU time over it.

The arms alternate (the one that goes first alternates between rounds) after one short
untimed run of each; the overhead is the geometric mean of the rounds' level / vanilla
ratios with a 95% bootstrap interval (``bench.paired_ratio``), judged against the
targets (2% for Experiments 1-5, 5% for the join) on the execution time, as the paper
judges it. ``--quick`` (2,000 tuples at 1,000 per second, Experiments 1 and 5, one
round) only proves that it runs and that the source is paced.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bench.cw_table1 import (
    ARMS,
    EXPERIMENTS,
    PAPER,
    TARGET_PCT,
    Experiment,
    arm,
    jvm_cpu_seconds,
    message_log,
)
from bench.experiment_common import clock
from bench.paired_ratio import overhead
from bench.revocation_latency import write_section
from bench.secured_scan import load
from streamshield.engine.session import spark_session

ROOT = Path(__file__).resolve().parent.parent
HEADING = "## Chinese-Wall Table 1 at the paper's arrival rate"
RATE, JOIN_RATE = 50_000, 2_500
"""Tuples per second the paper feeds (section 6.1): 50,000, and 2,500 for the join."""
SIZE, JOIN_SIZE = 2_000_000, 100_000
"""The paper's smallest data sets: 40 s of arrivals at its rates."""


def paced(spark: SparkSession, kind: str, n: int, rate: int) -> DataFrame:
    """The first ``n`` tuples of data set ``kind`` arriving at ``rate`` per second."""
    ticks = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", rate)
        .option("numPartitions", 2)
        .load()
    )
    return message_log(ticks.filter(F.col("value") < n).select(F.col("value").alias("id")), kind)


def paced_run(
    spark: SparkSession,
    build: Callable[[DataFrame], DataFrame],
    kind: str,
    n: int,
    rate: int,
    work: Path,
    cpu: Callable[[], float],
) -> tuple[float, float]:
    """Wall and JVM CPU seconds from the start until the last tuple is through ``build``."""
    through = threading.Event()

    def each(batch: DataFrame, _batch_id: int) -> None:
        build(batch).write.format("noop").mode("overwrite").save()
        last = batch.agg(F.max("timestamp")).first()[0]
        if last is not None and last >= n - 1:
            through.set()

    checkpoint = Path(tempfile.mkdtemp(dir=work, prefix="checkpoint-"))
    cpu0, began = cpu(), time.perf_counter()
    query = (
        paced(spark, kind, n, rate)
        .writeStream.foreachBatch(each)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="250 milliseconds")
        .start()
    )
    try:
        deadline = began + 3 * n / rate + 120
        while not through.wait(0.5):
            if not query.isActive or time.perf_counter() > deadline:
                raise RuntimeError(f"the paced run stopped early: {query.exception()}")
        return time.perf_counter() - began, cpu() - cpu0
    finally:
        query.stop()
        shutil.rmtree(checkpoint, ignore_errors=True)


def rounds(
    spark: SparkSession, e: Experiment, n: int, rate: int, repeats: int, work: Path, warm: bool
) -> dict:
    builds = {kind: arm(e, kind) for kind in ARMS}
    cpu = jvm_cpu_seconds(spark)
    for build in builds.values() if warm else ():  # JIT, codegen: 2 s of arrivals
        paced_run(spark, build, e.data, 2 * rate, rate, work, cpu)
    wall: dict[str, list[float]] = {kind: [] for kind in ARMS}
    used: dict[str, list[float]] = {kind: [] for kind in ARMS}
    kinds = list(ARMS)
    for i in range(repeats):
        for kind in kinds[i % 2 :] + kinds[: i % 2]:
            w, c = paced_run(spark, builds[kind], e.data, n, rate, work, cpu)
            wall[kind].append(round(w, 3))
            used[kind].append(round(c, 3))
    target = TARGET_PCT[e.number]
    time_o = overhead(wall["level"], wall["vanilla"])
    cpu_o = overhead(used["level"], used["vanilla"])
    return {
        "experiment": e.number,
        "query": e.query,
        "level": e.level,
        "data": e.data,
        "tuples": n,
        "rate": rate,
        "wall_s": wall,
        "cpu_s": used,
        "time_overhead": time_o.as_dict() | {"verdict": time_o.verdict(target)},
        "cpu_overhead": cpu_o.as_dict(),
        "target": target,
    }


def measure(args: argparse.Namespace) -> dict:
    spark = spark_session(app_name="streamshield-bench-cw-paced")
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="streamshield-cw-paced-"))
    started, load_before = clock(), load()
    rows = []
    try:
        for e in (e for e in EXPERIMENTS if e.number in args.experiments):
            n, rate = (args.join_size, args.join_rate) if e.number == 6 else (args.size, args.rate)
            row = rounds(spark, e, n, rate, args.repeats, work, not args.quick)
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "command": "python -m bench.cw_paced " + " ".join(args.argv),
        "started": started,
        "finished": clock(),
        "load_before_after": [load_before, load()],
        "rounds": args.repeats,
        "experiments": args.experiments,
        "paper_overhead_pct_from_text": {str(k): list(v) for k, v in PAPER.items()},
        "rows": rows,
    }


def _ci(o: dict) -> str:
    return f"{o['pct']:+.2f} [{o['low']:+.2f}, {o['high']:+.2f}]"


def markdown(result: dict) -> str:
    lines = [
        HEADING,
        "",
        f"`{result['command']}`;",
        f"load average (1, 5, 15 min) before / after: {result['load_before_after'][0]} /",
        f"{result['load_before_after'][1]} (2 cores, shared). Each arm runs as a streaming",
        "query over Spark's `rate` source at the paper's rate; time = from the query's start",
        "until the last tuple is through the arm (the paper's execution time), median of",
        f"{result['rounds']} interleaved rounds; overhead: geometric mean of the rounds'",
        "level / vanilla ratios with its 95% bootstrap interval (`bench/cw_paced.py`). The",
        "saturated figures (every per-row cost in full) are the section above.",
        "",
        "| exp | query at level | tuples at rate/s | vanilla s | level s | time overhead %"
        " [95% CI] | verdict (target) | CPU overhead % [95% CI] | paper % (text) |",
        "|---|---|---:|---:|---:|---|---|---|---|",
    ]
    for r in result["rows"]:
        lo, hi = result["paper_overhead_pct_from_text"][str(r["experiment"])]
        lines.append(
            f"| {r['experiment']} | {r['query']} at {r['level']} | {r['tuples']} at"
            f" {r['rate']} | {statistics.median(r['wall_s']['vanilla']):.2f} |"
            f" {statistics.median(r['wall_s']['level']):.2f} | {_ci(r['time_overhead'])} |"
            f" **{r['time_overhead']['verdict']}** ({r['target']:g}%) |"
            f" {_ci(r['cpu_overhead'])} | {lo}-{hi} |"
        )
    return "\n".join(lines) + "\n"


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 tuples: proves it runs")
    parser.add_argument("--size", type=int, default=SIZE)
    parser.add_argument("--rate", type=int, default=RATE)
    parser.add_argument("--join-size", type=int, default=JOIN_SIZE)
    parser.add_argument("--join-rate", type=int, default=JOIN_RATE)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds")
    parser.add_argument(
        "--experiments", type=int, nargs="+", default=[e.number for e in EXPERIMENTS]
    )
    parser.add_argument("--json", default=str(ROOT / "bench" / "results" / "cw-paced.json"))
    parser.add_argument("--results", default=str(ROOT / "docs" / "experiments.md"))
    args = parser.parse_args(argv)
    if args.quick:
        args.size = args.join_size = 2_000
        args.rate = args.join_rate = 1_000
        args.repeats = 1
        if args.experiments == [e.number for e in EXPERIMENTS]:
            args.experiments = [1, 5]
    args.argv = argv
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse(sys.argv[1:] if argv is None else argv)
    result = measure(args)
    if args.json != "-":
        Path(args.json).write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    write_section(Path(args.results), markdown(result), HEADING)
    print(markdown(result))
    return result


if __name__ == "__main__":
    main()
