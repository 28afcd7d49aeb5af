"""Property tests of the Chinese-Wall lattice and its bitset encoding (paper 2, section 3).

Lattices are drawn with any number of classes and companies, some with more than 64
companies so that classes straddle word boundaries and the sign bit, and some with a
company order that is not class order.
"""

from __future__ import annotations

from functools import reduce

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamshield.policy.bitset import WORD_BITS, union, words_for
from streamshield.policy.coi import ASCII_BOTTOM, BOTTOM, TOP, ErrorKind, LatticeError
from streamshield.policy.lattice import Lattice, Level


@st.composite
def lattices(draw: st.DrawFn) -> Lattice:
    sizes = draw(st.lists(st.one_of(st.integers(2, 4), st.integers(2, 90)), min_size=1, max_size=5))
    classes = [(f"K{k}", [f"c{k}_{i}" for i in range(n)]) for k, n in enumerate(sizes)]
    companies = [c for _, members in classes for c in members]
    order = draw(st.one_of(st.none(), st.permutations(companies)))
    return Lattice.of(classes, order)


def levels(lat: Lattice) -> st.SearchStrategy[Level]:
    parts = [st.sampled_from([BOTTOM, TOP, *c.companies]) for c in lat.classes.classes]
    return st.tuples(*parts).map(Level)


@st.composite
def lattice_and(draw: st.DrawFn, n: int) -> tuple[Lattice, list[Level]]:
    lat = draw(lattices())
    return lat, [draw(levels(lat)) for _ in range(n)]


# --- the order ---------------------------------------------------------------------------


@given(lattice_and(3))
def test_dominance_is_a_partial_order(drawn) -> None:
    lat, (a, b, c) = drawn
    assert lat.dominated(a, a)
    if lat.dominated(a, b) and lat.dominated(b, a):
        assert a == b
    if lat.dominated(a, b) and lat.dominated(b, c):
        assert lat.dominated(a, c)
    # random triples rarely chain: build a chain and check it too
    up, top = lat.lub(a, b), lat.lub(a, b, c)
    assert lat.dominated(a, up) and lat.dominated(up, top) and lat.dominated(a, top)


@given(lattice_and(3))
def test_lub_is_the_least_upper_bound_and_never_lowers(drawn) -> None:
    lat, (a, b, c) = drawn
    j = lat.lub(a, b)
    assert lat.dominated(a, j) and lat.dominated(b, j)
    if lat.dominated(a, c) and lat.dominated(b, c):
        assert lat.dominated(j, c)
    above = lat.lub(j, c)  # an upper bound of a and b that exists in every draw
    assert lat.dominated(j, above)
    assert lat.lub(a, b) == lat.lub(b, a)
    assert lat.lub(a, lat.lub(b, c)) == lat.lub(lat.lub(a, b), c) == lat.lub(a, b, c)
    assert lat.lub(a, a) == a


@given(lattice_and(3))
def test_glb_is_the_greatest_lower_bound(drawn) -> None:
    lat, (a, b, c) = drawn
    m = lat.glb(a, b)
    assert lat.dominated(m, a) and lat.dominated(m, b)
    if lat.dominated(c, a) and lat.dominated(c, b):
        assert lat.dominated(c, m)
    below = lat.glb(m, c)
    assert lat.dominated(below, m)
    assert lat.glb(a, b) == lat.glb(b, a)
    assert lat.glb(a, lat.glb(b, c)) == lat.glb(lat.glb(a, b), c) == lat.glb(a, b, c)
    assert lat.lub(a, lat.glb(a, b)) == a == lat.glb(a, lat.lub(a, b))  # absorption


@given(lattice_and(1))
def test_public_is_the_bottom_and_trusted_the_top(drawn) -> None:
    lat, (a,) = drawn
    assert lat.dominated(lat.public, a) and lat.dominated(a, lat.trusted)
    assert lat.lub(a, lat.public) == a == lat.glb(a, lat.trusted)
    assert lat.lub(a, lat.trusted) == lat.trusted
    assert lat.glb(a, lat.public) == lat.public


# --- encoding ----------------------------------------------------------------------------


@given(lattice_and(2))
def test_encode_decode_round_trip_and_encoding_is_injective(drawn) -> None:
    lat, (a, b) = drawn
    n = len(lat.classes.companies)
    assert lat.width == words_for(n) == len(lat.encode(a))
    assert lat.decode(lat.encode(a)) == a
    assert (lat.encode(a) == lat.encode(b)) == (a == b)
    top_bit = max(
        (
            w * WORD_BITS + i
            for w, x in enumerate(lat.encode(lat.trusted))
            for i in range(64)
            if (x >> i) & 1
        ),
    )
    assert top_bit == n - 1  # every company has a bit, none beyond


