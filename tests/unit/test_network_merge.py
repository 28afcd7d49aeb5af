"""Merging operator trees (CW Algorithm 2): the papers' networks, and properties that merging
never changes a query's result and never depends on the order of the queries."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamshield.network.evaluate import evaluate, evaluate_network
from streamshield.network.merge import Network, merge, normalise
from streamshield.network.operators import (
    Operator,
    Select,
    WindowSpec,
    project,
    select,
    union,
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
    MESSAGE_LOG,
    PRS_COMMON_PREFIX,
    PRS_CQ1,
    PRS_CQ2,
    PRS_Q2_ONLY,
    prs_streams,
)
from tests.unit.network_strategies import query_sets, stream_data


def test_fig5_merged_tree_of_q1_and_q2() -> None:
    """CW Fig. 5: one seq-win and one common select feed both queries; each keeps its
    residual select and its project timestamp."""
    network = merge({"Q1": CW_Q1, "Q2": CW_Q2})
    q1_out = project({"timestamp"}, CW_Q1_RESIDUAL)
    q2_out = project({"timestamp"}, CW_Q2_RESIDUAL)
    assert network.nodes == {CW_WINDOW, CW_COMMON_SELECT, CW_Q1_RESIDUAL, CW_Q2_RESIDUAL,
                             q1_out, q2_out}  # fmt: skip
    assert network.roots == {"Q1": q1_out, "Q2": q2_out}
    assert network.edges == {
        ("MessageLog", CW_WINDOW),
        (CW_WINDOW, CW_COMMON_SELECT),
        (CW_COMMON_SELECT, CW_Q1_RESIDUAL),
        (CW_COMMON_SELECT, CW_Q2_RESIDUAL),
        (CW_Q1_RESIDUAL, q1_out),
        (CW_Q2_RESIDUAL, q2_out),
    }
    assert network.common_prefix == {CW_WINDOW, CW_COMMON_SELECT}
    assert network.usage[q1_out] == {"Q1"}
    result = evaluate_network(network, {"MessageLog": MESSAGE_LOG})
    assert result.outputs == {"Q1": [{"timestamp": 1}, {"timestamp": 5}], "Q2": [{"timestamp": 2}]}
    assert set(result.computed.values()) == {1}  # the window and common select ran once


def test_algorithm2_on_the_fig4_trees_is_the_set_union_with_one_node_per_class() -> None:
    """CW Algorithm 2 applied literally to Fig. 4's (already decomposed) trees."""
    q1 = Network.of_tree("Q1", project({"timestamp"}, CW_Q1_RESIDUAL))
    q2 = Network.of_tree("Q2", project({"timestamp"}, CW_Q2_RESIDUAL))
    merged = q1.merge(q2)
    assert len(q1.nodes) == len(q2.nodes) == 4
    assert len(merged.nodes) == 6  # the window and the common select once
    assert merged == q2.merge(q1)
    with pytest.raises(ValueError, match="not unique"):
        q1.merge(q1)


def test_prs_fig2_common_prefix_of_cq1_and_cq2() -> None:
    """PrS Fig. 2 (queries of Fig. 1, reconstructed in tests/unit/network_papers.py): ten
    operators; the highlighted common prefix is the two timestamp selects and the join."""
    network = merge({"Q1": PRS_CQ1, "Q2": PRS_CQ2})
    assert len(network.nodes) == 10
    assert network.common_prefix == PRS_COMMON_PREFIX
    assert {n for n, qs in network.usage.items() if qs == {"Q2"}} == PRS_Q2_ONLY
    assert network.streams == {"HeartRate", "BloodPressure", "OxygenSaturation"}
    outputs = evaluate_network(network, prs_streams()).outputs
    assert outputs["Q2"] == [{"hr.patient": "p1", "count(*)": 2}]
    assert outputs["Q1"] == evaluate(PRS_CQ1, prs_streams())


def test_queries_that_share_nothing_are_separate_components() -> None:
    a = select(where("a = 1"), "S")
    b = project({"x"}, "T")
    c = project({"y"}, select(where("a = 1 AND b = 2"), "S"))
    network = merge({"A": a, "B": b, "C": c})
    assert network.components() == [frozenset({"A", "C"}), frozenset({"B"})]


def test_stacked_selects_and_projects_are_normalised_before_merging() -> None:
    selects = select(where("a = 1"), select(where("b = 2"), "S"))
    stacked = project({"a"}, project({"a", "b"}, selects))
    assert normalise(stacked) == project({"a"}, select(where("a = 1 AND b = 2"), "S"))
    network = merge({"A": stacked, "B": project({"a"}, select(where("b = 2 AND a = 1"), "S"))})
    assert network.roots["A"] == network.roots["B"]
    assert len(network.nodes) == 2


def _outputs_separately(queries: dict[str, Operator], data) -> dict:
    return {q: evaluate(root, data) for q, root in queries.items()}


@settings(max_examples=150)
@given(query_sets(), stream_data())
def test_merging_never_changes_any_querys_result(queries, data) -> None:
    network = merge(queries)
    result = evaluate_network(network, data)
    assert result.outputs == _outputs_separately(queries, data)
    # Each node of the network is computed once, however many queries read it.
    assert set(result.computed.values()) <= {1}
    assert set(network.roots) == set(queries)


@settings(max_examples=100)
@given(query_sets(min_size=2, max_size=4), st.randoms(use_true_random=False))
def test_merging_is_independent_of_the_order_of_the_queries(queries, rnd) -> None:
    """Same network for any permutation, both of the registration order and of the names
    (names decide the fold order of Algorithm 2)."""
    network = merge(queries)
    items = list(queries.items())
    rnd.shuffle(items)
    assert merge(dict(items)).canonical == network.canonical
    names = list(queries)
    renamed = dict(zip(names, rnd.sample(names, len(names)), strict=True))
    other = merge({renamed[q]: root for q, root in queries.items()})
    assert other.nodes == network.nodes
    assert {renamed[q]: root for q, root in network.roots.items()} == other.roots


@settings(max_examples=100)
@given(query_sets())
def test_a_merged_network_is_a_fixpoint_of_merging(queries) -> None:
    """Def. 8 has been applied exhaustively: what two selects over one queue have in common
    is computed once, by a node below both; and merging the result again changes nothing."""
    network = merge(queries)
    selects = [n for n in network.nodes if isinstance(n, Select)]
    for a, b in itertools.combinations(selects, 2):
        if a.inputs == b.inputs:
            assert not a.predicate.overlaps(b.predicate), (a, b)
    assert merge(network.roots).canonical == network.canonical


def test_sharing_a_window_of_the_same_stream_but_another_size_is_not_sharing() -> None:
    a = select(where("a = 1"), window(WindowSpec.rows(3), "S"))
    b = select(where("a = 1"), window(WindowSpec.rows(4), "S"))
    network = merge({"A": a, "B": b})
    assert network.common_prefix == frozenset()
    assert len(network.components()) == 2


def test_decomposing_a_select_below_a_union_does_not_reorder_the_union() -> None:
    """Found by the merge property: decomposition renames a union's input, and a union that
    concatenated in canonical input order then fed a different last row to ROWS 1."""
    both = select(where("a = 1 AND b >= 1"), "S")
    query = window(WindowSpec.rows(1), union(both, select(where("a = 1"), "S")))
    rows = {"S": [{"a": 1, "b": 1, "ts": 0}, {"a": 1, "b": 0, "ts": 0}]}
    network = merge({"Q": query})
    assert network.roots["Q"] != query  # the union's input was decomposed
    assert evaluate_network(network, rows).outputs["Q"] == evaluate(query, rows)
