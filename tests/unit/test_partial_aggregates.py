"""What folds batch by batch, and into what (lang/partial_aggregates.py, pure).

The Spark side (states merged over batches equal the aggregate over all rows) is
tests/spark/test_aggregate_branches.py. Here: the partials, merges and final expressions
of the shapes the rewrite rules produce, a reference fold over Python lists for the
merge rule, and the refusals that keep an aggregate the fold cannot merge exactly (or
does not know) on a query of its own.
"""

from __future__ import annotations

import sqlglot
from hypothesis import given
from hypothesis import strategies as st
from sqlglot import exp

from streamshield.lang.partial_aggregates import Fold, PartialParts, partial_parts
from streamshield.lang.partial_aggregates import fold_of as fold_of_tree


def fold_of(sql: str) -> Fold | None:
    """The fold of a secured query's text (the engine folds its tree)."""
    return fold_of_tree(sqlglot.parse_one(sql, read="spark"))


def _fold(sql: str) -> Fold:
    fold = fold_of(sql)
    assert fold is not None, sql
    return fold


def test_grouped_counts_sums_and_averages_fold_into_partials() -> None:
    fold = _fold(
        "SELECT ward, count(*) AS n, avg(hr) AS a, max(hr) + 1 AS hi FROM v "
        "WHERE hr > 60 GROUP BY ward"
    )
    assert fold.keys == ("_ss_k0",)
    assert fold.partial == (
        "SELECT ward AS _ss_k0, COUNT(*) AS _ss_p0, SUM(hr) AS _ss_p1, COUNT(hr) AS _ss_p2, "
        "MAX(hr) AS _ss_p3 FROM v WHERE hr > 60 GROUP BY ward"
    )
    assert fold.merges == (
        ("_ss_p0", "sum"),
        ("_ss_p1", "sum"),
        ("_ss_p2", "sum"),
        ("_ss_p3", "max"),
    )
    assert fold.final == ("_ss_k0", "_ss_p0", "(_ss_p1 / NULLIF(_ss_p2, 0))", "_ss_p3 + 1")
    assert fold.having is None


def test_a_global_aggregate_has_no_keys() -> None:
    fold = _fold("SELECT count(*) FROM v")
    assert fold.keys == () and fold.partial == "SELECT COUNT(*) AS _ss_p0 FROM v"


def test_equal_calls_are_one_partial_and_having_reads_outputs_by_alias() -> None:
    fold = _fold("SELECT ward, count(*) AS n FROM v GROUP BY ward HAVING n > 2 AND count(*) < 9")
    assert fold.merges == (("_ss_p0", "sum"),)
    assert fold.having == "(_ss_p0) > 2 AND _ss_p0 < 9"
    final = fold.final_sql("state", ("ward", "n"))
    assert (
        final
        == "SELECT _ss_k0 AS `ward`, _ss_p0 AS `n` FROM state WHERE (_ss_p0) > 2 AND _ss_p0 < 9"
    )


def test_expressions_over_group_keys_and_labels_like_the_rewrites_fold() -> None:
    """The shapes lang/statistics_rewrite.py and label_propagation.py add: aggregates
    inside CASE WHEN over counts, bit_and/bit_or of label words, count_if releases."""
    fold = _fold(
        "SELECT upper(ward) AS w, BIT_AND(_ss_r0_0) AS _ss_r0_0, "
        "CASE WHEN COUNT(*) >= 3 THEN BIT_AND(_ss_r0_1 | _ss_r0_0) ELSE 0 END AS _ss_r0_1, "
        "BIT_OR(_ss_d0_0) AS _ss_d0_0 FROM v GROUP BY ward "
        "HAVING COUNT_IF(NOT _ss_f0) = 0 OR COUNT_IF(NOT _ss_f0) >= 3"
    )
    merges = dict(fold.merges)
    assert sorted(merges.values()) == ["bit_and", "bit_and", "bit_or", "sum", "sum"]
    assert fold.final[0] == "UPPER(_ss_k0)"
    assert fold.having is not None and "COUNT" not in fold.having.upper()


