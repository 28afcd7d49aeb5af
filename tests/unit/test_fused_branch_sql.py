"""How a branch's secured SQL is split for the one pass (engine/sharing/fused_branches.py): its
WHERE goes into the pass (over its visibility's staged columns), its SELECT items are
rebuilt later over its view's columns. No JVM: sqlglot only."""

from __future__ import annotations

import pytest
import sqlglot

from streamshield.engine.sharing.fused_branches import (
    COMMON,
    NotFused,
    _plain_select,
    _tag,
    bare_column,
    suffixed,
)
from streamshield.engine.views.secured_view import SecuredProjection

VIEW = {
    c.lower(): c
    for c in (
        "_ss_channel",
        "_ss_seq",
        "_ss_tid",
        "patient_id",
        "beats_per_min",
        "ts",
        "_ss_r0_0",
        "_ss_r1_0",
        "_ss_hide_patient_id",
        "_ss_hide_beats_per_min",
    )
}
SECURED = (
    "SELECT patient_id, beats_per_min * 2 AS b2, _ss_r0_0, "
    "FILTER(ARRAY(IF(`_ss_hide_patient_id`, 'patient_id', NULL), "
    "IF(((beats_per_min * 2) IS NULL AND (`_ss_hide_beats_per_min`)), 'b2', NULL)), "
    "x -> NOT x IS NULL) AS _ss_masked, `_ss_r1_0` AS `_ss_row0_r0` "
    "FROM `vv` AS HeartRate WHERE ts > 0 AND patient_id >= 104"
)


def test_the_where_reads_staged_columns_and_the_items_the_view() -> None:
    items, condition, read, where_reads = _plain_select(
        sqlglot.parse_one(SECURED, read="spark"), VIEW, "vT"
    )
    assert condition == "`ts__vT` > 0 AND `patient_id__vT` >= 104"
    assert where_reads == ["ts", "patient_id"]
    assert [name for name, _ in items] == [
        "patient_id",
        "b2",
        "_ss_r0_0",
        "_ss_masked",
        "_ss_row0_r0",
    ]
    assert dict(items)["b2"] == "`beats_per_min` * 2"
    assert "ts" not in read, "a column only the WHERE reads is not rebuilt"
    assert {"patient_id", "beats_per_min", "_ss_hide_patient_id", "_ss_r1_0"} <= set(read)


def test_a_star_is_the_views_columns_in_order() -> None:
    items, condition, read, _ = _plain_select(
        sqlglot.parse_one("SELECT * FROM v", read="spark"), VIEW, "t"
    )
    assert [n for n, _ in items] == list(VIEW.values()) and condition is None
    assert read == list(VIEW.values())


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT patient_id, uuid() AS u FROM v",
        "SELECT patient_id, rand() * 2 AS r FROM v",
        "SELECT patient_id, current_timestamp() AS now FROM v",
        "SELECT patient_id FROM v GROUP BY patient_id",
        "SELECT patient_id FROM v WHERE ts IN (SELECT ts FROM v)",
        "SELECT nope FROM v",
        "SELECT patient_id, patient_id FROM v",
    ],
)
def test_what_is_not_a_plain_selection_of_row_values_runs_its_own_plan(sql: str) -> None:
    with pytest.raises(NotFused):
        _plain_select(sqlglot.parse_one(sql, read="spark"), VIEW, "t")


def test_equal_visibilities_share_a_tag_and_others_do_not() -> None:
    def projection(visibility: tuple | None) -> SecuredProjection:
        return SecuredProjection(None, (), visibility=visibility)  # type: ignore[arg-type]

    a, b = projection(((1, 0), None, None)), projection(((1, 0), None, None))
    assert _tag(a, "s1") == _tag(b, "s2") != _tag(projection(((2, 0), None, None)), "s3")
    assert _tag(projection(((1, 0), (1, 0), None)), "s4") != _tag(a, "s1"), "a grant view"
    assert _tag(projection(((1, 0), None, (3,))), "s5") != _tag(a, "s1"), "a level"
    assert _tag(projection(None), "s6") == "s6", "unknown visibility: its own"


def test_items_placed_beside_other_branches_read_only_their_own_view_columns() -> None:
    """One delivery job for every listening branch (FusedPass.outputs): a bare view
    column is placed as it stands (a shared one where the pass stores it once), any
    other item over its own branch's view columns only (renamed with the branch's
    suffix; a lambda's variable is not one), which are then the only ones added."""
    items, _, read, _ = _plain_select(sqlglot.parse_one(SECURED, read="spark"), VIEW, "vT")
    kinds = {name: ("masked", name) for name in read}
    kinds["_ss_r0_0"] = (COMMON, "_ss_common__ss_r0_0")
    placed = {name: bare_column(sql, kinds) for name, sql in items}
    assert placed["_ss_r0_0"] == "_ss_r0_0" and placed["patient_id"] == "patient_id"
    assert placed["b2"] is None and placed["_ss_masked"] is None
    assert suffixed(dict(items)["b2"], kinds, "__o3") == (
        "`beats_per_min__o3` * 2",
        ["beats_per_min"],
    )
    masked, reads = suffixed(dict(items)["_ss_masked"], kinds, "__o3")
    assert "_ss_hide_patient_id" in reads
    assert "`_ss_hide_patient_id__o3`" in masked and "x -> NOT x IS NULL" in masked
    assert "`patient_id`" not in masked and "`_ss_hide_patient_id`" not in masked
    with pytest.raises(NotFused):
        suffixed("`ts` + 1", kinds, "__o3")  # not a column its items read
