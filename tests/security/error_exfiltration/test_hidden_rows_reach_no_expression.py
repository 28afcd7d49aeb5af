"""Threat: a user expression evaluated on a row the secured view drops.

The secured view masks each attribute with its own label test only and leaves the tuple
test to the Filter beneath the masks (the tuple test is not repeated in
every mask). A user predicate that Catalyst pushes through the masks must therefore
still run only on rows that Filter kept: otherwise an ANSI error (an overflowing cast)
on a dropped row's value would tell that the row exists and something of its value.

The rows are written by hand so that their labels can say what ingest only writes with
server policies: the tuple is hidden from ND while the rate's own label names ND. They
go through Parquet as labelled streams do, so the scan and the generated Filter are the
real ones. C, who reads every row, is the control: the same SQL fails for her.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlglot
from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from streamshield.catalog.streams import StreamDefinition
from streamshield.engine.sharing.fused_branches import FusedBranch, FusedPass, fused_pass
from streamshield.engine.store.labelled_store import labelled_schema
from streamshield.engine.views.secured_view import SecuredProjection, secured_view, statistics_view
from streamshield.examples import hospital
from streamshield.policy.encoding import RoleCodec
from streamshield.policy.privileges import Privilege

pytestmark = pytest.mark.spark

STREAM = StreamDefinition(
    "Vitals", (("pid", "bigint"), ("rate", "double"), ("ts", "bigint")), "pid", "ts"
)
SQL = (
    "SELECT pid FROM Vitals WHERE CAST(rate AS TINYINT) > 0",
    "SELECT t.pid FROM (SELECT * FROM Vitals WHERE pid > 0) t WHERE CAST(t.rate AS TINYINT) > 0",
    "SELECT pid, CAST(rate AS TINYINT) AS b FROM Vitals",
    "SELECT count(*) AS n FROM Vitals WHERE 1 DIV CAST(rate - 200 AS INT) > 0",
)


def _rows(codec: RoleCodec) -> list[tuple]:
    """Row 1 readable by C and ND; row 2 (rate 200.0: no TINYINT holds it) hidden from
    ND by its tuple label while its rate's label names ND; row 3 a tuple ingest denied,
    as ingest writes it: reader words that allow nobody (the view reads no ``reason``)."""

    def readers(*roles: str) -> tuple[int, ...]:
        return codec.twins(roles, Privilege)

    both, only_c, nobody = readers("C", "ND"), readers("C"), readers()

    def row(seq: int, rate: float, reason: str, tuple_r: tuple, rate_r: tuple) -> tuple:
        words = []
        for name in (None, *STREAM.names):
            for w in range(codec.width):
                words += [(rate_r if name == "rate" else tuple_r)[w], nobody[w]]
        return ("Vitals", "p", seq, str(seq), reason, "policy", seq, rate, seq, *words)

    return [
        row(1, 71.0, "pass", both, both),
        row(2, 200.0, "pass", only_c, both),
        row(3, 300.0, "no policy", nobody, nobody),
    ]


@pytest.fixture(scope="module")
def vitals(spark: SparkSession, tmp_path_factory) -> tuple[Path, RoleCodec]:
    codec = RoleCodec(hospital.hierarchy())
    struct = labelled_schema(spark, STREAM.ddl, len(STREAM.names), codec.width)
    path = tmp_path_factory.mktemp("vitals") / "labelled"
    spark.createDataFrame(_rows(codec), struct).write.parquet(str(path))
    return path, codec


def _pass(spark: SparkSession, vitals, sql: str, roles: list[str]) -> tuple[FusedPass, DataFrame]:
    """The query as a branch of a shared network's one pass (engine/sharing/fused_branches.py),
    beside a branch of C that reads every row without failing, and the pass's rows."""
    path, codec = vitals
    struct = labelled_schema(spark, STREAM.ddl, len(STREAM.names), codec.width)
    frame = spark.read.schema(struct).parquet(str(path))

    def branch(slot: str, text: str, roles: list[str]) -> FusedBranch:
        projection = SecuredProjection.of(frame.columns, STREAM, codec, roles, True, "s")
        columns = projection.apply(frame).columns
        secured = sqlglot.parse_one(text.replace("Vitals", "`v`", 1), read="spark")
        return FusedBranch.of(slot, projection, columns, secured)

    one = fused_pass((branch("other", "SELECT pid FROM Vitals", ["C"]), branch("mine", sql, roles)))
    return one, one.over(frame)


