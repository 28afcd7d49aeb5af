"""Every class's drops from one delivery job: a count each, one set of policy ids.

The audit's figures per subscriber (how many rows she did not get, their policy ids)
must be exactly what counting each class on its own gives, for any number of classes
(past the 62 of one bit word) and with several policy columns in one job.
"""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from streamshield.engine.drop_report import DropLayout, Missed

pytestmark = pytest.mark.spark

ROWS = 40


def test_each_class_gets_its_own_count_and_policy_ids_whatever_the_number(spark) -> None:
    frame = spark.range(ROWS).select(
        "id",
        F.concat(F.lit("p"), (F.col("id") % 5).cast("string")).alias("policy"),
        F.concat(F.lit("q"), (F.col("id") % 3).cast("string")).alias("other"),
    )

    def misses(i: int, row: int) -> bool:
        return row % (i % 9 + 2) == 0 and row >= i % 4

    classes = [
        Missed(
            f"_ss_d{i}",
            (F.col("id") % (i % 9 + 2) == 0) & (F.col("id") >= i % 4),
            F.col("other") if i % 10 == 3 else F.col("policy"),
        )
        for i in range(70)
    ]
    classes.append(Missed("_ss_none", F.lit(False), F.col("policy")))  # misses nothing
    classes.append(classes[5])  # the same class twice (two outputs): one
    layout = DropLayout.of(classes)
    assert len(layout.classes) == 71
    counts = frame.agg(*layout.metrics()).collect()[0].asDict(recursive=False)
    got = layout.read(counts)
    for i in range(70):
        rows = [r for r in range(ROWS) if misses(i, r)]
        ids = {f"q{r % 3}" if i % 10 == 3 else f"p{r % 5}" for r in rows}
        assert got[f"_ss_d{i}"] == (len(rows), tuple(sorted(ids))), i
    assert got["_ss_none"] == (0, ())
    assert len([m for m in layout.metrics() if "dropset" in str(m)]) == 2, "a set per policy column"
