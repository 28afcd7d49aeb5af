"""Which output columns of a selection can be masked, and when (pure: sqlglot only)."""

from __future__ import annotations

import sqlglot

from streamshield.lang.label_propagation import MASKED_COLUMN, propagate_labels

ATTRS = ("id", "hr", "name")


def _masked(sql: str) -> str:
    out = propagate_labels(sql, ["_ss_r0_0"], "_ss_r", ATTRS)
    tree = sqlglot.parse_one(out, read="spark")
    [masked] = [e for e in tree.expressions if e.alias_or_name == MASKED_COLUMN]
    return masked.sql(dialect="spark")


def test_attribute_columns_follow_their_flag_under_any_name() -> None:
    text = _masked("SELECT v.hr, name AS who FROM s AS v")
    assert "IF(`_ss_hide_hr`, 'hr', NULL)" in text
    assert "IF(`_ss_hide_name`, 'who', NULL)" in text


def test_expressions_need_a_null_value_and_a_hidden_input() -> None:
    text = _masked("SELECT hr * 2 AS twice, coalesce(hr, id) AS c, upper('x') AS k FROM s")
    assert "IF(((hr * 2) IS NULL AND (`_ss_hide_hr`)), 'twice', NULL)" in text
    assert "`_ss_hide_hr` OR `_ss_hide_id`" in text  # both inputs of c count
    assert "'k'" not in text  # reads no attribute: never masked


def test_a_star_lists_every_attribute_and_quotes_are_escaped() -> None:
    text = _masked("SELECT * FROM s")
    assert all(f"'{a}'" in text for a in ATTRS)
    odd = _masked("SELECT hr AS `it's` FROM s")
    assert "'it\\'s'" in odd


def test_aggregates_and_no_attributes_add_nothing() -> None:
    assert MASKED_COLUMN not in propagate_labels("SELECT count(hr) AS n FROM s", [], "_ss_r", ATTRS)
    assert MASKED_COLUMN not in propagate_labels("SELECT hr FROM s", ["_ss_r0_0"], "_ss_r")
