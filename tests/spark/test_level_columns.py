"""The conformance table (tests/conformance/levels.json) against the Spark encoding.

All rows of the table go into one DataFrame per shape, so the whole table costs two
Spark jobs: a join of the pairs' two sides (dominance both ways by a constant level,
LUB by ``bitwiseOR``) and one aggregate over every pair and group (LUB by ``bit_or``).
"""

from __future__ import annotations

import pytest
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from streamshield.engine.views import level_columns
from streamshield.policy.lattice import Lattice, Level
from tests.conformance.levels import cases, lattice

pytestmark = pytest.mark.spark

PAIRS = cases("a", "b")
GROUPS = cases("group")
WIDTH = max(lattice(c["lattice"]).width for c in PAIRS + GROUPS)
NULL_ID = -1  # an extra row whose level has a NULL word


def _schema() -> StructType:
    words = [StructField(n, LongType()) for n in level_columns.level_names(WIDTH)]
    return StructType([StructField("id", LongType(), False), *words])


def _padded(lat: Lattice, level: Level) -> list[int]:
    words = list(lat.encode(level))
    return words + [0] * (WIDTH - len(words))


def _per_case(ids: Column, rules: dict[int, Column]) -> Column:
    """One expression for the whole table: the case's own rule, chosen by id."""
    first_id, first = next(iter(rules.items()))
    chosen = F.when(ids == first_id, first)
    for case_id, rule in list(rules.items())[1:]:
        chosen = chosen.when(ids == case_id, rule)
    return chosen


def _dominated(columns: list[Column], lat: Lattice, level: Level) -> Column:
    return level_columns.dominated_words(columns[: lat.width], lat.encode(level))


def test_pairs_dominance_both_ways_and_lub_through_a_join(spark) -> None:
    left_rows, right_rows = [], []
    for c in PAIRS:
        lat = lattice(c["lattice"])
        left_rows.append((c["id"], *_padded(lat, lat.parse(c["a"]))))
        right_rows.append((c["id"], *_padded(lat, lat.parse(c["b"]))))
    left_rows.append((NULL_ID, None, *[0] * (WIDTH - 1)))
    right_rows.append((NULL_ID, *[0] * WIDTH))
    left = spark.createDataFrame(left_rows, _schema()).alias("l")
    right = spark.createDataFrame(right_rows, _schema()).alias("r")
    names = level_columns.level_names(WIDTH)
    a = [F.col(f"l.{n}") for n in names]
    b = [F.col(f"r.{n}") for n in names]
    lub = level_columns.lub_join(a, b)
    ids = F.col("l.id")
    cloud = lattice("cloud")
    rules_ab, rules_ba, lub_le_a, lub_le_b, lub_le_lub = {}, {}, {}, {}, {}
    for c in PAIRS:
        lat = lattice(c["lattice"])
        la, lb, ll = lat.parse(c["a"]), lat.parse(c["b"]), lat.parse(c["lub"])
        rules_ab[c["id"]] = _dominated(a, lat, lb)
        rules_ba[c["id"]] = _dominated(b, lat, la)
        # the OR is not canonical (two companies are not the whole class): the test
        # must still place it exactly where its LUB is
        lub_le_a[c["id"]] = _dominated(lub, lat, la)
        lub_le_b[c["id"]] = _dominated(lub, lat, lb)
        lub_le_lub[c["id"]] = _dominated(lub, lat, ll)
    rules_ab[NULL_ID] = _dominated(a, cloud, cloud.trusted)
    frame = left.join(right, F.col("l.id") == F.col("r.id")).select(
        ids.alias("id"),
        _per_case(ids, rules_ab).alias("ab"),
        _per_case(ids, rules_ba).alias("ba"),
        _per_case(ids, lub_le_a).alias("lub_le_a"),
        _per_case(ids, lub_le_b).alias("lub_le_b"),
        _per_case(ids, lub_le_lub).alias("lub_le_lub"),
        *lub,
    )
    plan = frame._jdf.queryExecution().executedPlan().toString()
    assert "Python" not in plan and "Arrow" not in plan  # native expressions only
    rows = {r["id"]: r for r in frame.collect()}
    assert set(rows) == {c["id"] for c in PAIRS} | {NULL_ID}
    for c in PAIRS:
        lat, row = lattice(c["lattice"]), rows[c["id"]]
        assert row["ab"] is c["a_dominated_by_b"], c
        assert row["ba"] is c["b_dominated_by_a"], c
        assert row["lub_le_a"] is c["b_dominated_by_a"], c
        assert row["lub_le_b"] is c["a_dominated_by_b"], c
        assert row["lub_le_lub"] is True, c
        words = tuple(row[n] for n in names)
        assert words[lat.width :] == (0,) * (WIDTH - lat.width)
        assert lat.decode(words[: lat.width]) == lat.parse(c["lub"]), c
    null = rows[NULL_ID]
    assert null["ab"] is False  # NULL is below nothing, not even trusted
    assert null[names[0]] is None  # and its LUB stays NULL


