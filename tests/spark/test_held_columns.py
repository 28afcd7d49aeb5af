"""Columns held in the JVM as one sequence select what ``DataFrame.select`` selects, on
every frame they are used on (engine/frames/held_columns.py)."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streamshield.engine.frames.held_columns import HeldColumns


def test_held_columns_select_as_select_does_on_every_frame(spark: SparkSession) -> None:
    held = HeldColumns(
        [
            F.col("a"),
            (F.col("b") * 2).alias("b2"),
            F.coalesce(F.col("c"), F.lit(0).cast("long")).alias("c"),
        ]
    )
    frames = [
        spark.createDataFrame([(1, 2, None), (3, None, 5)], "a long, b long, c long"),
        spark.createDataFrame([(7, 8, 9)], "c long, b long, a long"),  # other order
        spark.range(3).select(
            F.col("id").alias("a"), F.col("id").alias("b"), F.lit(None).cast("long").alias("c")
        ),
    ]
    for frame in frames:
        got = held.select(frame)
        want = frame.select(*held.columns)
        assert got.schema == want.schema
        assert got.collect() == want.collect()
    assert held.select(frames[0]).sparkSession is frames[0].sparkSession


def test_held_columns_work_in_another_session_and_on_a_stream(spark: SparkSession) -> None:
    held = HeldColumns([F.col("value").alias("v")])
    other = spark.newSession()
    frame = other.createDataFrame([("x",)], "value string")
    assert held.select(frame).collect() == [("x",)]
    assert held.select(frame).sparkSession is other
    stream = other.readStream.format("rate").load().select(F.col("value").cast("string"))
    assert held.select(stream).isStreaming
    assert held.select(stream).columns == ["v"]
