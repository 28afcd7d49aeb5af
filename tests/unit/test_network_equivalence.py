"""Defs. 6-9 of the Chinese-Wall paper on its own example (Figs. 3 and 4)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamshield.network.equivalence import (
    decompose,
    equivalent,
    overlapping,
    share_projects,
    share_selects,
    trees_overlap,
)
from streamshield.network.evaluate import evaluate
from streamshield.network.operators import (
    Aggregation,
    Select,
    WindowSpec,
    aggregate,
    project,
    select,
    window,
)
from streamshield.network.predicates import parse_conjunction as where
from tests.unit.network_papers import (
    CW_COMMON_SELECT,
    CW_Q1,
    CW_Q1_RESIDUAL,
    CW_Q2,
    CW_Q2_RESIDUAL,
    CW_WINDOW,
)
from tests.unit.network_strategies import predicates, stream_data


def test_fig3_seq_win_nodes_are_equivalent_and_selects_are_not() -> None:
    """CW Fig. 3: "the seq-win operator nodes are equivalent in the two given operator trees"
    and "the select nodes in the two trees are not equivalent" (section 5)."""
    (q1_select,) = CW_Q1.children
    (q2_select,) = CW_Q2.children
    assert equivalent(q1_select.children[0], q2_select.children[0])
    assert not equivalent(q1_select, q2_select)
    assert not equivalent(CW_Q1, CW_Q2)  # same label, different input queues


def test_fig3_selects_overlap_and_projects_do_not() -> None:
    """CW Def. 7 on Fig. 3: the selects share msgType = send and receiver = CompanyB; the
    projects have the same attributes but read different queues."""
    (q1_select,) = CW_Q1.children
    (q2_select,) = CW_Q2.children
    assert overlapping(q1_select, q2_select)
    assert not overlapping(CW_Q1, CW_Q2)


def test_fig4_overlapping_selects_decompose_into_the_common_select_and_residuals() -> None:
    """CW Def. 8 and Fig. 4: select(msgType=send, receiver=CompanyB) on the window, then
    select outcome=success (Q1) or outcome=failure (Q2) on it."""
    (q1_select,) = CW_Q1.children
    (q2_select,) = CW_Q2.children
    d1, d2 = decompose(q1_select, q2_select), decompose(q2_select, q1_select)
    assert d1.common == d2.common == CW_COMMON_SELECT
    assert d1.residual == CW_Q1_RESIDUAL
    assert d2.residual == CW_Q2_RESIDUAL


def test_def8_for_projects_keeps_the_union_and_then_each_own_attributes() -> None:
    a, b = project({"x", "y"}, "S"), project({"y", "z"}, "S")
    d = decompose(a, b)
    assert d.common == project({"x", "y", "z"}, "S")
    assert d.residual == project({"x", "y"}, d.common)
    # A project that already keeps the union needs no residual (an identity operator).
    assert decompose(project({"x", "y", "z"}, "S"), b).residual is None


def test_a_select_contained_in_another_reads_the_common_node_directly() -> None:
    narrow, wide = select(where("a = 1"), "S"), select(where("a = 1 AND b = 2"), "S")
    assert decompose(narrow, wide).residual is None
    assert decompose(narrow, wide).output == narrow
    assert decompose(wide, narrow).residual == select(where("b = 2"), narrow)


def test_blocking_or_unrelated_nodes_are_not_decomposed() -> None:
    """Def. 7 admits non-blocking operators over the same input queue only."""
    with pytest.raises(ValueError, match="overlapping"):
        decompose(select(where("a = 1"), "S"), select(where("a = 1 AND b = 2"), "T"))
    with pytest.raises(ValueError, match="overlapping"):
        decompose(select(where("a = 1"), "S"), select(where("b = 2"), "S"))
    windows = (window(WindowSpec.rows(3), "S"), window(WindowSpec.rows(4), "S"))
    assert not overlapping(*windows)
    by_sender = aggregate(Aggregation.COUNT, "*", {"sender"}, CW_WINDOW)
    by_both = aggregate(Aggregation.COUNT, "*", {"sender", "receiver"}, CW_WINDOW)
    assert not overlapping(by_sender, by_both)


def test_def9_trees_overlap_when_they_differ_and_share_a_node() -> None:
    """CW Def. 9: Fig. 3's trees overlap (the seq-win nodes are equivalent)."""
    assert trees_overlap(CW_Q1, CW_Q2)
    assert not trees_overlap(CW_Q1, CW_Q1)  # equivalent trees do not "overlap"
    # Reading the same stream is not sharing a node: streams are inputs, not operators.
    assert not trees_overlap(select(where("a = 1"), "S"), select(where("b = 1"), "S"))
    assert not trees_overlap(CW_Q1, project({"timestamp"}, window(WindowSpec.rows(1), "X")))


def test_three_overlapping_selects_share_the_most_used_conjuncts_first() -> None:
    a = select(where("x = 1 AND y = 1 AND z = 1"), "S")
    b = select(where("x = 1 AND y = 1"), "S")
    c = select(where("x = 1 AND w = 1"), "S")
    shared = share_selects([a, b, c])
    x = select(where("x = 1"), "S")
    xy = select(where("y = 1"), x)
    assert shared[b] == xy
    assert shared[a] == select(where("z = 1"), xy)
    assert shared[c] == select(where("w = 1"), x)


@given(st.lists(predicates, min_size=1, max_size=5, unique=True), stream_data())
def test_shared_selects_keep_every_result_for_any_order(preds, data) -> None:
    selects = [select(p, "S1") for p in preds]
    first = share_selects(selects)
    for perm in itertools.islice(itertools.permutations(selects), 6):
        assert share_selects(perm) == first
    for s in selects:
        assert evaluate(first[s], data) == evaluate(s, data)
        # every replacement is a chain of selects down to the same input
        node = first[s]
        while node != s.inputs[0]:
            assert isinstance(node, Select)
            node = node.inputs[0]


def test_share_projects_gives_overlapping_projects_one_common_node() -> None:
    a, b, c = project({"x"}, "S"), project({"x", "y"}, "S"), project({"z"}, "S")
    shared = share_projects([a, b, c])
    assert shared[a] == project({"x"}, project({"x", "y"}, "S"))
    assert shared[b] == project({"x", "y"}, "S")
    assert c not in shared  # disjoint from the others: nothing to share
