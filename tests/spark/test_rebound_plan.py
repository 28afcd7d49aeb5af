"""``bench.rebound_plan``: one optimised plan re-executed over each new batch reads the
new batch's rows (the prototype's premise), and the bench runs; nothing about speed."""

from __future__ import annotations

from bench import rebound_plan
from pyspark.sql import SparkSession


def test_a_held_plan_reads_each_new_batch(spark: SparkSession) -> None:
    # measure raises when a round's rows are not the batch it just made current
    medians = rebound_plan.measure(spark, rounds=3, warm=1)
    assert set(medians) == {"rebound", "rebuilt"}
    assert all(seconds > 0 for seconds in medians.values())
