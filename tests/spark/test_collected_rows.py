"""A delivery job's rows as Arrow columns give each class the dicts classic rows gave.

Delivery collects one column per recipient class and hands each class the dicts of its
column's non-NULL structs (engine/delivery/collected_rows.py). Whatever the output's types, those
dicts must be the ones ``Row.asDict`` gave (timestamps: the session's wall time, UTC),
and a frame Arrow cannot carry must still be delivered (the classic collect), with the
drop metrics of the same job.
"""

from __future__ import annotations

import time

import pytest
from pyspark.sql import functions as F

from streamshield.engine.delivery.collected_rows import CollectedRows, collect_rows
from streamshield.engine.delivery.observed_collect import collect_observed

pytestmark = pytest.mark.spark


@pytest.fixture
def utc(monkeypatch):
    """Classic rows give a timestamp in the process's zone; the session's is UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def columns(frame, picks, metrics):
    return lambda f: f.filter(F.col("id") % 3 != 0).select(*picks)


def test_every_type_a_query_gives_is_handed_over_as_classic_rows_give_it(spark, utc) -> None:
    frame = spark.range(12).select(
        F.col("id"),
        (F.col("id") * 1.5).alias("x"),
        F.col("id").cast("int").alias("i"),
        (F.col("id") % 2 == 0).alias("even"),
        F.concat(F.lit("p"), F.col("id").cast("string")).alias("s"),
        F.timestamp_seconds(F.col("id") * 86_400 + 1_764_000_000).alias("ts"),
        F.to_date(F.timestamp_seconds(F.col("id") * 86_400)).alias("day"),
        (F.col("id") / 7).cast("decimal(10,3)").alias("dec"),
        F.array(F.lit("a"), F.col("id").cast("string")).alias("arr"),
        F.create_map(F.lit("k"), F.col("id")).alias("m"),
        F.struct(F.col("id").alias("inner"), F.lit(None).cast("string").alias("gone")).alias("st"),
        F.array(F.timestamp_seconds(F.col("id"))).alias("times"),
        F.when(F.col("id") > 5, F.lit("late")).alias("maybe"),
    )
    fields = [c for c in frame.columns if c != "id"]
    picks = [
        F.when(F.col("id") % 2 == 0, F.struct(*fields)).alias("even_rows"),
        F.when(F.col("id") > 4, F.struct("id", "ts", "st")).alias("late_rows"),
        F.lit(None).cast("struct<a:int>").alias("nobody"),
    ]
    metrics = [F.count_if(F.col("id") % 3 == 0).alias("dropped")]
    then = columns(frame, picks, metrics)
    arrow, counts = collect_rows(frame, metrics, then)
    rows, classic_counts = collect_observed(frame, metrics, then)
    classic = CollectedRows(rows=rows)
    assert arrow._table is not None, "collected as Arrow"
    assert counts == classic_counts == {"dropped": 4}
    for position in range(3):
        assert arrow.dicts(position) == classic.dicts(position), position
    assert [r["id"] for r in arrow.dicts(1)] == [5, 7, 8, 10, 11]
    assert arrow.dicts(2) == []
    assert arrow.dicts(0)[0]["m"] == {"k": 2} and arrow.dicts(0)[0]["ts"].tzinfo is None
    assert arrow.dicts(0) is arrow.dicts(0), "made once, shared"


def test_a_frame_arrow_cannot_carry_as_classic_rows_is_delivered_the_classic_way(
    spark, utc
) -> None:
    """A zoned timestamp inside a map, a variant (Arrow gives its bytes), binary; and an
    interval, which classic rows cannot carry at all, is handed over by Arrow."""
    frame = spark.range(4).select(
        F.col("id"),
        F.create_map(F.lit("at"), F.timestamp_seconds(F.col("id"))).alias("m"),
        F.parse_json(F.lit('{"a": 1}')).alias("v"),
        F.lit(b"\x00").alias("b"),
        F.make_interval(F.lit(0), F.lit(0), F.lit(0), F.col("id").cast("int")).alias("span"),
    )
    metrics = [F.count_if(F.col("id") % 3 == 0).alias("dropped")]
    for field in ("m", "v", "b", "span"):
        picks = [F.struct("id", field).alias("all")]
        got, counts = collect_rows(frame, metrics, columns(frame, picks, metrics))
        assert (got._table is None) == (field != "span"), field
        assert [r["id"] for r in got.dicts(0)] == [1, 2], field
        assert counts == {"dropped": 2}, field
    assert str(got.dicts(0)[0]["span"]) != "", "an interval is handed over"
