"""The switchboard: query-scoped sps drive each query's privacy switch, in band."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamshield.network.switch_state import Outcome
from streamshield.network.switchboard import BadQuerySp, QuerySp, Switchboard
from streamshield.policy.punctuation import Sign

PLUS, MINUS = Sign.GRANT, Sign.DENY


def board() -> tuple[Switchboard, list[tuple[QuerySp, Outcome]]]:
    reported: list[tuple[QuerySp, Outcome]] = []
    switches = Switchboard(lambda sp, outcome: reported.append((sp, outcome)))
    switches.add("q1")
    switches.add("q2")
    return switches, reported


def test_a_switch_starts_closed_and_an_sp_applies_only_at_the_next_batch() -> None:
    switches, _ = board()
    assert not switches.is_on("q1") and switches.snapshot() == {}
    switches.inject(QuerySp("q1", "al", PLUS, 10.0))
    assert switches.snapshot() == {}, "queued: nothing changes between two batches"
    switches.drain()
    assert switches.is_on("q1") and not switches.is_on("q2")
    assert switches.switch("q1").since == 10.0
    switches.inject(QuerySp("q1", "al", MINUS, 20.0))
    assert not switches.is_on("q1") and switches.switch("q1").since == 20.0


def test_repeated_grants_and_unmatched_revokes_change_nothing_and_are_reported() -> None:
    switches, reported = board()
    for sp in (
        QuerySp("q1", "al", PLUS, 1.0),
        QuerySp("q1", "al", PLUS, 2.0),
        QuerySp("q1", "bob", MINUS, 3.0),
    ):
        switches.inject(sp)
    switches.drain()
    assert switches.snapshot() == {"q1": ["al"]}
    assert [o for _, o in reported] == [Outcome.DUPLICATE_GRANT, Outcome.UNMATCHED_REVOKE]
    switches.inject(QuerySp("q1", "al", MINUS, 4.0))
    assert not switches.is_on("q1"), "one '-' closes what one '+' opened, however repeated"


def test_an_sp_naming_no_query_is_refused_and_opens_nothing() -> None:
    switches, reported = board()
    with pytest.raises(BadQuerySp):
        switches.inject(QuerySp("nope", "al", PLUS, 1.0))
    assert reported[-1][1] is Outcome.UNKNOWN_QUERY
    switches.inject(QuerySp("q2", "al", PLUS, 1.0))
    switches.forget("q2")  # removed while its sp waited: the sp opens nothing
    assert not switches.is_on("q2") and switches.snapshot() == {}
    with pytest.raises(BadQuerySp):
        switches.inject(QuerySp("q2", "al", PLUS, 2.0))


@pytest.mark.parametrize(
    "query, user, sign",
    [("", "al", PLUS), ("q1", " ", PLUS), ("q1", "al", "+"), (None, "al", PLUS)],
)
def test_malformed_sps_are_refused(query, user, sign) -> None:
    with pytest.raises(BadQuerySp):
        QuerySp(query, user, sign, 1.0)


@given(
    st.lists(
        st.tuples(st.sampled_from(["q1", "q2"]), st.sampled_from(["a", "b", "c"]), st.booleans()),
        max_size=40,
    )
)
def test_a_switch_is_open_exactly_while_someone_holds_an_unmatched_grant(steps) -> None:
    switches, _ = board()
    model: dict[str, set[str]] = {"q1": set(), "q2": set()}
    for ts, (query, user, grant) in enumerate(steps):
        switches.inject(QuerySp(query, user, PLUS if grant else MINUS, float(ts)))
        if grant:
            model[query].add(user)
        else:
            model[query].discard(user)
        if ts % 3 == 0:
            switches.drain()
    for query, users in model.items():
        assert switches.is_on(query) == bool(users)
    assert switches.snapshot() == {q: sorted(u) for q, u in model.items() if u}
