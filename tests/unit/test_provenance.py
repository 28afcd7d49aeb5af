"""Provenance labels of SecFilter: stable stream bits, derived streams, the delivery check."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamshield.policy.bitset import UnknownMemberError, union
from streamshield.policy.provenance import NO_RIGHTS, ProvenanceCodec, Rights, delivers

NAMES = [f"s{i}" for i in range(150)]  # three words: Borealis' 32 sources are no limit


def test_each_stream_is_its_own_bit_in_registration_order() -> None:
    codec = ProvenanceCodec(["Zeta", "alpha"])
    assert codec.label("Zeta") == (1,) and codec.label("alpha") == (2,)
    assert codec.decode(codec.encode(["Zeta", "alpha"])) == {"Zeta", "alpha"}


def test_many_sources_span_several_words() -> None:
    codec = ProvenanceCodec(NAMES)
    assert codec.width == 3
    assert codec.label("s149") == (0, 0, 1 << (149 - 128))
    assert codec.label("s63") == (-(2**63), 0, 0)


def test_appending_streams_keeps_existing_labels() -> None:
    before = ProvenanceCodec(NAMES[:60])
    after = before.appended([*NAMES[:60], *NAMES[60:130]])
    assert after.streams[:60] == before.streams
    for name in NAMES[:60]:
        assert after.label(name)[: before.width] == before.label(name)
        assert all(w == 0 for w in after.label(name)[before.width :])


def test_unknown_stream_has_no_label() -> None:
    codec = ProvenanceCodec(["a"])
    with pytest.raises(UnknownMemberError):
        codec.label("b")
    with pytest.raises(UnknownMemberError):
        codec.derive("d", ["a", "b"])


def test_rights_on_unknown_streams_grant_nothing() -> None:
    codec = ProvenanceCodec(["a", "b"])
    assert codec.readable(["b", "later", "a_derived"]) == codec.label("b")


def test_derived_stream_carries_the_union_of_its_sources() -> None:
    codec = ProvenanceCodec(["a", "b", "c"]).derive("ab", ["a", "b"]).derive("abc", ["ab", "c"])
    assert codec.label("ab") == union(codec.label("a"), codec.label("b"))
    assert codec.sources_of("abc") == {"a", "b", "c"}
    # registered as a stream too (so it has a bit): its tuples still carry the sources
    registered = codec.appended(["ab"])
    assert registered.label("ab") == codec.label("ab")
    # READ on the derived stream alone does not release its tuples (strong semantic)
    assert not delivers(registered.label("ab"), registered.readable(["ab"]))
    with pytest.raises(ValueError, match="already"):
        codec.derive("ab", ["c"])


def test_strong_semantic_needs_every_source() -> None:
    codec = ProvenanceCodec(["in1", "in2"])
    both = codec.encode(["in1", "in2"])
    table = {  # paper 5, Fig. 7
        "A": ([], False),
        "B": (["in2"], False),
        "C": (["in1"], False),
        "D": (["in1", "in2"], True),
    }
    for user, (read, expected) in table.items():
        assert delivers(both, codec.readable(read)) is expected, user


def test_unlabelled_tuples_are_never_delivered() -> None:
    codec = ProvenanceCodec(["a"])
    assert not delivers(codec.encode([]), codec.readable(["a"]))


def test_aggregate_read_releases_aggregates_only() -> None:
    rights = Rights(frozenset({"in1"}), frozenset({"in2"}))
    assert rights.sources(aggregate_row=False) == {"in1"}
    assert rights.sources(aggregate_row=True) == {"in1", "in2"}


@pytest.mark.parametrize(
    "answer",
    [None, "in1", ("in1", "in2"), ({"in1"},), ({"in1"}, {2}), {"read": {"in1"}}],
)
def test_malformed_rights_are_an_error(answer) -> None:
    with pytest.raises(TypeError):
        Rights.of(answer)


def test_rights_from_a_pair() -> None:
    assert Rights.of(({"a"}, set())) == Rights(frozenset({"a"}))
    assert Rights.of(NO_RIGHTS) is NO_RIGHTS
    assert NO_RIGHTS.sources(True) == frozenset()


subsets = st.sets(st.sampled_from(NAMES), max_size=12)


@settings(max_examples=300, deadline=None)
@given(sources=subsets, read=subsets)
def test_delivers_is_the_set_decision(sources: set[str], read: set[str]) -> None:
    codec = ProvenanceCodec(NAMES)
    expected = bool(sources) and sources <= read
    assert delivers(codec.encode(sources), codec.readable(read)) is expected


@settings(max_examples=200, deadline=None)
@given(sources=subsets, read=subsets, extra=st.integers(1, 100))
def test_rights_of_a_narrower_codec_deny_new_sources(
    sources: set[str], read: set[str], extra: int
) -> None:
    """Rights encoded before streams were added meet labels of the wider codec: a source
    the old codec cannot name is never covered."""
    old = ProvenanceCodec(NAMES[:40])
    new = old.appended(NAMES[: 40 + extra])
    sources = {s for s in sources if s in new.streams}
    expected = bool(sources) and sources <= (read & set(old.streams))
    assert delivers(new.encode(sources), old.readable(read)) is expected