@given(lattice_and(4))
def test_words_agree_with_levels(drawn) -> None:
    lat, (a, b, c, d) = drawn
    assert lat.words_dominated(lat.encode(a), b) is lat.dominated(a, b)
    ored = reduce(union, [lat.encode(x) for x in (a, b, c)])
    assert lat.decode(ored) == lat.lub(a, b, c)
    # an OR is not canonical, yet the one-AND-per-word test places it exactly
    assert lat.words_dominated(ored, d) is lat.dominated(lat.lub(a, b, c), d)
    assert lat.decode(lat.lub_words(lat.encode(a), lat.encode(b))) == lat.lub(a, b)
    assert lat.decode(lat.glb_words(ored, lat.encode(d))) == lat.glb(lat.lub(a, b, c), d)


@given(lattices(), st.data())
def test_running_or_never_lowers_a_label(lat, data) -> None:
    """What joins and aggregates do to a label: each step is at or above the last."""
    words = lat.encode(lat.public)
    for level in data.draw(st.lists(levels(lat), max_size=8)):
        before = lat.decode(words)
        words = lat.lub_words(words, lat.encode(level))
        after = lat.decode(words)
        assert lat.dominated(before, after) and lat.dominated(level, after)


@given(lattices(), st.data())
def test_a_group_lub_is_the_lub_and_a_missing_level_only_denies_more(lat, data) -> None:
    """``lub_group`` (the pure form of the engine's ``bit_or(coalesce(w, -1))``): the
    LUB of its contributors; with one missing (a NULL word), a level nothing dominates,
    not even trusted, so a missing level never makes an aggregate more readable."""
    members = data.draw(st.lists(levels(lat), min_size=1, max_size=6))
    words = [lat.encode(level) for level in members]
    group = lat.lub_group(words)
    assert group is not None and lat.decode(group) == lat.lub(*members)
    at = data.draw(st.integers(0, len(words)))
    hole = data.draw(st.integers(0, lat.width - 1))
    holed = tuple(None if i == hole else w for i, w in enumerate(words[0]))
    for missing in (None, holed):
        marked = lat.lub_group([*words[:at], missing, *words[at:]])
        assert marked == lat.unknown
        if marked is None:  # every bit a company's (exactly 64 per word): no mark
            continue
        assert not lat.words_dominated(marked, lat.trusted)
        with pytest.raises(LatticeError):
            lat.decode(marked)


def test_a_lattice_without_a_spare_bit_has_no_mark_for_a_missing_level() -> None:
    """64 companies in one 64-bit word: every bit set is trusted, a level, so a missing
    word cannot be marked with it; the group has no level (the engine keeps NULL)."""
    full = Lattice.of({"X": [f"x{i}" for i in range(32)], "Y": [f"y{i}" for i in range(32)]})
    assert full.encode(full.trusted) == (-1,) and full.unknown is None
    assert full.lub_group([full.encode(full.trusted), None]) is None
    assert full.lub_group([]) is None  # Spark's bit_or over no rows is NULL too
    spare = Lattice.of({"X": ["x0", "x1"]}, capacity=2)  # two words, one all spare
    assert spare.unknown == (-1, -1) and not spare.words_dominated((-1, -1), spare.trusted)


# --- text forms and errors ---------------------------------------------------------------


@given(lattice_and(1))
def test_text_forms_round_trip(drawn) -> None:
    lat, (a,) = drawn
    text, ascii_text = lat.format(a), lat.format(a, ascii=True)
    assert lat.parse(text) == lat.parse(ascii_text) == a
    assert BOTTOM not in ascii_text
    assert lat.parse(" " + text.replace(", ", " ,  ") + "\n") == a
    assert str(a) == text


@settings(max_examples=300)
@given(lattices(), st.lists(st.sampled_from([*"[],_ ⊥TK", "c0_0", "c1_1", "c0_"])).map("".join))
def test_parse_accepts_a_level_or_raises_a_lattice_error(lat, text) -> None:
    try:
        level = lat.parse(text)
    except LatticeError as error:
        assert error.kind in set(ErrorKind)
        assert str(error)
    else:
        assert lat.parse(lat.format(level)) == level


