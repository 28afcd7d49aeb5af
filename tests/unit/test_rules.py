"""Compiled rules (what Spark evaluates) decide exactly like ``label_for``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamshield.lang.cql import parse_policy
from streamshield.policy.encoding import RoleCodec
from streamshield.policy.policy import Combine, Policy, PolicyError, ServerPolicy, label_for
from streamshield.policy.rules import compile_rules, evaluate, label_words
from tests.unit.strategies import ATTRIBUTES, HIERARCHY, ROLES, TIDS, policies

CODEC = RoleCodec(HIERARCHY)
tids = st.one_of(st.sampled_from(TIDS), st.sampled_from(["120", "x", "125.0", "-3"]))


@given(
    provider=policies(ts=5),
    server=st.one_of(st.none(), policies(ts=1)),
    mode=st.sampled_from(Combine),
    tid=tids,
    stream=st.sampled_from(["HeartRate", "BodyTemperature"]),
    activated=st.sets(st.sampled_from(ROLES), min_size=1, max_size=3),
)
def test_rules_agree_with_label_for(provider, server, mode, tid, stream, activated) -> None:
    policy = Policy.of(provider)
    srv = ServerPolicy(tuple(server), mode) if server else None
    expected = CODEC.label(label_for(policy, stream, tid, ATTRIBUTES, HIERARCHY, srv))
    got = evaluate(compile_rules(policy, stream, ATTRIBUTES, CODEC, srv), tid)
    query = CODEC.query(activated)
    assert got.tuple_access.allows(query) == expected.tuple_access.allows(query)
    assert got.visible_attributes(query) == expected.visible_attributes(query)
    assert got == expected


@given(
    provider=policies(ts=5),
    server=st.one_of(st.none(), policies(ts=1)),
    mode=st.sampled_from(Combine),
    tid=st.one_of(st.none(), tids),
    stream=st.sampled_from(["HeartRate", "BodyTemperature"]),
)
def test_label_words_are_evaluate_in_label_column_order(provider, server, mode, tid, stream):
    """The driver's fast path for constant policies stores exactly evaluate's words."""
    srv = ServerPolicy(tuple(server), mode) if server else None
    rules = compile_rules(Policy.of(provider), stream, ATTRIBUTES, CODEC, srv)
    label = evaluate(rules, tid)
    expected = [
        word
        for access in (label.tuple_access, *(label.attributes[a] for a in ATTRIBUTES))
        for pair in zip(access.readers, access.denied, strict=True)
        for word in pair
    ]
    assert label_words(rules, tid) == expected


def test_unknown_role_fails_compilation() -> None:
    policy = parse_policy("INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:X", 3)
    with pytest.raises(PolicyError):
        compile_rules(policy, "HeartRate", ATTRIBUTES, CODEC)


def test_rules_of_other_streams_are_dropped() -> None:
    policy = parse_policy("INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:C", 3)
    assert compile_rules(policy, "BodyTemperature", ATTRIBUTES, CODEC).rules == ()
