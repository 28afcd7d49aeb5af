"""Tag-based server policies: ``TAGGED`` resolves to the named policy over the attributes
carrying the tags now, and then decides exactly as that named policy does."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamshield.catalog.streams import StreamDefinition
from streamshield.lang.cql import CqlError, parse_policy, parse_statements, to_cql
from streamshield.policy.encoding import RoleCodec
from streamshield.policy.policy import Combine, Policy, PolicyError, ServerPolicy, label_for
from streamshield.policy.punctuation import SecurityPunctuation
from streamshield.policy.rules import compile_rules, evaluate
from streamshield.policy.sp_patterns import Tagged, one_of, tag_name
from streamshield.policy.tag_policies import resolve_tags, scope_takes_in, server_policy_for
from tests.unit.strategies import ATTRIBUTES, HIERARCHY, TIDS, policies

TAGS = ("PHI", "PII", "SECRET")
CODEC = RoleCodec(HIERARCHY)
tag_maps = st.dictionaries(
    st.sampled_from(ATTRIBUTES), st.frozensets(st.sampled_from(TAGS), max_size=2)
)


@st.composite
def tag_policies(draw: st.DrawFn) -> tuple[SecurityPunctuation, ...]:
    """Server sps, some of whose attribute parts are TAGGED instead of names."""
    sps = draw(policies(ts=1))
    out = []
    for sp in sps:
        if draw(st.booleans()):
            tags = draw(st.frozensets(st.sampled_from(TAGS), min_size=1, max_size=2))
            tagged = Tagged(tags, negated=draw(st.booleans()))
            sp = replace(sp, ddp=replace(sp.ddp, attributes=tagged))
        out.append(sp)
    return tuple(out)


def _named(sps, tags_of) -> tuple[SecurityPunctuation, ...]:
    """What an administrator would write by hand: each TAGGED part as the list of the
    attributes carrying a tag (NOT TAGGED: carrying none), an sp naming no attribute so
    written not at all."""
    out = []
    for sp in sps:
        pattern = sp.ddp.attributes
        if isinstance(pattern, Tagged):
            names = [
                a
                for a in ATTRIBUTES
                if bool(tags_of.get(a, frozenset()) & pattern.tags) != pattern.negated
            ]
            if not names:
                continue
            sp = replace(sp, ddp=replace(sp.ddp, attributes=one_of(names)))
        out.append(sp)
    return tuple(out)


@given(
    provider=policies(ts=5),
    server=tag_policies(),
    tags_of=tag_maps,
    mode=st.sampled_from(Combine),
    tid=st.sampled_from(TIDS),
    stream=st.sampled_from(["HeartRate", "BodyTemperature"]),
)
def test_a_tag_policy_is_the_named_policy_over_the_tagged_attributes(
    provider, server, tags_of, mode, tid, stream
) -> None:
    policy = Policy.of(provider)
    resolved = server_policy_for({stream: ServerPolicy(server, mode)}, stream, ATTRIBUTES, tags_of)
    named = _named(server, tags_of)
    by_hand = ServerPolicy(named, mode) if named else None
    assert resolved == by_hand
    expected = label_for(policy, stream, tid, ATTRIBUTES, HIERARCHY, by_hand)
    assert label_for(policy, stream, tid, ATTRIBUTES, HIERARCHY, resolved) == expected
    # and the compiled rules the Spark engine evaluates agree with both
    compiled = evaluate(compile_rules(policy, stream, ATTRIBUTES, CODEC, resolved), tid)
    assert compiled == CODEC.label(expected)


@given(provider=policies(ts=5), tid=st.sampled_from(TIDS), mode=st.sampled_from(Combine))
def test_a_tag_nobody_carries_covers_nothing(provider, tid, mode) -> None:
    """Over an untagged stream the policy is as if there were none, in either mode (an
    INTERSECT over nothing must not narrow, a UNION over nothing must not widen)."""
    server = parse_policy(
        "INSERT SP INTO STREAM HeartRate LET DDP = ATTRIBUTES: TAGGED PHI, SRP = rbac:INS", ts=1
    ).sps
    policies_by_scope = {"HeartRate": ServerPolicy(server, mode)}
    assert server_policy_for(policies_by_scope, "HeartRate", ATTRIBUTES, {}) is None
    policy = Policy.of(provider)
    none = label_for(policy, "HeartRate", tid, ATTRIBUTES, HIERARCHY, None)
    other_tag = server_policy_for(
        policies_by_scope, "HeartRate", ATTRIBUTES, {"temperature": {"PII"}}
    )
    assert label_for(policy, "HeartRate", tid, ATTRIBUTES, HIERARCHY, other_tag) == none


HEART = "INSERT SP INTO STREAM HeartRate LET DDP = STREAMS: HeartRate, SRP = rbac:E"
PHI_ONLY_FOR_DOCTORS = (
    "INSERT SP INTO STREAM LET DDP = ATTRIBUTES: TAGGED PHI, SRP = rbac:D;"
    "INSERT SP INTO STREAM LET DDP = ATTRIBUTES: NOT TAGGED PHI, SRP = rbac:E"
)


def _visible(server, tags_of, roles) -> frozenset[str]:
    policy = parse_policy(HEART, ts=5)
    resolved = server_policy_for(server, "HeartRate", ATTRIBUTES, tags_of)
    label = label_for(policy, "HeartRate", 125, ATTRIBUTES, HIERARCHY, resolved)
    return label.visible_attributes(HIERARCHY.effective(roles))


def test_a_glob_scoped_tag_policy_covers_streams_and_tags_added_later() -> None:
    """A ``*``-scoped policy over TAGGED PHI: a nurse (E, not D) loses an attribute as
    soon as it carries PHI, and gets it back when the tag goes."""
    server = {"*": ServerPolicy(parse_policy(PHI_ONLY_FOR_DOCTORS, ts=1).sps, Combine.INTERSECT)}
    assert _visible(server, {}, ["ND"]) == set(ATTRIBUTES)  # no PHI yet: nothing narrowed
    phi = {"beats_per_min": frozenset({"PHI"})}
    assert _visible(server, phi, ["ND"]) == set(ATTRIBUTES) - {"beats_per_min"}
    assert _visible(server, phi, ["GP"]) == set(ATTRIBUTES)  # a doctor keeps it
    assert _visible(server, {}, ["ND"]) == set(ATTRIBUTES)  # untagged again


def test_scopes_take_in_their_streams_only() -> None:
    assert scope_takes_in("ward*", "ward_b") and scope_takes_in("*", "x")
    assert not scope_takes_in("ward*", "clinic") and not scope_takes_in("ward", "ward_b")
    sps = parse_policy(PHI_ONLY_FOR_DOCTORS, ts=1).sps
    assert server_policy_for({"ward*": ServerPolicy(sps)}, "clinic", ATTRIBUTES, {}) is None


def test_policies_of_both_modes_over_one_stream_are_unusable() -> None:
    sps = parse_policy(PHI_ONLY_FOR_DOCTORS, ts=1).sps
    both = {"*": ServerPolicy(sps, Combine.UNION), "HeartRate": ServerPolicy(sps)}
    with pytest.raises(PolicyError, match="both modes"):
        server_policy_for(both, "HeartRate", ATTRIBUTES, {"ts": {"PHI"}})


def test_an_unresolved_tag_pattern_never_decides() -> None:
    """Deny by default: a TAGGED sp that skipped resolution makes the policy unusable."""
    sps = parse_policy(PHI_ONLY_FOR_DOCTORS, ts=1).sps
    with pytest.raises(PolicyError):
        label_for(
            parse_policy(HEART, ts=5), "HeartRate", 1, ATTRIBUTES, HIERARCHY, ServerPolicy(sps)
        )
    with pytest.raises(PolicyError):
        compile_rules(parse_policy(HEART, ts=5), "HeartRate", ATTRIBUTES, CODEC, ServerPolicy(sps))


def test_resolution_keeps_named_sps_and_drops_untagged_ones() -> None:
    sps = parse_policy(PHI_ONLY_FOR_DOCTORS, ts=1).sps
    (rest,) = resolve_tags(sps, ATTRIBUTES, {})
    assert rest.ddp.attributes == one_of(ATTRIBUTES)
    (phi, rest) = resolve_tags(sps, ATTRIBUTES, {"ts": {"PHI"}, "temperature": {"PHI", "PII"}})
    assert phi.ddp.attributes == one_of(["temperature", "ts"])
    assert rest.ddp.attributes == one_of(["patient_id", "beats_per_min"])
    (phi,) = resolve_tags(sps, ATTRIBUTES, {a: {"PHI"} for a in ATTRIBUTES})  # no rest left
    assert phi.ddp.attributes == one_of(ATTRIBUTES)


def test_cql_tagged_syntax() -> None:
    (one, rest, several) = parse_statements(
        "INSERT SP INTO STREAM S LET DDP = ATTRIBUTES: TAGGED phi, SRP = rbac:C;"
        "INSERT SP INTO STREAM S LET DDP = ATTRIBUTES: not tagged PHI, SRP = rbac:C;"
        "INSERT SP INTO STREAM S LET DDP = ATTRIBUTES: TAGGED {PHI, pii} AND TUPLES: *,"
        " SRP = rbac:C"
    )
    assert one.ddp.attributes == Tagged(frozenset({"PHI"}))
    assert several.ddp.attributes == Tagged(frozenset({"PHI", "PII"}))
    assert rest.ddp.attributes == Tagged(frozenset({"PHI"}), negated=True)
    assert to_cql(rest.punctuation(1, 1)).count("NOT TAGGED PHI") == 1
    text = to_cql(several.punctuation(1, 1), "S")
    assert "TAGGED {PHI, PII}" in text and parse_statements(text)[0].ddp == several.ddp
    # an attribute named like the keyword is quoted, as every keyword
    (quoted,) = parse_statements(
        'INSERT SP INTO STREAM S LET DDP = ATTRIBUTES: "tagged", SRP = rbac:C'
    )
    assert not isinstance(quoted.ddp.attributes, Tagged)
    for bad in (
        "INSERT SP INTO STREAM S LET DDP = TUPLES: TAGGED PHI, SRP = rbac:C",
        "INSERT SP INTO STREAM S LET DDP = ATTRIBUTES: TAGGED {}, SRP = rbac:C",
        "INSERT SP INTO STREAM S LET DDP = ATTRIBUTES: TAGGED P-HI, SRP = rbac:C",
        "INSERT SP INTO STREAM S LET DDP = ATTRIBUTES: TAGGED " + "X" * 65 + ", SRP = rbac:C",
    ):
        with pytest.raises(CqlError):
            parse_statements(bad)


def test_definition_tags_are_checked_and_stored_upper_case() -> None:
    attributes = (("id", "bigint"), ("dx", "string"), ("name", "string"))
    definition = StreamDefinition(
        "S", attributes, "id", tags={"name": ["pii"], "dx": ["Phi", "PII"]}
    )
    assert definition.tags == (("dx", frozenset({"PHI", "PII"})), ("name", frozenset({"PII"})))
    assert definition.tagged({"PII"}) == ("dx", "name") and definition.tagged({"X"}) == ()
    assert StreamDefinition("S", attributes, "id").tags == ()
    assert definition.retagged({}) == StreamDefinition("S", attributes, "id")
    assert tag_name("phi") == "PHI"
    for bad in ({"nope": ["PHI"]}, {"dx": "PHI"}, {"dx": ["two words"]}, {"dx": [""]}):
        with pytest.raises(ValueError):
            StreamDefinition("S", attributes, "id", tags=bad)
