"""Which attributes a query's rows and columns depend on (pure, no JVM).

These dependencies are what delivery checks against each recipient's roles; one that
is missed is an attribute a recipient receives without her right to it.
"""

from __future__ import annotations

import re

import pytest
import sqlglot

from streamshield.lang.label_propagation import LabelsNotPropagated, propagate_labels
from streamshield.lang.recipient_labels import Slot, slot_of

ATTRS = ["id", "hr", "temp", "ts"]  # objects 1..4
SOURCES = {"v": ATTRS, "w": ["a", "b"]}
LABELS = ["_ss_r0_0", "_ss_d0_0", "_ss_src_0"]


def slots(sql: str) -> dict[str, str]:
    """Slot name -> the expression it is computed from, for one word."""
    out = propagate_labels(sql, LABELS, "_ss_r", ATTRS, SOURCES, 1)
    tree = sqlglot.parse_one(out, read="spark")
    select = tree if isinstance(tree, sqlglot.exp.Select) else tree.this
    return {
        p.alias: p.this.sql(dialect="spark")
        for p in select.expressions
        if isinstance(p, sqlglot.exp.Alias) and slot_of(p.alias)
    }


def objects(found: dict[str, str], prefix: str) -> set[int]:
    """The attribute objects whose readers fill the slots starting with ``prefix``."""
    return {
        int(m)
        for name, text in found.items()
        if name.startswith(prefix) and name.endswith("_r0")
        for m in re.findall(r"_ss_r(\d+)_0", text)
    }


def test_a_where_clause_makes_its_attributes_row_dependencies() -> None:
    found = slots("SELECT id FROM v WHERE temp > 1 AND hr < 2")
    assert objects(found, "_ss_row") == {2, 3}
    assert objects(found, "_ss_col0x") == {1}


def test_an_expression_depends_on_each_attribute_it_reads_separately() -> None:
    found = slots("SELECT hr + temp AS x, 1 AS one FROM v")
    assert objects(found, "_ss_col0x") == {2, 3}
    assert len([n for n in found if n.startswith("_ss_col0x") and n.endswith("_r0")]) == 2
    assert not any(n.startswith("_ss_col1x") for n in found), "a constant reads nothing"


def test_a_star_depends_on_every_attribute_in_order() -> None:
    found = slots("SELECT * FROM v")
    for i, obj in enumerate(range(1, 5)):
        assert found[f"_ss_col{i}x0_r0"] == f"`_ss_r{obj}_0`"


def test_aggregates_combine_slots_over_contributors_and_group_keys_are_row_deps() -> None:
    found = slots("SELECT id, count(*) AS n, max(temp) AS t FROM v GROUP BY id HAVING min(hr) > 0")
    assert objects(found, "_ss_row") == {1, 2}
    assert found["_ss_col2x0_r0"].upper() == "BIT_AND(`_SS_R3_0`)"
    assert found["_ss_col2x0_d0"].upper() == "BIT_OR(`_SS_D3_0`)"
    assert not any(n.startswith("_ss_col1x") for n in found), "count(*) reads no attribute"


def test_an_unknown_name_depends_on_everything() -> None:
    found = slots("SELECT hr AS x, x + 1 AS y FROM v")  # a lateral alias
    assert objects(found, "_ss_col1x") == {1, 2, 3, 4}


def test_union_branches_pad_to_one_layout_with_their_own_objects() -> None:
    out = propagate_labels(
        "SELECT hr FROM v WHERE ts > 1 UNION ALL SELECT b FROM w", LABELS, "_ss_r", (), SOURCES, 1
    )
    left, right = out.split(" UNION ALL ")
    assert "`_ss_r4_0` AS `_ss_row0_r0`" in left and "`_ss_r2_0` AS `_ss_col0x0_r0`" in left
    assert "AS `_ss_row0_r0`" in right and "`_ss_r2_0` AS `_ss_col0x0_r0`" in right
    # the right branch reads b (its object 2) and pads the row slot it does not need
    assert right.split(" AS `_ss_row0_r0`")[0].rsplit(",", 1)[-1].strip() == "-CAST(1 AS BIGINT)"


def test_a_derived_table_folds_every_dependency_into_the_row() -> None:
    out = propagate_labels(
        "SELECT x FROM (SELECT hr + 1 AS x FROM v WHERE temp > 2) t",
        LABELS,
        "_ss_r",
        (),
        SOURCES,
        1,
    )
    inner = out[out.index("(SELECT") :]
    assert "`_ss_r2_0` AS `_ss_row" in inner and "`_ss_r3_0` AS `_ss_row" in inner
    assert "_ss_col" not in out, "columns are covered by the row"
    assert out.startswith("SELECT x, ") and "_ss_row0_r0" in out.split("FROM")[0]


def test_an_input_that_is_not_a_known_view_is_refused() -> None:
    with pytest.raises(LabelsNotPropagated):
        propagate_labels("SELECT hr FROM elsewhere", LABELS, "_ss_r", (), SOURCES, 1)


@pytest.mark.parametrize(
    ("name", "slot"),
    [
        ("_ss_row0_r0", Slot(None, 0, "r", 0)),
        ("_ss_row12_d3", Slot(None, 12, "d", 3)),
        ("_ss_col2x1_r0", Slot(2, 1, "r", 0)),
        ("_ss_col2_r0", None),
        ("_ss_row1x2_r0", None),
        ("_ss_r0_0", None),
        ("hr", None),
    ],
)
def test_slot_names_parse_exactly(name: str, slot: Slot | None) -> None:
    assert slot_of(name) == slot
