"""Privacy switches: placement (PrS Algorithm 2), state (section 5.1), and what they shut off."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamshield.network.evaluate import evaluate, evaluate_network
from streamshield.network.merge import merge
from streamshield.network.operators import Operator, project, select
from streamshield.network.predicates import parse_conjunction as where
from streamshield.network.switch_state import AccessChange, Outcome, SwitchState, operators_off
from streamshield.network.switches import Switch, SwitchKind, place_switches
from streamshield.policy.punctuation import Sign
from tests.unit.network_papers import (
    CW_COMMON_SELECT,
    CW_Q1,
    CW_Q1_RESIDUAL,
    CW_Q2,
    CW_Q2_RESIDUAL,
    PRS_BP,
    PRS_CQ1,
    PRS_CQ2,
    PRS_HR,
    PRS_JOIN,
    PRS_JOIN_O2,
    PRS_O2,
    PRS_Q1_PROJECT,
    PRS_Q2_ONLY,
    prs_streams,
)
from tests.unit.network_strategies import query_sets, stream_data

GRANT, DENY = Sign.GRANT, Sign.DENY


def grant(query: str, user: str) -> AccessChange:
    return AccessChange(query, user, GRANT)


def revoke(query: str, user: str) -> AccessChange:
    return AccessChange(query, user, DENY)


def apply_all(state: SwitchState, *changes: AccessChange) -> SwitchState:
    for change in changes:
        state, outcome = state.apply(change)
        assert outcome is Outcome.APPLIED, change
    return state


def edges(switches: tuple[Switch, ...], kind: SwitchKind) -> set[tuple]:
    return {(s.producer, s.consumer, s.queries) for s in switches if s.kind is kind}


PRS = merge({"Q1": PRS_CQ1, "Q2": PRS_CQ2})
PRS_SWITCHES = place_switches(PRS)


def test_fig6_placement() -> None:
    """PrS Fig. 6 (network of Fig. 2): initial switches in front of the streams, in-network
    switches right after the common prefix (the join), terminal switches at both outputs."""
    q1, q2, both = frozenset({"Q1"}), frozenset({"Q2"}), frozenset({"Q1", "Q2"})
    assert edges(PRS_SWITCHES, SwitchKind.INITIAL) == {
        ("HeartRate", PRS_HR, both),
        ("BloodPressure", PRS_BP, both),
        ("OxygenSaturation", PRS_O2, q2),
    }
    assert edges(PRS_SWITCHES, SwitchKind.IN_NETWORK) == {
        (PRS_JOIN, PRS_Q1_PROJECT, q1),
        (PRS_JOIN, PRS_JOIN_O2, q2),
    }
    assert edges(PRS_SWITCHES, SwitchKind.TERMINAL) == {
        (PRS_CQ1, None, q1),
        (PRS_CQ2, None, q2),
    }
    assert len({s.id for s in PRS_SWITCHES}) == len(PRS_SWITCHES) == 7


def test_fig6_losing_every_user_of_q2_shuts_six_of_ten_operators_off() -> None:
    """PrS section 5.3 on Fig. 6: "if all users accessing Q2 lose access ... the PrSs will
    shut off six out of the ten operators"; when a user gains access back, all nodes run."""
    state = SwitchState.closed(PRS_SWITCHES)
    assert operators_off(PRS, state) == PRS.nodes  # deny by default: nothing runs
    state = apply_all(state, grant("Q1", "ann"), grant("Q1", "bob"), grant("Q2", "cy"))
    state = apply_all(state, grant("Q2", "dee"))
    assert operators_off(PRS, state) == frozenset()
    state = apply_all(state, revoke("Q2", "cy"))  # Case I, partial loss: terminal filters
    assert operators_off(PRS, state) == frozenset()
    assert state.receivers("Q2") == {"dee"}
    state = apply_all(state, revoke("Q2", "dee"))  # Case II, total loss
    off = operators_off(PRS, state)
    assert off == PRS_Q2_ONLY and len(off) == 6 and len(PRS.nodes) == 10
    # The switched-off branch does no work at all, and Q1's result is unchanged.
    result = evaluate_network(PRS, prs_streams(), off)
    assert not any(result.computed[n] for n in off)
    assert result.outputs["Q1"] == evaluate(PRS_CQ1, prs_streams())
    state = apply_all(state, grant("Q2", "cy"))
    assert operators_off(PRS, state) == frozenset()


