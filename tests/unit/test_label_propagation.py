"""Label propagation through selections, aggregates and unions (DESIGN.md section 1)."""

from __future__ import annotations

import pytest

from streamshield.lang.label_propagation import LabelsNotPropagated, propagate_labels

LABELS = ["_ss_r0_0", "_ss_d0_0", "_ss_src_0"]


def test_selection_keeps_labels_and_origin() -> None:
    out = propagate_labels("SELECT a FROM s WHERE a > 1", LABELS, "_ss_r")
    assert out == (
        "SELECT a, _ss_r0_0, _ss_d0_0, _ss_src_0, _ss_policy, _ss_channel, _ss_seq, _ss_tid "
        "FROM s WHERE a > 1"
    )


def test_aggregate_intersects_readers_and_unites_the_rest() -> None:
    out = propagate_labels("SELECT count(*) AS n FROM s", LABELS, "_ss_r")
    assert "BIT_AND(_ss_r0_0) AS _ss_r0_0" in out
    assert "BIT_OR(_ss_d0_0) AS _ss_d0_0" in out
    assert "BIT_OR(_ss_src_0) AS _ss_src_0" in out
    assert "_ss_seq" not in out  # an aggregate row has no single origin


def test_union_all_labels_every_branch_alike() -> None:
    out = propagate_labels("SELECT a FROM s UNION ALL SELECT b FROM t", LABELS, "_ss_r")
    left, right = out.split(" UNION ALL ")
    assert left.replace("a,", "x,").replace("FROM s", "") == right.replace("b,", "x,").replace(
        "FROM t", ""
    )


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT a FROM s UNION SELECT a FROM t",  # deduplication mixes tuples' labels
        "SELECT a FROM s UNION ALL SELECT count(*) FROM t",
        "SELECT s.a FROM s JOIN t ON s.a = t.a",
        "SELECT a, 0 AS _ss_r0_0 FROM s",  # a forged label column
    ],
)
def test_shapes_without_a_sound_label_are_refused(sql) -> None:
    with pytest.raises(LabelsNotPropagated):
        propagate_labels(sql, LABELS, "_ss_r")


def test_a_derived_union_is_labelled_inside_then_combined() -> None:
    sql = (
        "SELECT symbol, avg(price) AS p FROM "
        "(SELECT symbol, price FROM in1 UNION ALL SELECT symbol, price FROM in2) t "
        "GROUP BY symbol"
    )
    out = propagate_labels(sql, LABELS, "_ss_r")
    assert out.count("SELECT symbol, price, _ss_r0_0, _ss_d0_0, _ss_src_0, _ss_policy") == 2
    assert "BIT_OR(_ss_src_0) AS _ss_src_0 FROM (" in out


def test_a_selection_over_an_aggregate_has_no_origin() -> None:
    out = propagate_labels("SELECT n FROM (SELECT count(*) AS n FROM s) t", LABELS, "_ss_r")
    assert out.startswith("SELECT n, _ss_r0_0, _ss_d0_0, _ss_src_0 FROM")
    assert "_ss_seq" not in out


def test_subqueries_outside_from_are_refused() -> None:
    with pytest.raises(LabelsNotPropagated):
        propagate_labels("SELECT a FROM s WHERE a IN (SELECT b FROM t)", LABELS, "_ss_r")
