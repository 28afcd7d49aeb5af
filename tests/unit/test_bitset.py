"""Tests for the signed 64-bit word bitset encoding of security labels."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamshield.policy.bitset import (
    WORD_BITS,
    BitsetCodec,
    UnknownMemberError,
    difference,
    intersect,
    intersects,
    is_empty,
    is_subset,
    to_signed,
    to_unsigned,
    union,
    words_for,
)

MIN_LONG = -(2**63)
MAX_LONG = 2**63 - 1


def codec_of(n: int) -> BitsetCodec:
    return BitsetCodec([f"m{i}" for i in range(n)])


# --- unit tests -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "expected"),
    [(0, 1), (1, 1), (64, 1), (65, 2), (128, 2), (129, 3), (500, 8)],
)
def test_words_for(n: int, expected: int) -> None:
    assert words_for(n) == expected
    assert codec_of(n).width == expected


def test_words_for_rejects_negative() -> None:
    with pytest.raises(ValueError):
        words_for(-1)


def test_empty_codec_has_one_zero_word() -> None:
    c = codec_of(0)
    assert c.encode([]) == (0,)
    assert c.empty() == (0,)
    assert c.full() == (0,)
    assert c.decode((0,)) == frozenset()


def test_members_and_index_follow_given_order() -> None:
    c = BitsetCodec(["C", "D", "E"])
    assert c.members == ("C", "D", "E")
    assert [c.index(m) for m in "CDE"] == [0, 1, 2]
    assert c.encode(["E", "C"]) == (0b101,)


def test_member_63_is_sign_bit() -> None:
    c = codec_of(64)
    assert c.encode(["m63"]) == (MIN_LONG,)
    assert c.decode((MIN_LONG,)) == {"m63"}


def test_member_64_lands_in_word_1_bit_0() -> None:
    c = codec_of(65)
    assert c.encode(["m64"]) == (0, 1)
    assert c.bit("m64") == (1, 1)


def test_500_members() -> None:
    c = codec_of(500)
    assert c.width == 8
    words = c.encode(["m0", "m499"])
    assert len(words) == 8
    assert words[0] == 1
    assert words[7] == 1 << (499 % 64)
    assert c.decode(words) == {"m0", "m499"}


def test_full_sets_only_member_bits() -> None:
    c = codec_of(65)
    assert c.full() == (-1, 1)
    assert c.decode(c.full()) == frozenset(c.members)
    assert codec_of(3).full() == (0b111,)


def test_unknown_member_raises() -> None:
    c = BitsetCodec(["C", "D"])
    with pytest.raises(UnknownMemberError, match="'X'"):
        c.encode(["C", "X"])
    with pytest.raises(KeyError):
        c.index("X")
    with pytest.raises(UnknownMemberError):
        c.bit("X")


def test_duplicates_raise() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        BitsetCodec(["C", "D", "C"])


def test_decode_rejects_stray_bits() -> None:
    c = codec_of(3)
    with pytest.raises(ValueError):
        c.decode((0b1000,))
    with pytest.raises(ValueError):
        c.decode((MIN_LONG,))
    c65 = codec_of(65)
    with pytest.raises(ValueError):
        c65.decode((0, 0b10))


def test_decode_rejects_wrong_length() -> None:
    c = codec_of(65)
    with pytest.raises(ValueError):
        c.decode((0,))
    with pytest.raises(ValueError):
        c.decode((0, 0, 0))


def test_decode_rejects_out_of_range_word() -> None:
    with pytest.raises(ValueError):
        codec_of(64).decode((2**63,))


@pytest.mark.parametrize("i", [0, 1, 62, 63, 64, 127, 128, 499])
def test_bit_agrees_with_singleton_encode(i: int) -> None:
    c = codec_of(500)
    word, mask = c.bit(f"m{i}")
    expected = [0] * c.width
    expected[word] = mask
    assert c.encode([f"m{i}"]) == tuple(expected)
    assert MIN_LONG <= mask <= MAX_LONG


def test_ops_reject_length_mismatch() -> None:
    for op in (union, intersect, difference, is_subset, intersects):
        with pytest.raises(ValueError):
            op((0,), (0, 0))


def test_to_signed_edges() -> None:
    assert to_signed(0) == 0
    assert to_signed(2**63 - 1) == MAX_LONG
    assert to_signed(2**63) == MIN_LONG
    assert to_signed(2**64 - 1) == -1
    assert to_unsigned(-1) == 2**64 - 1
    with pytest.raises(ValueError):
        to_signed(2**64)
    with pytest.raises(ValueError):
        to_signed(-1)
    with pytest.raises(ValueError):
        to_unsigned(2**63)


# --- property tests ---------------------------------------------------------------------


@st.composite
def codec_and_sets(draw: st.DrawFn) -> tuple[BitsetCodec, frozenset[str], frozenset[str]]:
    n = draw(st.integers(min_value=0, max_value=300))
    c = codec_of(n)
    if n == 0:
        return c, frozenset(), frozenset()
    names = st.sampled_from(c.members)
    s = draw(st.frozensets(names, max_size=n))
    t = draw(st.frozensets(names, max_size=n))
    return c, s, t


FAST = settings(max_examples=150, deadline=None)


def in_long_range(words: tuple[int, ...]) -> bool:
    return all(MIN_LONG <= w <= MAX_LONG for w in words)


@FAST
@given(codec_and_sets())
def test_round_trip(cst: tuple[BitsetCodec, frozenset[str], frozenset[str]]) -> None:
    c, s, _ = cst
    words = c.encode(s)
    assert len(words) == c.width
    assert in_long_range(words)
    assert c.decode(words) == s
    assert is_empty(words) == (not s)


@FAST
@given(codec_and_sets())
def test_set_algebra_matches(cst: tuple[BitsetCodec, frozenset[str], frozenset[str]]) -> None:
    c, s, t = cst
    a, b = c.encode(s), c.encode(t)
    for result in (union(a, b), intersect(a, b), difference(a, b)):
        assert in_long_range(result)
    assert union(a, b) == c.encode(s | t)
    assert intersect(a, b) == c.encode(s & t)
    assert difference(a, b) == c.encode(s - t)
    assert is_subset(a, b) == (s <= t)
    assert is_subset(a, c.full())
    assert intersects(a, b) == bool(s & t)


@FAST
@given(st.integers(min_value=0, max_value=2**WORD_BITS - 1))
def test_signed_unsigned_round_trip_unsigned(u: int) -> None:
    s = to_signed(u)
    assert MIN_LONG <= s <= MAX_LONG
    assert to_unsigned(s) == u


@FAST
@given(st.integers(min_value=MIN_LONG, max_value=MAX_LONG))
def test_signed_unsigned_round_trip_signed(s: int) -> None:
    assert to_signed(to_unsigned(s)) == s
