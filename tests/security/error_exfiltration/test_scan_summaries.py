"""Threat: the scan summaries (engine/views/scan_summary.py) let a hidden row reach a user
expression, or show a row its words hide.

The same attack as test_hidden_rows_reach_no_expression (an ANSI cast that fails on a
hidden row's value), over files that carry the summaries ingest writes: the range test
is pushed to Parquet beneath the tuple test. Row 2 is hidden from ND and its attributes
share its label, so only the Filter stands between its rate of 200.0 and ND's cast.
Summaries that claim more than the words (a range covering every role) must not show a
row either: the bitwise test always decides.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from streamshield.engine.store.labelled_store import labelled_schema
from streamshield.engine.views.secured_view import secured_view
from streamshield.examples import hospital
from streamshield.policy.encoding import RoleCodec
from streamshield.policy.privileges import Privilege
from streamshield.policy.reader_range import reader_range
from tests.security.error_exfiltration.test_hidden_rows_reach_no_expression import SQL, STREAM

pytestmark = pytest.mark.spark
CODEC = RoleCodec(hospital.hierarchy())


def _rows(forged: bool) -> list[tuple]:
    """Row 1 readable by C and ND, row 2 by C only, row 3 by nobody (ingest denied it);
    ``forged``: summaries that claim every role may read every row."""

    def row(seq: int, rate: float, *roles: str) -> tuple:
        readers, nobody = CODEC.twins(roles, Privilege), CODEC.twins((), Privilege)
        words = [
            x
            for _ in range(len(STREAM.names) + 1)
            for w in range(CODEC.width)
            for x in (readers[w], nobody[w])
        ]
        lo, hi = reader_range(readers[: CODEC.block_width])
        summary = (0, 10**6) if forged else (lo, hi)
        reason = "pass" if roles else "no policy"
        return ("Vitals", "p", seq, str(seq), reason, "policy", seq, rate, seq, *words, *summary)

    return [row(1, 71.0, "C", "ND"), row(2, 200.0, "C"), row(3, 300.0)]


@pytest.fixture(scope="module", params=[False, True], ids=["summaries", "forged"])
def vitals(spark: SparkSession, tmp_path_factory, request) -> Path:
    struct = labelled_schema(spark, STREAM.ddl, len(STREAM.names), CODEC.width, summaries=True)
    path = tmp_path_factory.mktemp("vitals") / "labelled"
    spark.createDataFrame(_rows(request.param), struct).write.parquet(str(path))
    return path


def _run(spark: SparkSession, path: Path, sql: str, roles: list[str]) -> list[dict]:
    struct = labelled_schema(spark, STREAM.ddl, len(STREAM.names), CODEC.width, summaries=True)
    frame = spark.read.schema(struct).parquet(str(path))
    view = secured_view(frame, STREAM, CODEC, roles, keep_labels=True, salt="s")
    view.createOrReplaceTempView("Vitals")
    try:
        return [r.asDict() for r in spark.sql(sql).collect()]
    finally:
        spark.catalog.dropTempView("Vitals")


@pytest.mark.parametrize("sql", SQL)
def test_a_hidden_row_never_reaches_a_user_expression(spark, vitals, sql: str) -> None:
    with pytest.raises(PySparkException):  # the control: C reads row 2, and it fails
        _run(spark, vitals, sql, ["C"])
    rows = _run(spark, vitals, sql, ["ND"])
    assert all(r.get("pid") in (None, 1) for r in rows), rows
    assert rows == [{"n": 0}] if "count" in sql else [r["pid"] for r in rows] == [1]


def test_summaries_never_show_a_row_or_a_label_column(spark, vitals) -> None:
    rows = _run(spark, vitals, "SELECT * FROM Vitals", ["C"])
    assert sorted(r["pid"] for r in rows) == [1, 2]  # row 3: its words allow nobody
    assert not any(c.startswith("_ss_scan_") for c in rows[0])