def _fused(spark: SparkSession, vitals, sql: str, roles: list[str]) -> list[dict]:
    """The query's rows rebuilt from the pass: its WHERE in the pass, its SELECT items
    computed when its rows are rebuilt."""
    one, wide = _pass(spark, vitals, sql, roles)
    assert len(one.rows(wide, "other").collect()) == 2
    return [r.asDict() for r in one.rows(wide, "mine").collect()]


def _together(spark: SparkSession, vitals, sql: str, roles: list[str]) -> list[dict]:
    """The query's rows as the one delivery job of every listening branch reads them
    (:meth:`FusedPass.outputs`: its items over its view columns beside the other
    branch's, each picked only where its branch takes the row, as ``Delivery.plan``'s
    class columns are)."""
    one, wide = _pass(spark, vitals, sql, roles)
    outputs = one.outputs(wide, ["other", "mine"])

    def pick(slot: str) -> Column:
        fields = [outputs.col[slot](c).alias(c) for c in outputs.columns[slot]]
        return F.when(outputs.taken[slot], F.struct(*fields)).alias(slot)

    rows = outputs.frame.select(pick("other"), pick("mine")).collect()
    assert len([r for r in rows if r["other"] is not None]) == 2
    return [r["mine"].asDict() for r in rows if r["mine"] is not None]


def _run(spark: SparkSession, vitals, sql: str, roles: list[str], statistics: bool = False):
    path, codec = vitals
    struct = labelled_schema(spark, STREAM.ddl, len(STREAM.names), codec.width)
    frame = spark.read.schema(struct).parquet(str(path))
    if statistics:
        view = statistics_view(frame, STREAM, codec, roles)
    else:
        view = secured_view(frame, STREAM, codec, roles, keep_labels=True, salt="s")
    view.createOrReplaceTempView("Vitals")
    try:
        return [r.asDict() for r in spark.sql(sql).collect()]
    finally:
        spark.catalog.dropTempView("Vitals")


@pytest.mark.parametrize("sql", SQL)
def test_a_dropped_row_never_reaches_a_user_expression(spark, vitals, sql: str) -> None:
    with pytest.raises(PySparkException):  # the control: C reads row 2, and it fails
        _run(spark, vitals, sql, ["C"])
    rows = _run(spark, vitals, sql, ["ND"])
    assert all(r.get("pid") in (None, 1) for r in rows), rows
    if "count" in sql:
        assert rows == [{"n": 0}]
    else:
        assert [r["pid"] for r in rows] == [1]


@pytest.mark.parametrize("sql", [SQL[0], SQL[2]])
def test_nor_in_a_shared_networks_one_pass(spark, vitals, sql: str) -> None:
    """Branches computed side by side: the tuple test still comes before the query."""
    with pytest.raises(PySparkException):  # the control: C reads row 2, and it fails
        _fused(spark, vitals, sql, ["C"])
    assert [r["pid"] for r in _fused(spark, vitals, sql, ["ND"])] == [1]


def test_a_tuple_ingest_denied_is_hidden_by_its_labels(spark, vitals) -> None:
    """Row 3 did not pass; its all-zero reader words hide it from every view."""
    rows = _run(spark, vitals, "SELECT pid, rate FROM Vitals", ["C"])
    assert sorted(r["pid"] for r in rows) == [1, 2]
    [stats] = _run(spark, vitals, "SELECT count(*) AS n FROM Vitals", ["C"], statistics=True)
    assert stats["n"] == 2


@pytest.mark.parametrize("sql", [SQL[2]])
def test_nor_in_the_one_delivery_job_of_a_shared_network(spark, vitals, sql: str) -> None:
    """Every listening branch's items computed side by side in one job: an item runs
    only where its own branch takes the row, never on a row another branch took."""
    with pytest.raises(PySparkException):  # the control: C reads row 2, and it fails
        _together(spark, vitals, sql, ["C"])
    assert [r["pid"] for r in _together(spark, vitals, sql, ["ND"])] == [1]