def test_aggregates_that_do_not_merge_exactly_are_not_folded() -> None:
    for sql in (
        "SELECT count(DISTINCT ward) FROM v",
        "SELECT ward, first(hr) FROM v GROUP BY ward",
        "SELECT ward, stddev(hr) FROM v GROUP BY ward",
        "SELECT ward, mean(hr) FROM v GROUP BY ward",  # unknown to the fold: reads hr
        "SELECT ward, count(hr) FILTER (WHERE hr > 1) FROM v GROUP BY ward",
        "SELECT ward, count(*) FROM v GROUP BY ward ORDER BY ward",
        "SELECT ward, count(*) FROM v GROUP BY 1",
        "SELECT ward, count(*) FROM v GROUP BY ROLLUP (ward)",
        "SELECT ward, sum(max(hr)) FROM v GROUP BY ward",
        "SELECT ward, count(*) FROM (SELECT * FROM v) GROUP BY ward",
        "SELECT ward, hr FROM v",  # not an aggregate
        "SELECT ward, hr, count(*) FROM v GROUP BY ward",  # hr is not kept by the state
        "SELECT",
    ):
        assert fold_of(sql) is None, sql


def test_the_final_select_reads_state_columns_only() -> None:
    fold = _fold("SELECT ward, count(*) * 2 AS twice, min(hr) FROM v GROUP BY ward")
    state = {*fold.keys, *(c for c, _ in fold.merges)}
    for text in fold.final:
        columns = {c.name for c in sqlglot.parse_one(text, read="spark").find_all(exp.Column)}
        assert columns <= state, text


_MERGE = {"sum": sum, "min": min, "max": max}
_PARTIAL = {
    "COUNT(*)": len,
    "SUM(hr)": sum,
    "COUNT(hr)": len,
    "MIN(hr)": min,
    "MAX(hr)": max,
}


@given(st.lists(st.lists(st.integers(-50, 50), min_size=1, max_size=6), min_size=1, max_size=5))
def test_merging_the_partials_of_any_split_gives_the_aggregate_of_all(batches) -> None:
    """The merge rule itself, on one group: each batch's partials, merged with each
    merge function, equal each aggregate over every row (avg as sum over count)."""
    fold = _fold("SELECT count(*), sum(hr), avg(hr), min(hr), max(hr) FROM v")
    texts = {c: t for t, c in _partials(fold)}
    merged = {
        column: _MERGE[how](_PARTIAL[texts[column]](b) for b in batches)
        for column, how in fold.merges
    }
    rows = [v for b in batches for v in b]
    by_name = {texts[c]: v for c, v in merged.items()}
    assert by_name["COUNT(*)"] == len(rows) and by_name["SUM(hr)"] == sum(rows)
    assert by_name["MIN(hr)"] == min(rows) and by_name["MAX(hr)"] == max(rows)
    assert by_name["SUM(hr)"] / by_name["COUNT(hr)"] == sum(rows) / len(rows)


def _partials(fold: Fold) -> list[tuple[str, str]]:
    select = sqlglot.parse_one(fold.partial, read="spark")
    assert isinstance(select, exp.Select)
    return [(e.this.sql(dialect="spark"), e.alias) for e in select.expressions]


def test_a_partial_query_is_taken_apart_into_its_sql_parts() -> None:
    """An engine builds these once as column expressions (engine/sharing/aggregate_pass.py)."""
    fold = fold_of(
        "SELECT ward, floor(hr / 10), count(*) AS n, avg(hr) FROM `ss_x_V` AS V "
        "WHERE V.hr > 1 GROUP BY ward, floor(hr / 10) HAVING n > 2"
    )
    assert fold is not None
    assert partial_parts(fold) == PartialParts(
        "V",
        "V.hr > 1",
        (("_ss_k0", "ward"), ("_ss_k1", "FLOOR(hr / 10)")),
        (("_ss_p0", "COUNT(*)"), ("_ss_p1", "SUM(hr)"), ("_ss_p2", "COUNT(hr)")),
    )
    only = fold_of("SELECT count(*) AS n FROM V")
    assert only is not None
    assert partial_parts(only) == PartialParts("V", None, (), (("_ss_p0", "COUNT(*)"),))