def test_groups_and_pairs_lub_through_an_aggregate(spark) -> None:
    groups = [(c, [c["a"], c["b"]]) for c in PAIRS] + [(c, c["group"]) for c in GROUPS]
    rows = []
    for c, members in groups:
        lat = lattice(c["lattice"])
        rows += [(c["id"], *_padded(lat, lat.parse(t))) for t in members]
    rows += [(NULL_ID, *[0] * WIDTH), (NULL_ID, None, *[0] * (WIDTH - 1))]
    wide = lattice("wide")  # the widest: every case's words, padded, are words of it
    assert wide.width == WIDTH
    frame = (
        spark.createDataFrame(rows, _schema()).groupBy("id").agg(*level_columns.lub_aggregate(wide))
    )
    names = level_columns.level_names(WIDTH)
    out = {r["id"]: tuple(r[n] for n in names) for r in frame.collect()}
    assert set(out) == {c["id"] for c, _ in groups} | {NULL_ID}
    for c, _ in groups:
        lat = lattice(c["lattice"])
        words = out[c["id"]]
        assert words[lat.width :] == (0,) * (WIDTH - lat.width)
        assert lat.decode(words[: lat.width]) == lat.parse(c["lub"]), c
    # bit_or alone would skip the NULL and report the other row's level, [⊥, ⊥]; the
    # NULL counts as every bit set in every word, as the pure lub_group says, and that
    # is above every level, trusted included (word 0 of "wide" is all companies: the
    # mark denies through word 2's spare bits)
    assert out[NULL_ID] == wide.lub_group([(0,) * WIDTH, (None, 0, 0)]) == wide.unknown
    assert not wide.words_dominated(out[NULL_ID], wide.trusted)
    plan = frame._jdf.queryExecution().executedPlan().toString()
    assert "count(" not in plan  # one bit_or per word, no NULL guard beside it


def test_an_aggregate_keeps_the_null_guard_where_no_bit_is_spare(spark) -> None:
    """64 companies in one word: every bit set would be trusted, so a NULL contributor
    makes the group's level NULL (read by no level), and a complete group is its LUB."""
    full = Lattice.of({"X": [f"x{i}" for i in range(32)], "Y": [f"y{i}" for i in range(32)]})
    top = full.encode(full.trusted)[0]
    rows = [(1, top), (1, None), (2, top), (2, 0)]
    frame = spark.createDataFrame(rows, "id bigint, _ss_lvl_0 bigint")
    out = dict(frame.groupBy("id").agg(*level_columns.lub_aggregate(full)).collect())
    assert out == {1: None, 2: -1}


def test_dominated_by_checks_the_frames_level_columns(spark) -> None:
    wide = lattice("wide")
    frame = level_columns.with_level(spark.range(1), wide.encode(wide.parse("[w63, a0, z59]")))
    assert level_columns.level_columns(frame.columns) == level_columns.level_names(3)
    low, high = wide.parse("[w63, ⊥, ⊥]"), wide.parse("[T, a0, T]")
    with pytest.raises(ValueError, match="expected level columns"):
        level_columns.dominated_by(wide, high, ["id", "_ss_lvl_0", "_ss_lvl_1"])
    with pytest.raises(ValueError, match="words"):
        level_columns.lub_join([F.col("a")], [F.col("b"), F.col("c")])
    kept = frame.select(
        level_columns.dominated_by(wide, high, frame.columns).alias("high"),
        level_columns.dominated_by(wide, low, frame.columns).alias("low"),
        level_columns.dominated_by(wide, wide.trusted).alias("trusted"),
        level_columns.dominated_by(wide, wide.public).alias("public"),
    ).first()
    assert kept.asDict() == {"high": True, "low": False, "trusted": True, "public": False}
