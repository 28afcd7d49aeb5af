"""Which windowed queries share a window node (network/window_sharing.py), and a model
check of the claim behind it: one RANGE node, cut per branch at its own clock, gives
every branch its own window; a ROWS window of everyone's tuples would not."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamshield.lang.windows import StreamPosition, WindowKind, WindowSpec, latest_rows
from streamshield.network.operators import select
from streamshield.network.predicates import Conjunction
from streamshield.network.predicates import parse_conjunction as where
from streamshield.network.switch_state import AccessChange, SwitchState
from streamshield.network.switches import SwitchKind
from streamshield.network.window_sharing import (
    RANGE_NODE,
    ROWS_NODE,
    WindowNode,
    node_vertex,
    shares_across_rights,
    window_network,
    window_node,
    window_nodes,
    window_switches,
)
from streamshield.policy.punctuation import Sign

ROWS3, RANGE60, NOW = (
    WindowSpec(WindowKind.ROWS, 3),
    WindowSpec(WindowKind.RANGE, 60),
    WindowSpec(WindowKind.NOW),
)


def test_rows_nodes_are_per_visibility_and_size_range_and_now_serve_every_right() -> None:
    assert not shares_across_rights(ROWS3)
    assert shares_across_rights(RANGE60) and shares_across_rights(NOW)
    nodes = window_nodes(
        {
            "c1": (ROWS3, "cardiologist"),
            "c2": (ROWS3, "cardiologist"),
            "n1": (ROWS3, "nurse"),
            "r_c": (RANGE60, "cardiologist"),
            "r_n": (RANGE60, "nurse"),
            "r30": (WindowSpec(WindowKind.RANGE, 30), "nurse"),
            "now": (NOW, "nurse"),
            "rows4": (WindowSpec(WindowKind.ROWS, 4), "nurse"),
        }
    )
    assert nodes == {
        WindowNode(ROWS_NODE, "cardiologist"): {"c1", "c2"},
        WindowNode(ROWS_NODE, "nurse"): {"n1", "rows4"},  # one visibility, every size
        WindowNode(RANGE_NODE): {"r_c", "r_n", "r30"},
        WindowNode(NOW): {"now"},
    }
    assert window_node(RANGE60, "x").per_branch_clock
    assert not window_node(ROWS3, "x").per_branch_clock
    assert window_node(ROWS3, "x").per_branch_count


def test_a_sliding_window_is_no_shared_relation() -> None:
    with pytest.raises(ValueError):
        window_node(WindowSpec(WindowKind.RANGE, 60, 30), "x")


# -- the model: rows are (time, readers); a branch reads a row when it holds a reader ------

Row = tuple[int, frozenset[str]]


def range_alone(batches: list[list[Row]], reader: str, width: int) -> list[set[Row]]:
    """A RANGE window of one query (engine/queries/window_state.py, over visible rows only)."""
    window: set[Row] = set()
    out = []
    for batch in batches:
        combined = window | {r for r in batch if reader in r[1]}
        newest = max((t for t, _ in combined), default=None)
        window = set() if newest is None else {r for r in combined if r[0] > newest - width}
        out.append(set(window))
    return out


def range_shared(batches: list[list[Row]], widths: dict[str, int]) -> list[dict]:
    """One node for every reader and width: kept at the slowest bound (a reader's clock
    less its width), cut at each reader's own."""
    node: set[Row] = set()
    out = []
    for batch in batches:
        combined = node | {r for r in batch if r[1] & set(widths)}
        clocks = {who: max((t for t, rs in combined if who in rs), default=None) for who in widths}
        bounds = {who: None if c is None else c - widths[who] for who, c in clocks.items()}
        known = [b for b in bounds.values() if b is not None]
        node = {r for r in combined if r[0] > min(known)} if known else set()
        out.append(
            {
                who: {r for r in node if who in r[1] and r[0] > bound}
                if bound is not None
                else set()
                for who, bound in bounds.items()
            }
        )
    return out


rows = st.tuples(
    st.integers(0, 200),
    st.frozensets(st.sampled_from(["a", "b", "c"]), max_size=3),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(rows, max_size=6), max_size=8),
    st.fixed_dictionaries({who: st.integers(1, 80) for who in "abc"}),
)
def test_one_range_node_serves_every_reader_and_width_exactly(batches, widths) -> None:
    shared = range_shared(batches, widths)
    for who, width in widths.items():
        assert [instant[who] for instant in shared] == range_alone(batches, who, width)


def rows_alone(batches: list[list[tuple[str, int]]], size: int) -> list[set[StreamPosition]]:
    """A ROWS window of one query: the ``size`` latest rows of the stream, batch by batch
    (``(channel, seq)`` rows; the batch is the ingest batch of lang/windows.py's order)."""
    window: list[StreamPosition] = []
    out = []
    for i, batch in enumerate(batches):
        new = {StreamPosition(i, "s", channel, seq) for channel, seq in batch}
        window = latest_rows({*window, *new}, size)
        out.append(set(window))
    return out


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.sampled_from("pq"), st.integers(0, 60)), max_size=6), max_size=8
    ),
    st.lists(st.integers(1, 6), min_size=1, max_size=4),
)
def test_one_rows_node_keeps_the_largest_size_and_serves_every_smaller_one(batches, sizes) -> None:
    """The node of one visibility keeps its largest branch's latest rows; each branch's n
    latest out of them are its window alone (engine/sharing/window_network.py cuts by rank)."""
    kept = rows_alone(batches, max(sizes))
    for size in sizes:
        cuts = [{p for p in node if sum(1 for q in node if q > p) < size} for node in kept]
        assert cuts == rows_alone(batches, size)


