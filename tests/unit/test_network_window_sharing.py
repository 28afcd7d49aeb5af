"""Which windowed queries share a window node (network/window_sharing.py), and a model
check of the claim behind it: one RANGE node, cut per branch at its own clock, gives
every branch its own window; a ROWS window of everyone's tuples would not."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamshield.lang.windows import WindowKind, WindowSpec
from streamshield.network.switch_state import AccessChange, SwitchState
from streamshield.network.switches import SwitchKind
from streamshield.network.window_sharing import (
    WindowNode,
    shares_across_rights,
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


def test_rows_nodes_are_per_visibility_range_and_now_serve_every_right() -> None:
    assert not shares_across_rights(ROWS3)
    assert shares_across_rights(RANGE60) and shares_across_rights(NOW)
    nodes = window_nodes(
        {
            "c1": (ROWS3, "cardiologist"),
            "c2": (ROWS3, "cardiologist"),
            "n1": (ROWS3, "nurse"),
            "r_c": (RANGE60, "cardiologist"),
            "r_n": (RANGE60, "nurse"),
            "now": (NOW, "nurse"),
            "rows4": (WindowSpec(WindowKind.ROWS, 4), "nurse"),
        }
    )
    assert nodes == {
        WindowNode(ROWS3, "cardiologist"): {"c1", "c2"},
        WindowNode(ROWS3, "nurse"): {"n1"},
        WindowNode(RANGE60): {"r_c", "r_n"},
        WindowNode(NOW): {"now"},
        WindowNode(WindowSpec(WindowKind.ROWS, 4), "nurse"): {"rows4"},
    }
    assert window_node(RANGE60, "x").per_branch_clock
    assert not window_node(ROWS3, "x").per_branch_clock


def test_a_sliding_window_is_no_shared_relation() -> None:
    with pytest.raises(ValueError):
        window_node(WindowSpec(WindowKind.RANGE, 60, 30), "x")


# -- the model: rows are (time, readers); a branch reads a row when it holds a reader ------

Row = tuple[int, frozenset[str]]


def range_alone(batches: list[list[Row]], reader: str, width: int) -> list[set[Row]]:
    """A RANGE window of one query (engine/window_state.py, over visible rows only)."""
    window: set[Row] = set()
    out = []
    for batch in batches:
        combined = window | {r for r in batch if reader in r[1]}
        newest = max((t for t, _ in combined), default=None)
        window = set() if newest is None else {r for r in combined if r[0] > newest - width}
        out.append(set(window))
    return out


def range_shared(batches: list[list[Row]], readers: list[str], width: int) -> list[dict]:
    """One node for every reader: kept at the slowest clock, cut at each reader's own."""
    node: set[Row] = set()
    out = []
    for batch in batches:
        combined = node | {r for r in batch if r[1] & set(readers)}
        clocks = {who: max((t for t, rs in combined if who in rs), default=None) for who in readers}
        known = [c for c in clocks.values() if c is not None]
        node = {r for r in combined if r[0] > min(known) - width} if known else set()
        out.append(
            {
                who: {r for r in node if who in r[1] and r[0] > clock - width}
                if clock is not None
                else set()
                for who, clock in clocks.items()
            }
        )
    return out


rows = st.tuples(
    st.integers(0, 200),
    st.frozensets(st.sampled_from(["a", "b", "c"]), max_size=3),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(rows, max_size=6), max_size=8), st.integers(1, 80))
def test_one_range_node_serves_every_reader_exactly(batches, width) -> None:
    readers = ["a", "b", "c"]
    shared = range_shared(batches, readers, width)
    for who in readers:
        assert [instant[who] for instant in shared] == range_alone(batches, who, width)


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
