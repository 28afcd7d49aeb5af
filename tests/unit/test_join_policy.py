"""SCJoin's pure parts: pair visibility, class compatibility, output labels, heuristic."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from streamshield.policy.bitset import BitsetCodec
from streamshield.policy.encoding import EncodedAccess
from streamshield.policy.join_policy import (
    JoinClass,
    Strategy,
    attribute_visible,
    choose,
    compatible_pairs,
    joined_tuple_access,
    pair_visible,
    plan,
)

# 70 members: two words, so the word-wise tests are exercised across a word boundary
MEMBERS = [f"r{i}" for i in range(70)]
CODEC = BitsetCodec(MEMBERS)
role_sets = st.frozensets(st.sampled_from(["r0", "r1", "r2", "r63", "r64", "r69"]), max_size=4)


@st.composite
def accesses(draw: st.DrawFn) -> tuple[frozenset[str], frozenset[str]]:
    return draw(role_sets), draw(st.frozensets(st.sampled_from(["r1", "r64"]), max_size=1))


def enc(access: tuple[frozenset[str], frozenset[str]]) -> EncodedAccess:
    return EncodedAccess(CODEC.encode(access[0]), CODEC.encode(access[1]))


@st.composite
def classes(draw: st.DrawFn) -> tuple[tuple, tuple]:
    return draw(accesses()), draw(accesses())


def as_class(raw: tuple[tuple, tuple]) -> JoinClass:
    return JoinClass(enc(raw[0]), enc(raw[1]))


def set_visible(q: frozenset[str], left: tuple, right: tuple) -> bool:
    """The rule in sets: one role reads all four objects; no role of q is denied on any."""
    readers = left[0][0] & left[1][0] & right[0][0] & right[1][0]
    denied = left[0][1] | left[1][1] | right[0][1] | right[1][1]
    return bool(q & readers) and not (q & denied)


@settings(max_examples=300)
@given(role_sets, classes(), classes())
def test_pair_visibility_is_the_set_rule(q, left, right) -> None:
    assert pair_visible(CODEC.encode(q), as_class(left), as_class(right)) == set_visible(
        q, left, right
    )


def test_a_role_must_read_both_sides_itself() -> None:
    """r0 reads the left pair, r64 the right one: a consumer holding both sees nothing."""
    left = JoinClass(enc(({"r0"}, set())), enc(({"r0"}, set())))
    right = JoinClass(enc(({"r64"}, set())), enc(({"r64"}, set())))
    q = CODEC.encode({"r0", "r64"})
    assert not pair_visible(q, left, right)
    both = JoinClass(enc(({"r0", "r64"}, set())), enc(({"r0", "r64"}, set())))
    assert pair_visible(q, both, both)


def test_masked_key_or_deny_on_one_side_hides_the_pair() -> None:
    readable = JoinClass(enc(({"r1"}, set())), enc(({"r1"}, set())))
    key_hidden = JoinClass(enc(({"r1"}, set())), enc((set(), set())))
    denied = JoinClass(enc(({"r1", "r2"}, {"r64"})), enc(({"r1", "r2"}, set())))
    q = CODEC.encode({"r1"})
    assert pair_visible(q, readable, readable)
    assert not pair_visible(q, readable, key_hidden)
    assert not pair_visible(q, key_hidden, readable)
    assert pair_visible(q, readable, denied)
    assert not pair_visible(CODEC.encode({"r1", "r64"}), readable, denied)


@settings(max_examples=100)
@given(
    st.lists(classes(), min_size=1, max_size=4),
    st.lists(classes(), min_size=1, max_size=4),
    st.lists(role_sets, max_size=3),
)
def test_compatible_pairs_are_those_some_consumer_sees(left, right, queries) -> None:
    got = compatible_pairs(
        [as_class(c) for c in left],
        [as_class(c) for c in right],
        [CODEC.encode(q) for q in queries],
    )
    expected = {
        (i, j)
        for i, lc in enumerate(left)
        for j, rc in enumerate(right)
        if any(set_visible(q, lc, rc) for q in queries)
    }
    assert got == expected


@settings(max_examples=200)
@given(accesses(), accesses(), role_sets)
def test_joined_labels_never_grant_more_than_either_side(left, right, q) -> None:
    joined = joined_tuple_access(enc(left), enc(right))
    query = CODEC.encode(q)
    if joined.allows(query):
        assert enc(left).allows(query) and enc(right).allows(query)
    assert CODEC.decode(joined.readers) == left[0] & right[0]
    assert CODEC.decode(joined.denied) == left[1] | right[1]
    assert attribute_visible(query, enc(left), enc(right)) == joined.allows(query)


def share_rule(lc: int, lt: int, rc: int, rt: int, last: Strategy | None) -> Strategy:
    left, right = Fraction(lc, lt), Fraction(rc, rt)
    larger = left if left > right else right
    if larger > Fraction(1, 2):
        return Strategy.FP
    if larger < Fraction(1, 5):
        return Strategy.PF
    return last or Strategy.PF


@settings(max_examples=300)
@given(
    st.integers(1, 50),
    st.integers(1, 50),
    st.data(),
    st.sampled_from([None, Strategy.PF, Strategy.FP]),
)
def test_heuristic_follows_the_paper(lt, rt, data, last) -> None:
    lc, rc = data.draw(st.integers(0, lt)), data.draw(st.integers(0, rt))
    assert choose(lc, lt, rc, rt, last) == share_rule(lc, lt, rc, rt, last)


def test_heuristic_thresholds() -> None:
    assert choose(6, 10, 1, 10) is Strategy.FP  # 0.6 > 0.5
    assert choose(5, 10, 1, 10, Strategy.FP) is Strategy.FP  # 0.5: keeps the last choice
    assert choose(5, 10, 1, 10) is Strategy.PF  # ... or PF when there is none
    assert choose(1, 10, 2, 10, Strategy.FP) is Strategy.FP  # 0.2: middle band
    assert choose(1, 10, 1, 100, Strategy.FP) is Strategy.PF  # 0.1 < 0.2
    assert choose(1, 100, 51, 100) is Strategy.FP  # the larger share is the right one


def test_plan_covers_every_nonempty_pair_and_keeps_last_choices() -> None:
    left, right = {"a": 8, "b": 2, "c": 0}, {"x": 3, "y": 3}
    got = plan(left, right, {("b", "x"): Strategy.FP})
    assert set(got) == {("a", "x"), ("a", "y"), ("b", "x"), ("b", "y")}
    assert got[("a", "x")] is Strategy.FP  # 0.8
    assert got[("b", "x")] is Strategy.FP  # shares 0.2 / 0.5: middle band, last choice
    assert got[("b", "y")] is Strategy.PF  # middle band, no last choice
