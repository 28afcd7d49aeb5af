"""Hypothesis strategies shared by the policy-core tests (small universes find bugs fastest)."""

from __future__ import annotations

from hypothesis import strategies as st

from streamshield.examples import hospital
from streamshield.policy.elements import Channel, Element, SpElement, TupleElement
from streamshield.policy.punctuation import (
    DataDescription,
    SecurityPunctuation,
    SecurityRestriction,
    Sign,
)
from streamshield.policy.sp_patterns import ANY, Glob, Literal, OneOf, Range

HIERARCHY = hospital.hierarchy()
ROLES = HIERARCHY.roles
STREAMS = ("HeartRate", "BodyTemperature")
ATTRIBUTES = ("patient_id", "beats_per_min", "temperature", "ts")
TIDS = (120, 125, 133, 140)

role_patterns = st.one_of(
    st.just(ANY),
    st.sampled_from(ROLES).map(Literal),
    st.sets(st.sampled_from(ROLES), min_size=2, max_size=3).map(
        lambda rs: OneOf(frozenset(Literal(r) for r in rs))
    ),
    st.just(Glob("D*")),
)
tuple_patterns = st.one_of(
    st.just(ANY),
    st.sampled_from(TIDS).map(Literal),
    st.sampled_from([(120, 133), (125, 140), (134, 200)]).map(lambda lh: Range(*lh)),
)
attribute_patterns = st.one_of(
    st.just(ANY),
    st.sampled_from(ATTRIBUTES).map(Literal),
    st.sets(st.sampled_from(ATTRIBUTES), min_size=2, max_size=3).map(
        lambda xs: OneOf(frozenset(Literal(x) for x in xs))
    ),
)
stream_patterns = st.one_of(st.just(ANY), st.sampled_from(STREAMS).map(Literal))


@st.composite
def sp_bodies(draw: st.DrawFn) -> tuple[DataDescription, SecurityRestriction, Sign, bool]:
    sign = draw(st.sampled_from(Sign))
    ddp = DataDescription(draw(stream_patterns), draw(tuple_patterns), draw(attribute_patterns))
    grant_option = sign is Sign.GRANT and draw(st.booleans())
    return ddp, SecurityRestriction(draw(role_patterns), grant_option), sign, draw(st.booleans())


@st.composite
def policies(draw: st.DrawFn, ts: int) -> list[SecurityPunctuation]:
    bodies = draw(st.lists(sp_bodies(), min_size=1, max_size=3))
    return [SecurityPunctuation(*body, ts=ts, sn=sn) for sn, body in enumerate(bodies, 1)]


@st.composite
def clean_channels(draw: st.DrawFn, channel: Channel) -> list[Element]:
    """A well-behaved channel: complete policies, each followed by tuples that name it."""
    elements: list[Element] = []
    seq = 0
    for index in range(draw(st.integers(1, 3))):
        ts = 100 * (index + 1)
        sps = draw(policies(ts))
        for sp in sps:
            seq += 1
            elements.append(SpElement(channel, seq, sp))
        for tid in draw(st.lists(st.sampled_from(TIDS), min_size=0, max_size=3)):
            seq += 1
            values = {a: seq for a in hospital.SCHEMAS[channel.stream].attributes}
            elements.append(TupleElement(channel, seq, tid, ts, len(sps), values))
    return elements
