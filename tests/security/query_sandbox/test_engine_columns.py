"""Threat: SQL reaching what the secured views hold but the user never names.

A secured view carries columns for the engine: labels, mask flags and, in the statistics
view of an aggregate query, each attribute masked only for STATISTICS. A star inside an
expression (``to_json(struct(*))``) expands to all of them, so an insurer with
statistics-only access would collect the raw heart rates she may only aggregate. And
Spark substitutes ``${env:X}`` in SQL text, which would read the server's environment.
The query check refuses both (rules ``star`` and ``substitution``); the Spark session
has substitution off as a second line.
"""

from __future__ import annotations

import os

import pytest

from streamshield.lang.query_check import QueryRejected
from tests.security.ward import STATISTICS_ONLY

pytestmark = pytest.mark.spark

DUMPS = [
    "SELECT count(*) AS n, collect_list(to_json(struct(*))) AS dump FROM HeartRate",
    "SELECT count(*) AS n, max(struct(HeartRate.*)) AS dump FROM HeartRate",
    "SELECT *, count(*) AS n FROM HeartRate GROUP BY ALL",
]


@pytest.mark.parametrize("sql", DUMPS)
def test_statistics_only_values_cannot_be_dumped_through_a_star(labelled_ward, sql) -> None:
    with pytest.raises(QueryRejected) as refused:
        rows = labelled_ward.rows(sql, ["INS"])
        leaked = [v for v in map(str, STATISTICS_ONLY.values()) if v in str(rows)]
        pytest.fail(f"the query ran; raw statistics-only values in its output: {leaked}")
    assert refused.value.rule == "star"


def test_aggregates_over_statistics_only_rows_still_work(labelled_ward) -> None:
    [row] = labelled_ward.rows(
        "SELECT count(*) AS n, avg(beats_per_min) AS mean FROM HeartRate", ["INS"]
    )[-1:]
    assert row == {"n": 4, "mean": 62.5}


def test_sql_text_never_reads_the_environment(spark, labelled_ward) -> None:
    os.environ["STREAMSHIELD_TEST_SECRET"] = "hunter2"
    try:
        session = spark.newSession()  # every query runs in a session like this one
        [row] = session.sql("SELECT '${env:STREAMSHIELD_TEST_SECRET}' AS x").collect()
        assert row.x == "${env:STREAMSHIELD_TEST_SECRET}"
        with pytest.raises(QueryRejected) as refused:
            labelled_ward.rows(
                "SELECT '${env:STREAMSHIELD_TEST_SECRET}' AS x FROM HeartRate", ["ND"]
            )
        assert refused.value.rule == "substitution"
    finally:
        del os.environ["STREAMSHIELD_TEST_SECRET"]
