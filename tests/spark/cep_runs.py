"""Several patterns' outputs in one streaming query, fed batch by batch (the CEP tests).

A micro-batch is paid once for all patterns: their outputs are a union of JSON rows
tagged with the pattern's name (timestamps as epoch microseconds). One shuffle
partition: micro-batches are tiny and each partition of each stateful operator costs a
task.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import TimestampType

from streamshield.cep.oracle import Event

NO_DATA_BATCHES = "spark.sql.streaming.noDataMicroBatches.enabled"


def tagged_union(frames: Mapping[str, DataFrame]) -> DataFrame:
    union = None
    for name, frame in frames.items():
        columns = [
            F.unix_micros(f.name).alias(f.name)
            if isinstance(f.dataType, TimestampType)
            else F.col(f.name)
            for f in frame.schema.fields
        ]
        row = F.to_json(F.array(*columns)).alias("row")
        tagged = frame.select(F.lit(name).alias("pattern"), row)
        union = tagged if union is None else union.unionByName(tagged)
    assert union is not None
    plan = union._jdf.queryExecution().toString()
    assert "PythonUDF" not in plan and "EvalPython" not in plan  # native Catalyst only
    return union


def run_patterns(
    spark: SparkSession,
    frames: Mapping[str, DataFrame],
    checkpoint: Path,
    batches: Sequence[Sequence[Event]],
    write: Callable[[int, Sequence[Event]], None],
    *,
    settled: bool = True,
) -> dict[str, list[tuple]]:
    """Each pattern's rows after ``write(number, batch)`` of every batch in turn, each
    processed to completion. ``settled``: with Spark's micro-batches without data after
    each that moves the watermark (its default); without them, each batch of data is one
    micro-batch judged by the watermark of the one before (``oracle.admitted``)."""
    union = tagged_union(frames)
    got: dict[str, list[tuple]] = {name: [] for name in frames}

    def sink(batch: DataFrame, _id: int) -> None:
        for name, row in batch.collect():
            got[name].append(tuple(json.loads(row)))

    confs = {"spark.sql.shuffle.partitions": "1"}
    if not settled:
        confs[NO_DATA_BATCHES] = "false"
    before = {name: spark.conf.get(name) for name in confs}
    for name, value in confs.items():  # read once, when the query starts
        spark.conf.set(name, value)
    try:
        query = (
            union.writeStream.outputMode("append")
            .foreachBatch(sink)
            .option("checkpointLocation", str(checkpoint))
            .start()
        )
    finally:
        for name, value in before.items():
            spark.conf.set(name, value)
    try:
        for number, batch in enumerate(batches):
            write(number, batch)
            query.processAllAvailable()
    finally:
        query.stop()
    return got