def test_cw_fig5_network_gets_switches_after_the_common_select() -> None:
    network = merge({"Q1": CW_Q1, "Q2": CW_Q2})
    switches = place_switches(network)
    assert edges(switches, SwitchKind.IN_NETWORK) == {
        (CW_COMMON_SELECT, CW_Q1_RESIDUAL, frozenset({"Q1"})),
        (CW_COMMON_SELECT, CW_Q2_RESIDUAL, frozenset({"Q2"})),
    }
    state = apply_all(SwitchState.closed(switches), grant("Q2", "u"))
    off = operators_off(network, state)
    assert off == {n for n, qs in network.usage.items() if qs == {"Q1"}}
    assert len(off) == 2


def test_three_queries_losing_two_shut_what_only_those_two_use() -> None:
    """Beyond the paper's two-query figure: a branch shared by Q1 and Q2 (but not Q3) needs
    its own in-network switch, or it would run when both lose access."""
    base = select(where("a = 1"), "S")
    q1 = project({"x"}, select(where("a = 1 AND b = 1 AND c = 1"), "S"))
    q2 = project({"y"}, select(where("a = 1 AND b = 1 AND c = 2"), "S"))
    network = merge({"Q1": q1, "Q2": q2, "Q3": project({"z"}, base)})
    switches = place_switches(network)
    b_node = select(where("b = 1"), base)
    assert (base, b_node, frozenset({"Q1", "Q2"})) in edges(switches, SwitchKind.IN_NETWORK)
    state = apply_all(SwitchState.closed(switches), grant("Q3", "u"))
    assert operators_off(network, state) == {
        n for n, qs in network.usage.items() if qs <= {"Q1", "Q2"}
    }
    assert b_node in operators_off(network, state)


def test_switch_counters_follow_plus_and_minus_and_never_go_below_zero() -> None:
    state = SwitchState.closed(PRS_SWITCHES)
    q2_in = next(s for s in PRS_SWITCHES if s.kind is SwitchKind.IN_NETWORK and s.queries == {"Q2"})
    shared = next(s for s in PRS_SWITCHES if s.producer == "HeartRate")
    state = apply_all(state, grant("Q2", "u"), grant("Q1", "v"))
    assert state.counters[q2_in] == 1 and state.counters[shared] == 2
    unchanged = state
    state, outcome = state.apply(revoke("Q2", "v"))  # v never had Q2: '-' without '+'
    assert outcome is Outcome.UNMATCHED_REVOKE and state is unchanged
    state, outcome = state.apply(grant("Q2", "u"))  # repeated '+': counted once
    assert outcome is Outcome.DUPLICATE_GRANT and state is unchanged
    state = apply_all(state, revoke("Q2", "u"))
    assert state.counters[q2_in] == 0 and not state.is_open(q2_in)
    state, outcome = state.apply(revoke("Q2", "u"))
    assert outcome is Outcome.UNMATCHED_REVOKE and state.counters[q2_in] == 0
    unchanged = state
    state, outcome = state.apply(grant("Q9", "u"))  # no such query: opens nothing
    assert outcome is Outcome.UNKNOWN_QUERY and state is unchanged
    assert operators_off(PRS, state) == PRS_Q2_ONLY


changes = st.lists(
    st.builds(
        AccessChange,
        st.sampled_from(["Q0", "Q1", "Q2", "Q3", "nope"]),
        st.sampled_from(["u1", "u2", "u3"]),
        st.sampled_from([GRANT, DENY]),
    ),
    max_size=25,
)


@settings(max_examples=100)
@given(query_sets(min_size=2, max_size=4), changes)
def test_counters_never_negative_and_count_the_users_with_access(queries, sps) -> None:
    network = merge(queries)
    state = SwitchState.closed(place_switches(network))
    access: dict[str, set[str]] = {q: set() for q in queries}
    for change in sps:
        state, outcome = state.apply(change)
        if change.query not in access:
            assert outcome is Outcome.UNKNOWN_QUERY
            continue
        had = change.user in access[change.query]
        if change.sign is GRANT:
            assert outcome is (Outcome.DUPLICATE_GRANT if had else Outcome.APPLIED)
            access[change.query].add(change.user)
        else:
            assert outcome is (Outcome.APPLIED if had else Outcome.UNMATCHED_REVOKE)
            access[change.query].discard(change.user)
        for switch, count in state.counters.items():
            assert count == sum(len(access[q]) for q in switch.queries) >= 0
        for q in queries:
            assert state.receivers(q) == access[q]
    # Off exactly when no query using the operator has anyone to deliver to.
    off = operators_off(network, state)
    assert off == {n for n, qs in network.usage.items() if not any(access[q] for q in qs)}


