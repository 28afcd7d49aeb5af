"""What SecFilter costs per micro-batch at delivery, against a plain fan-out of the same batch.

One command: ``.venv/bin/python -m bench.delivery_cost [--rows N]``. The batch looks like
a secured query's output (payload, label words, provenance, policy id, and the salted
channel hash the secured view adds); its one subscriber may not read its source, so
nothing is collected and the figure is Delivery's own work: its checks and the drop
report (one job, not a cache, an emptiness check, the filter and a drop aggregate
each). The plain fan-out caches and counts the payload. Best of
``--repeats`` warm runs each, alternating, printed as seconds and as a ratio (plain /
secured throughput); ``measure`` is what bench.table13 calls.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamshield.engine.delivery.delivery import Delivery
from streamshield.engine.views.provenance_columns import provenance_column
from streamshield.policy.provenance import ProvenanceCodec, Rights


def batch(spark: SparkSession, rows: int, codec: ProvenanceCodec) -> DataFrame:
    channel = F.concat_ws("\x1f", F.lit("salt"), F.lit("s"), (F.col("id") % 8).cast("string"))
    return spark.range(rows).select(
        F.col("id").alias("v"),
        (F.col("id") % 100).alias("w"),
        F.sha2(channel, 256).alias("_ss_channel"),
        F.col("id").alias("_ss_seq"),
        F.lit("policy").alias("_ss_policy"),
        F.lit(-1).cast("long").alias("_ss_r0_0"),
        F.lit(0).cast("long").alias("_ss_d0_0"),
        F.lit(codec.label("b")[0]).cast("long").alias(provenance_column(0)),
    )


def plain(frame: DataFrame) -> None:
    cached = frame.select("v", "w").persist()
    cached.count()
    cached.unpersist()


def measure(spark: SparkSession, rows: int, repeats: int) -> dict[str, list[float]]:
    """Seconds of the plain fan-out and of SecFilter delivery of one ``rows``-row batch,
    ``repeats`` rounds after one warm-up of each, the order flipping every round."""
    codec = ProvenanceCodec(["a", "b"])
    frame = batch(spark, rows, codec)
    delivery = Delivery(
        lambda _: Rights(frozenset({"a"})), codec, roles=lambda _s: (1,), on_drop=lambda *_: None
    )
    delivery.subscribe("u", lambda _rows: None)
    arms = {"plain": lambda: plain(frame), "secured": lambda: delivery(frame, 0)}
    times: dict[str, list[float]] = {kind: [] for kind in arms}
    for run in arms.values():
        run()  # warm-up
    kinds = list(arms)
    for i in range(repeats):
        for kind in kinds if i % 2 == 0 else reversed(kinds):
            start = time.perf_counter()
            arms[kind]()
            times[kind].append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    spark = (
        SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    times = measure(spark, args.rows, args.repeats)
    plain_s, secured_s = min(times["plain"]), min(times["secured"])
    ratios = sorted(p / s for p, s in zip(times["plain"], times["secured"], strict=True))
    print(
        f"rows {args.rows}: plain fan-out {plain_s:.2f} s, SecFilter delivery {secured_s:.2f} s, "
        f"ratio {plain_s / secured_s:.2f} (best of each); per round "
        f"{statistics.median(ratios):.2f} ({ratios[0]:.2f}-{ratios[-1]:.2f}); "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )


if __name__ == "__main__":
    main()