def test_the_latest_rows_of_everyone_do_not_serve_a_reader_seeing_fewer() -> None:
    """Why ROWS nodes are per visibility: a hidden newer tuple would push out a visible
    one (and so tell its reader that something it cannot see arrived)."""
    batch = [(1, frozenset("ab")), (2, frozenset("a"))]  # by seq: 1 then 2
    latest_of_everyone = batch[-1:]
    b_alone = [r for r in batch if "b" in r[1]][-1:]
    assert [r for r in latest_of_everyone if "b" in r[1]] != b_alone


def test_switches_of_a_window_network_follow_its_nodes() -> None:
    """PrS Algorithm 2 over stream -> node -> branch: a RANGE node serving C and GP has
    one initial switch for both and an in-network switch per branch; ROWS nodes of two
    visibilities are two nodes, each with its own initial switch and none in-network."""
    nodes = window_nodes(
        {
            "range_c": (RANGE60, "C"),
            "range_gp": (RANGE60, "GP"),
            "rows_c": (ROWS3, "C"),
            "rows_gp": (ROWS3, "GP"),
        }
    )
    switches = window_switches("HeartRate", nodes)
    kinds = {(s.kind, s.queries) for s in switches}
    assert kinds == {
        (SwitchKind.INITIAL, frozenset({"range_c", "range_gp"})),
        (SwitchKind.IN_NETWORK, frozenset({"range_c"})),
        (SwitchKind.IN_NETWORK, frozenset({"range_gp"})),
        (SwitchKind.INITIAL, frozenset({"rows_c"})),
        (SwitchKind.INITIAL, frozenset({"rows_gp"})),
        *((SwitchKind.TERMINAL, frozenset({q})) for q in ("range_c", "range_gp")),
        *((SwitchKind.TERMINAL, frozenset({q})) for q in ("rows_c", "rows_gp")),
    }
    assert len({s.id for s in switches}) == len(switches) == 9
    assert window_switches("HeartRate", {}) == ()

    # The counters the API shows: one receiver of range_c opens the shared node's input
    # and range_c's own edge; range_gp's edge stays closed (deny by default).
    state, dropped = SwitchState.restore(switches, {"range_c": ["ann"]})
    assert not dropped
    opened = {(s.kind, s.queries) for s in switches if state.is_open(s)}
    assert opened == {
        (SwitchKind.INITIAL, frozenset({"range_c", "range_gp"})),
        (SwitchKind.IN_NETWORK, frozenset({"range_c"})),
        (SwitchKind.TERMINAL, frozenset({"range_c"})),
    }
    state, _ = state.apply(AccessChange("range_c", "ann", Sign.DENY))
    assert not any(state.is_open(s) for s in switches), "her revoke closes everything"


def test_branches_of_one_node_share_the_common_part_of_their_selects() -> None:
    """CW Figs. 3-5 over a window node: Q1 and Q2 share the window *and* ``msgType = send
    AND receiver = CompanyB``; each keeps its own ``outcome`` residual. A branch of
    another node, or with no WHERE, shares no select; the switches follow: an
    in-network switch on each edge out of the shared select (the last operator both
    use), none on the node's edge into it (both still share what is above it)."""
    q1 = where("msgType = 'send' AND outcome = 'success' AND receiver = 'CompanyB'")
    q2 = where("msgType = 'send' AND outcome = 'failure' AND receiver = 'CompanyB'")
    nodes = window_nodes({"q1": (RANGE60, "C1"), "q2": (RANGE60, "C1"), "q3": (ROWS3, "C1")})
    network = window_network("MessageLog", nodes, {"q1": q1, "q2": q2, "q3": q1})
    node = node_vertex("MessageLog", WindowNode(RANGE_NODE))
    common = select(where("msgType = 'send' AND receiver = 'CompanyB'"), node)
    assert network.usage[common] == {"q1", "q2"}
    (q1_in,) = network.roots["q1"].inputs
    (q2_in,) = network.roots["q2"].inputs
    assert q1_in == select(where("outcome = 'success'"), common)
    assert q2_in == select(where("outcome = 'failure'"), common)
    (q3_in,) = network.roots["q3"].inputs
    assert network.usage[q3_in] == {"q3"}, "another node: nothing shared above it"
    assert window_network("MessageLog", nodes, {"q1": q1}).roots["q2"].inputs == (node,)

    switches = window_switches("MessageLog", nodes, {"q1": q1, "q2": q2})
    in_network = {s.queries for s in switches if s.kind is SwitchKind.IN_NETWORK}
    assert in_network == {frozenset({"q1"}), frozenset({"q2"})}
    assert window_switches("MessageLog", nodes) != switches, "the selects are vertices"


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["a", "b", "c", "d"]),
        st.frozensets(st.sampled_from(["x = 1", "y = 2", "z > 3", "x = 4"]), max_size=3),
        min_size=1,
    )
)
def test_a_branch_reads_through_selects_its_where_implies(wheres) -> None:
    """Whatever the WHEREs, the selects below a branch conjoin to exactly its WHERE, and
    the network does not depend on the order branches came in."""
    predicates = {q: where(" AND ".join(sorted(w))) if w else None for q, w in wheres.items()}
    nodes = window_nodes({q: (RANGE60, "C") for q in wheres})
    network = window_network("s", nodes, predicates)
    for query, predicate in predicates.items():
        seen = Conjunction.of([])
        (node,) = network.roots[query].inputs
        while not isinstance(node, str) and node.kind == "select":
            seen = seen | node.predicate
            (node,) = node.inputs
        assert seen == (predicate or Conjunction.of([])), query
        assert node == node_vertex("s", WindowNode(RANGE_NODE))
    backwards = dict(reversed(list(predicates.items())))
    assert window_network("s", nodes, backwards).canonical == network.canonical