@settings(max_examples=100)
@given(query_sets(min_size=2, max_size=4), st.data(), stream_data())
def test_revoking_every_user_of_a_query_turns_off_exactly_the_operators_only_it_uses(
    queries, data, rows
) -> None:
    network = merge(queries)
    state = SwitchState.closed(place_switches(network))
    for q in queries:
        state = apply_all(state, grant(q, "u1"), grant(q, "u2"))
    assert operators_off(network, state) == frozenset()
    lost = data.draw(st.sampled_from(sorted(queries)))
    state = apply_all(state, revoke(lost, "u1"), revoke(lost, "u2"))
    off = operators_off(network, state)
    only_lost: set[Operator] = {n for n, qs in network.usage.items() if qs == {lost}}
    assert off == only_lost
    # The others' results do not change when the lost query's branch does no work.
    result = evaluate_network(network, rows, off)
    assert not any(result.computed[n] for n in off)
    for q, root in queries.items():
        if q != lost:
            assert result.outputs[q] == evaluate(root, rows)


@settings(max_examples=100)
@given(query_sets(min_size=3, max_size=4))
def test_losing_any_set_of_queries_turns_off_exactly_what_only_they_use(queries) -> None:
    """With three or more queries, branches shared by some (not all) of them must shut too
    when all of those lose access (the in-network switches inside the common prefix)."""
    network = merge(queries)
    everyone = SwitchState.closed(place_switches(network))
    for q in queries:
        everyone = apply_all(everyone, grant(q, "u"))
    names = sorted(queries)
    for size in range(1, len(names)):
        for lost in itertools.combinations(names, size):
            state = apply_all(everyone, *(revoke(q, "u") for q in lost))
            off = operators_off(network, state)
            assert off == {n for n, qs in network.usage.items() if qs <= set(lost)}, lost


@settings(max_examples=50)
@given(query_sets(min_size=2, max_size=4))
def test_every_query_output_has_a_terminal_and_every_stream_edge_an_initial_switch(
    queries,
) -> None:
    network = merge(queries)
    switches = place_switches(network)
    terminals = {s.query: s.producer for s in switches if s.kind is SwitchKind.TERMINAL}
    assert terminals == network.roots
    initial = {(s.producer, s.consumer) for s in switches if s.kind is SwitchKind.INITIAL}
    assert initial == {(p, c) for p, c in network.edges if isinstance(p, str)}
    for s in switches:
        if s.kind is SwitchKind.IN_NETWORK:
            assert s.producer in network.common_prefix
            assert s.queries == network.usage[s.consumer] < network.usage[s.producer]


def test_a_snapshot_restores_onto_a_replanned_network() -> None:
    """Access survives re-planning: the snapshot holds user sets, counters follow from them."""
    state = apply_all(
        SwitchState.closed(PRS_SWITCHES), grant("Q1", "ann"), grant("Q2", "cy"), grant("Q2", "d")
    )
    snapshot = state.snapshot()
    assert snapshot == {"Q1": ["ann"], "Q2": ["cy", "d"]}
    restored, dropped = SwitchState.restore(PRS_SWITCHES, snapshot)
    assert restored == state and dropped == frozenset()
    # Q2 removed from the network: Q1 keeps its access, Q2's users open nothing.
    alone = merge({"Q1": PRS_CQ1})
    restored, dropped = SwitchState.restore(place_switches(alone), snapshot)
    assert dropped == {"Q2"} and restored.receivers("Q1") == {"ann"}
    assert operators_off(alone, restored) == frozenset()
    assert all(n == 1 for n in restored.counters.values())


@pytest.mark.parametrize("bad", [{"Q1": "ann"}, {"Q1": [1]}, {"Q1": ["ann", "ann"]}])
def test_a_malformed_snapshot_is_refused(bad: dict) -> None:
    with pytest.raises(ValueError, match="snapshot of switch state"):
        SwitchState.restore(PRS_SWITCHES, bad)


def test_a_state_is_closed_wherever_it_says_nothing_and_never_negative() -> None:
    assert SwitchState(PRS_SWITCHES) == SwitchState.closed(PRS_SWITCHES)
    assert not any(SwitchState(PRS_SWITCHES).is_open(s) for s in PRS_SWITCHES)
    counted = next(s for s in PRS_SWITCHES if s.kind is SwitchKind.INITIAL)
    with pytest.raises(ValueError, match="below zero"):
        SwitchState(PRS_SWITCHES, {counted: -1})
    stranger = Switch(SwitchKind.TERMINAL, frozenset({"Q9"}), PRS_O2, None)
    with pytest.raises(ValueError, match="does not have"):
        SwitchState(PRS_SWITCHES, users={stranger: frozenset({"u"})})
