"""Spark's plan-time refusals as messages safe to show: names and types, never values."""

from __future__ import annotations

import pytest

from streamshield.engine.spark_errors.analysis_errors import planned, rejected
from streamshield.lang.query_check import QueryRejected


class AnalysisException(Exception):  # matched by name, as pyspark's is
    def __init__(self, condition: str | None, params: dict[str, str], text: str = "") -> None:
        super().__init__(text or f"[{condition}] something")
        self.condition, self.params = condition, params

    def getCondition(self) -> str | None:  # pyspark spells it so
        return self.condition

    def getMessageParameters(self) -> dict[str, str]:
        return self.params


def test_an_unknown_column_lists_every_column_of_the_stream_and_no_internal_one() -> None:
    """Spark proposes the five nearest columns of the secured plan (labels among them):
    the answer lists the stream's own columns instead, all of them."""
    err = AnalysisException(
        "UNRESOLVED_COLUMN.WITH_SUGGESTION",
        {"objectName": "`patient`", "proposal": "`patient_id`, `_ss_seq`, `v`.`_ss_r0_0`, `ts`"},
    )
    columns = {"HeartRate": ("patient_id", "beats_per_min", "ts")}
    refusal = rejected(err, "SELECT patient FROM HeartRate", columns)
    assert refusal.rule == "unresolved_column"
    assert refusal.message.startswith(
        "unknown column `patient` (columns of HeartRate: `patient_id`, `beats_per_min`, `ts`)"
    )
    assert "_ss_" not in refusal.message


def test_an_unknown_column_of_a_join_lists_each_streams_columns() -> None:
    err = AnalysisException("UNRESOLVED_COLUMN.WITHOUT_SUGGESTION", {"objectName": "`x`"})
    refusal = rejected(err, "SELECT x FROM a JOIN b", {"a": ("id", "hr"), "b": ("id", "at")})
    assert "(columns of a: `id`, `hr`; columns of b: `id`, `at`)" in refusal.message


def test_a_parameter_quoting_a_literal_of_the_query_is_dropped() -> None:
    sql = "SELECT hr FROM s WHERE name = 'SECRET_VALUE' AND hr + 'x' > 1"
    err = AnalysisException(
        "DATATYPE_MISMATCH.BINARY_OP_DIFF_TYPES",
        {
            "sqlExpr": '"(name = SECRET_VALUE)"',
            "left": '"STRING"',
            "right": '"INT"',
            "functionName": "`SECRET_VALUE`",
        },
    )
    refusal = rejected(err, sql)
    assert "SECRET_VALUE" not in refusal.message
    assert '"STRING"' in refusal.message and "type error" in refusal.message


def test_an_unclassified_streaming_refusal_says_not_supported_without_its_text() -> None:
    err = AnalysisException(None, {}, "Sorting is not supported on streaming DataFrames 'v42'")
    refusal = rejected(err, "SELECT a FROM s ORDER BY a")
    assert refusal.rule == "not_supported" and "v42" not in refusal.message


def test_planned_passes_other_errors_through() -> None:
    with pytest.raises(QueryRejected):
        planned(lambda: (_ for _ in ()).throw(AnalysisException("X", {})), "SELECT 1")
    with pytest.raises(KeyError):
        planned(lambda: {}["k"], "SELECT 1")