@given(lattices(), st.data())
def test_ci_class_holds_at_most_one_company_per_coi_class(lat, data) -> None:
    chosen = data.draw(st.lists(st.sampled_from(lat.classes.companies), unique=True, max_size=6))
    per_class = [lat.classes.class_of(c) for c in chosen]
    if len(set(per_class)) == len(per_class):
        level = lat.ci_level(lat.classes.ci_class("svc", chosen))
        assert level == lat.level_of(chosen)
        assert TOP not in level.parts
    else:
        with pytest.raises(LatticeError) as caught:
            lat.classes.ci_class("svc", chosen)
        assert caught.value.kind is ErrorKind.TWO_COMPANIES_ONE_CLASS
        with pytest.raises(LatticeError):
            lat.level_of(chosen)


CLOUD = Lattice.of({"COI1": ["1", "2"], "COI2": ["A", "B", "C"]})


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[1, Z]", "component 2 (class 'COI2'): unknown company 'Z'"),
        ("[B, B]", "component 1 (class 'COI1'): company 'B' is in class 'COI2'"),
        ("[1]", "2 components (one per COI class: COI1, COI2), got 1"),
        ("[1, , B]", "component 2 is empty"),
        ("1, B", "in brackets"),
    ],
)
def test_errors_name_the_offending_part(text, needle) -> None:
    with pytest.raises(LatticeError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        CLOUD.parse(text)


def test_errors_of_definitions_name_class_and_companies() -> None:
    with pytest.raises(LatticeError, match="'1' and '2' are both in COI class 'COI1'"):
        CLOUD.classes.ci_class("svc", ["1", "B", "2"])
    with pytest.raises(LatticeError, match="'1' and '2' are both in class 'COI1'"):
        CLOUD.level_of(["1", "2"])
    with pytest.raises(LatticeError, match="company 'b' is in class 'X' and in 'Y'"):
        Lattice.of({"X": ["a", "b"], "Y": ["b", "c"]})
    with pytest.raises(LatticeError, match="class 'X' has 1 company"):
        Lattice.of({"X": ["a"]})
    with pytest.raises(LatticeError, match=r"CI class 'svc', component 1 .* never T"):
        CLOUD.parse_ci("svc", "[T, B]")
    with pytest.raises(LatticeError, match="companies must be a list"):
        Lattice.of({"X": "ab"})
    with pytest.raises(LatticeError, match="unknown class 'COI9'"):
        CLOUD.level_of([], trusted_in=["COI9"])


def test_a_level_of_another_lattice_is_refused() -> None:
    other = Lattice.of({"X": ["a", "b"]})
    with pytest.raises(LatticeError) as caught:
        CLOUD.dominated(other.public, CLOUD.public)
    assert caught.value.kind is ErrorKind.ARITY
    with pytest.raises(LatticeError):
        CLOUD.encode(Level(("a", "B")))


def test_paper_examples() -> None:
    """Section 3 (three classes of 5, 3 and 2 companies) and sections 4 and 6."""
    lat = Lattice.of({"COI1": list("12345"), "COI2": list("ABC"), "COI3": ["x1", "x2"]})
    p = lat.parse
    assert lat.dominated(p("[5, ⊥, ⊥]"), p("[5, ⊥, x2]"))
    assert lat.dominated(p("[5, ⊥, x2]"), p("[5, ⊥, T]"))
    assert not lat.comparable(p("[5, ⊥, ⊥]"), p("[⊥, ⊥, x2]"))
    assert lat.lub(p("[⊥, A, ⊥]"), p("[⊥, B, ⊥]"), p("[⊥, C, ⊥]")) == p("[⊥, T, ⊥]")
    assert lat.public == p("[_, _, _]") and lat.trusted == p("[T, T, T]")
    assert lat.format(lat.public, ascii=True) == f"[{ASCII_BOTTOM}, _, _]"
    assert CLOUD.lub(CLOUD.parse("[1, ⊥]"), CLOUD.parse("[⊥, B]")) == CLOUD.parse("[1, B]")


def test_capacity_keeps_the_width_as_companies_are_appended() -> None:
    small = Lattice.of({"X": ["a", "b"]}, capacity=2)
    grown = Lattice.of({"X": ["a", "b", "c"]}, order=["a", "b", "c"], capacity=2)
    level = small.parse("[a]")
    assert small.width == grown.width == 2
    assert grown.decode(small.encode(level)) == grown.parse("[a]")  # old labels still read
    with pytest.raises(LatticeError) as caught:
        Lattice.of({"X": [f"m{i}" for i in range(65)]}, capacity=1)
    assert caught.value.kind is ErrorKind.CAPACITY
