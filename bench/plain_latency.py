"""What plain Spark pays for a landing to reach a reader: the floor under the
landing latency target.

The secured row (``bench.landing_latency``) runs a landing through the server: a POST,
secure ingest's streaming query (0.2 s trigger) into the labelled store, then the stream's
scan and the selection's delivery to an SSE reader. This bench runs the same 1,000-row
landing file through plain Spark Structured Streaming in the same kind of session, with
no security and no server, in two shapes:

* ``one query``: a file-source query over the landing zone (JSON lines, 0.2 s trigger),
  the selection, and a ``foreachBatch`` that collects the rows to the driver (Arrow) and
  hands them to a reader: the least any Spark pipeline pays, with no storage between
  landing and reader;
* ``two queries``: what the secured pipeline's shape costs plainly: a file-source query
  writing the landing to Parquet (the plain "ingest", 0.2 s trigger), and a file-source
  query over that Parquet (0.1 s trigger, the driven scan's poll) running the selection
  into the same ``foreachBatch`` reader.

Each round writes one landing file atomically (write, then rename: what the landing zone
does), at a random phase of the trigger, and times it until the reader has the rows. The
first round warms up and is not reported. The two shapes alternate round by round in one
session, so a noisy machine weighs on both alike.

``python -m bench.plain_latency [--rounds N] [--tuples N]`` prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from bench.landing_latency import percentile
from streamshield.engine.session import spark_session

SCHEMA = StructType(
    [
        StructField("id", LongType()),
        StructField("symbol", StringType()),
        StructField("price", DoubleType()),
    ]
)
SELECTION = "price >= 0"
SHAPES = ("one query", "two queries")
SYMBOLS = ("ACME", "INIT", "GLOB", "UMBR")


class Reader:
    """The rows' recipient: a ``foreachBatch`` collecting each micro-batch to the driver."""

    def __init__(self) -> None:
        self.arrived: queue.Queue[tuple[float, int]] = queue.Queue()

    def batch(self, frame: DataFrame, _batch_id: int) -> None:
        rows = frame.where(SELECTION).select("id", "symbol", "price").toArrow().num_rows
        if rows:
            self.arrived.put((time.perf_counter(), rows))


def _start(
    frame: DataFrame, sink: Callable[[DataFrame, int], None] | None, **options: str
) -> StreamingQuery:
    writer = frame.writeStream.option("checkpointLocation", options.pop("checkpoint"))
    writer = writer.trigger(processingTime=options.pop("trigger"))
    if sink is not None:
        return writer.foreachBatch(sink).start()
    return writer.format("parquet").option("path", options.pop("path")).start()


def _pipeline(spark: SparkSession, root: Path, shape: str, reader: Reader) -> list[StreamingQuery]:
    landing = root / "landing"
    landing.mkdir(parents=True)
    source = spark.readStream.schema(SCHEMA).json(str(landing))
    if shape == "one query":
        return [
            _start(source, reader.batch, checkpoint=str(root / "cp1"), trigger="200 milliseconds")
        ]
    stored = root / "stored"
    ingest = _start(
        source, None, checkpoint=str(root / "cp1"), trigger="200 milliseconds", path=str(stored)
    )
    scanned = spark.readStream.schema(SCHEMA).parquet(str(stored))
    scan = _start(scanned, reader.batch, checkpoint=str(root / "cp2"), trigger="100 milliseconds")
    return [ingest, scan]


def _land(landing: Path, rng: random.Random, tuples: int, first_id: int) -> None:
    """One landing file, written then renamed into place (as the landing zone does)."""
    lines = [
        json.dumps(
            {"id": first_id + i, "symbol": rng.choice(SYMBOLS), "price": rng.uniform(0, 100)}
        )
        for i in range(tuples)
    ]
    tmp = landing.parent / f".{first_id}.tmp"
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, landing / f"part-{first_id:012d}.json")


def measure(spark: SparkSession, rounds: int, tuples: int, seed: int = 3) -> dict:
    """Per shape, ``rounds`` reported latencies (seconds) of a ``tuples``-row landing file
    to the reader having its rows, the shapes alternating round by round."""
    rng = random.Random(seed)
    root = Path(tempfile.mkdtemp(prefix="ss-plain-latency-"))
    readers = {shape: Reader() for shape in SHAPES}
    queries: list[StreamingQuery] = []
    latencies: dict[str, list[float]] = {shape: [] for shape in SHAPES}
    try:
        for shape in SHAPES:
            queries += _pipeline(spark, root / shape.replace(" ", "_"), shape, readers[shape])
        next_id = 1
        for round_no in range(rounds + 1):
            for shape in SHAPES:
                time.sleep(rng.uniform(0.3, 0.6))  # a random phase of the triggers
                began = time.perf_counter()
                _land(root / shape.replace(" ", "_") / "landing", rng, tuples, next_id)
                next_id += tuples
                arrived, rows = readers[shape].arrived.get(timeout=120)
                if rows != tuples:
                    raise RuntimeError(f"{shape}: {rows} rows arrived, {tuples} landed")
                if round_no:  # the first round warms up
                    latencies[shape].append(round(arrived - began, 4))
    finally:
        for query in queries:
            query.stop()
        shutil.rmtree(root, ignore_errors=True)
    return {
        "tuples_per_landing": tuples,
        "rounds": rounds,
        "shapes": {
            shape: {
                "latency_s": values,
                "p50_s": round(statistics.median(values), 3),
                "p95_s": percentile(values, 0.95),
                "min_s": min(values),
                "max_s": max(values),
            }
            for shape, values in latencies.items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--tuples", type=int, default=1000)
    args = parser.parse_args()
    spark = spark_session(app_name="streamshield-bench-plain-latency")
    spark.sparkContext.setLogLevel("ERROR")
    print(json.dumps(measure(spark, args.rounds, args.tuples), indent=2))


if __name__ == "__main__":
    main()
