"""Policies: csn and completeness, match/union/intersect, server-side combination."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamshield.lang.cql import parse_policy
from streamshield.policy.policy import (
    Access,
    Combine,
    Policy,
    PolicyError,
    ServerPolicy,
    label_for,
    match,
)
from tests.unit.strategies import ATTRIBUTES, HIERARCHY, ROLES, TIDS, policies

ATTRS = ("patient_id", "beats_per_min", "ts")


def sps(text: str, ts: int = 10):
    return parse_policy(text, ts).sps


def label(text: str, tid: object = 120, server: ServerPolicy | None = None, ts: int = 10):
    return label_for(parse_policy(text, ts), "HeartRate", tid, ATTRS, HIERARCHY, server)


def test_csn_counts_contiguous_sequence_numbers() -> None:
    one, two, three = sps("INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:C;" * 3)
    assert Policy.of([one, two, three]).csn == 3
    assert Policy.of([three, one, two]).sps == (one, two, three)
    assert Policy.of([one, three]).csn == 1
    assert Policy.of([two, three]).csn == 0
    assert Policy.of([one, two, three]).is_complete(3)
    assert not Policy.of([one, three]).is_complete(3)
    assert not Policy.of([one, two, three]).is_complete(2), "an extra sp is not trusted either"


def test_policy_rejects_conflicts_and_mixed_timestamps() -> None:
    (a,) = sps("INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:C")
    (b,) = sps("INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:GP")
    assert Policy.of([a, a]).sps == (a,), "a retransmitted sp is harmless"
    with pytest.raises(PolicyError, match="sequence number 1"):
        Policy.of([a, b])
    (late,) = sps("INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:C", ts=11)
    with pytest.raises(PolicyError, match="timestamp"):
        Policy.of([a, late.__class__(late.ddp, late.srp, late.sign, late.immutable, 11, 2)])
    with pytest.raises(PolicyError):
        Policy.of([])


def test_policy_id_is_content_based() -> None:
    text = "INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: [120, 133], SRP = rbac:{GP, C}"
    assert parse_policy(text, 10).policy_id == parse_policy(text, 99).policy_id
    other = text.replace("133", "134")
    assert parse_policy(text, 10).policy_id != parse_policy(other, 10).policy_id


def test_match_uses_stream_and_tuple_scope() -> None:
    (sp,) = sps("INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: [120, 133], SRP = rbac:GP")
    assert match(sp, "HeartRate", 125)
    assert not match(sp, "HeartRate", 140)
    assert not match(sp, "BodyTemperature", 125)


def test_stream_tuple_and_attribute_levels() -> None:
    stream_level = label(
        "INSERT SP INTO STREAM HeartRate LET DDP = STREAMS: HeartRate, SRP = rbac:C"
    )
    assert stream_level.visible(HIERARCHY.effective(["C"]))
    assert stream_level.visible_attributes(HIERARCHY.effective(["C"])) == set(ATTRS)
    assert not stream_level.visible(HIERARCHY.effective(["GP"]))

    tuple_level = "INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: [120, 133], SRP = rbac:GP"
    assert label(tuple_level, 133).visible(HIERARCHY.effective(["GP"]))
    assert not label(tuple_level, 134).visible(HIERARCHY.effective(["GP"]))

    attribute_level = label(
        "INSERT SP INTO STREAM HeartRate LET DDP = ATTRIBUTES: beats_per_min, SRP = rbac:{D, ND}"
    )
    nurse = HIERARCHY.effective(["ND"])
    assert attribute_level.visible_attributes(nurse) == {"beats_per_min"}
    assert attribute_level.visible_attributes(HIERARCHY.effective(["C"])) == {"beats_per_min"}
    assert not attribute_level.visible(HIERARCHY.effective(["E"]))


def test_grant_to_a_junior_reaches_seniors_and_deny_overrides() -> None:
    text = """
    INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:E;
    INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: 125, SRP = rbac:D, SIGN = NEGATIVE
    """
    for role in ("C", "GP", "ND", "E"):
        assert label(text, 120).visible(HIERARCHY.effective([role])), role
    assert not label(text, 125).visible(HIERARCHY.effective(["C"])), "C is a D: the deny wins"
    assert label(text, 125).visible(HIERARCHY.effective(["ND"]))
    assert not label(text, 125).visible(HIERARCHY.effective(["ND", "GP"])), "any denied role"


def test_attribute_deny_masks_only_that_attribute() -> None:
    text = """
    INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:D;
    INSERT SP INTO STREAM HeartRate LET DDP = ATTRIBUTES: ts, SRP = rbac:GP, SIGN = NEGATIVE
    """
    gp = HIERARCHY.effective(["GP"])
    assert label(text).visible_attributes(gp) == {"patient_id", "beats_per_min"}
    assert label(text).visible_attributes(HIERARCHY.effective(["C"])) == set(ATTRS)


def test_unknown_role_in_a_policy_makes_it_unusable() -> None:
    with pytest.raises(PolicyError, match="Surgeon"):
        label("INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:{C, Surgeon}")


def test_grant_on_attributes_the_stream_lacks_grants_nothing() -> None:
    lab = label("INSERT SP INTO STREAM HeartRate LET DDP = ATTRIBUTES: frequency, SRP = rbac:C")
    assert not lab.visible(HIERARCHY.effective(["C"]))


SERVER_E = ServerPolicy(sps("INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:E"))
PROVIDER = "INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:{GP, INS}"


def test_server_policy_intersect_narrows() -> None:
    lab = label(PROVIDER, server=SERVER_E)
    assert lab.visible(HIERARCHY.effective(["GP"]))
    assert not lab.visible(HIERARCHY.effective(["INS"]))


def test_server_policy_union_widens() -> None:
    union = ServerPolicy(SERVER_E.sps, Combine.UNION)
    assert label(PROVIDER, server=union).visible(HIERARCHY.effective(["ND"]))
    assert not label(PROVIDER, server=SERVER_E).visible(HIERARCHY.effective(["ND"]))


def test_immutable_sps_ignore_server_policy() -> None:
    immutable = PROVIDER.replace("rbac:{GP, INS}", "rbac:{GP, INS}, IMMUTABLE = TRUE")
    assert label(immutable, server=SERVER_E).visible(HIERARCHY.effective(["INS"]))


def test_server_policy_applies_only_to_objects_it_describes() -> None:
    narrow = ServerPolicy(
        sps("INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: 140, SRP = rbac:C")
    )
    assert label(PROVIDER, 120, narrow).visible(HIERARCHY.effective(["INS"]))
    assert not label(PROVIDER, 140, narrow).visible(HIERARCHY.effective(["INS"]))


def test_server_deny_narrows_mutable_grants() -> None:
    deny_gp = ServerPolicy(
        sps(
            "INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:E;"
            "INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:GP, SIGN = -"
        )
    )
    assert not label(PROVIDER, server=deny_gp).visible(HIERARCHY.effective(["GP"]))


access_sets = st.builds(
    Access, st.frozensets(st.sampled_from(ROLES)), st.frozensets(st.sampled_from(ROLES))
)
queries = st.frozensets(st.sampled_from(ROLES), min_size=1).map(HIERARCHY.effective)


@given(a=access_sets, b=access_sets, role=st.sampled_from(ROLES))
def test_union_and_intersect_per_role(a: Access, b: Access, role: str) -> None:
    """Paper 4.2, per role: union = either allows, intersect = both allow."""
    q = HIERARCHY.effective([role])
    a, b = (Access(HIERARCHY.readers(x.readers), HIERARCHY.readers(x.denied)) for x in (a, b))
    denied = bool(q & (a.denied | b.denied))
    assert a.union(b).allows(q) == ((a.allows(q) or b.allows(q)) if not denied else False)
    assert a.intersect(b).allows(q) == (a.allows(q) and b.allows(q))


@given(provider=policies(ts=5), server=policies(ts=1), q=queries, tid=st.sampled_from(TIDS))
def test_intersect_never_widens_and_union_never_narrows(provider, server, q, tid) -> None:
    policy = Policy.of(provider)
    alone = label_for(policy, "HeartRate", tid, ATTRIBUTES, HIERARCHY)
    narrowed = label_for(
        policy, "HeartRate", tid, ATTRIBUTES, HIERARCHY, ServerPolicy(tuple(server))
    )
    widened = label_for(
        policy, "HeartRate", tid, ATTRIBUTES, HIERARCHY, ServerPolicy(tuple(server), Combine.UNION)
    )
    assert narrowed.visible_attributes(q) <= alone.visible_attributes(q)
    assert not narrowed.visible(q) or alone.visible(q)
    assert alone.visible_attributes(q) <= widened.visible_attributes(q)
    assert not alone.visible(q) or widened.visible(q)


@given(provider=policies(ts=5), q=queries, tid=st.sampled_from(TIDS))
def test_visible_attributes_imply_visible_tuple(provider, q, tid) -> None:
    lab = label_for(Policy.of(provider), "HeartRate", tid, ATTRIBUTES, HIERARCHY)
    assert lab.visible(q) or not lab.visible_attributes(q)
    if not any(sp.sign.value == "+" for sp in provider):
        assert not lab.visible(q), "no grant, no access"


@given(policies(ts=3), st.integers(1, 2**63 - 1))
def test_a_policy_of_one_sp_in_a_list_is_the_policy_of_that_sp(sps: list, ts: int) -> None:
    """``Policy.of`` takes a one-sp list directly (the tracker's every policy at one sp per
    tuple): the same policy as from any other iterable of that sp."""
    for sp in sps:
        moved = sp.__class__(sp.ddp, sp.srp, sp.sign, sp.immutable, ts, sp.sn)
        for one in (sp, moved):
            direct = Policy.of([one])
            assert direct == Policy.of(iter([one])) == Policy.of((one,))
            assert direct.ts == one.ts and direct.sps == (one,)
            assert direct.policy_id == Policy.of(iter([one])).policy_id
            assert direct.is_complete(1) == Policy.of(iter([one])).is_complete(1)
