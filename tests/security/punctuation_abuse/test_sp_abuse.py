"""Threat: a provider abusing punctuations (sps) and the policy fields of its tuples.

The class: any element with which a provider would decide for data that is not its own,
or make a tuple pass under a policy it was not sent with: sps on another provider's
channel (another name, a name that merely starts like hers, another stream than the
request's), sps naming other streams in their DDP, fields the engine computes forged in
the wire format (``reason``, ``policy_id``, ``_ss_`` labels, a server-policy flag),
replayed or reordered elements, tuples declaring a policy that is missing, incomplete or
not the newest, and oversized patterns. Checks: the API gate (``server/element_gate.py``:
stream of the path, provider is the caller or ``<caller>.*``, INJECT SP for sps), the
strict wire format (unknown fields refused, and what lands is re-serialised from the
parsed element), the landing zone (increasing seq per channel, pattern limits), and the
shield (per-channel state; a tuple passes only under the exact, complete, newest
policy it declares). No JVM: the shield here is the reference one, which the Spark
ingest matches (``tests/security/label_propagation/test_ingest_fuzz.py``).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from streamshield.examples import hospital
from streamshield.examples.hospital_catalog import hospital_catalog
from streamshield.landing import LandingZone
from streamshield.lang.cql import parse_policy
from streamshield.policy.elements import Channel, SpElement, TupleElement
from streamshield.policy.shield import Reason, SecurityShield
from streamshield.server.element_gate import append_checked

SP = {
    "type": "sp",
    "stream": "HeartRate",
    "provider": "alice",
    "seq": 1,
    "ts": 100,
    "sn": 1,
    "ddp": {"streams": "HeartRate", "tuples": "*", "attributes": "*"},
    "srp": {"roles": "{C, ND}", "grant_option": False},
    "sign": "+",
    "immutable": False,
}
TUPLE = {
    "type": "tuple",
    "stream": "HeartRate",
    "provider": "alice",
    "seq": 2,
    "tid": 120,
    "policy": {"ts": 100, "csn": 1},
    "values": {"patient_id": 120, "beats_per_min": 81.0, "ts": 1700000000},
}


@pytest.fixture
def zone(tmp_path: Path) -> LandingZone:
    return LandingZone(tmp_path / "land", hospital_catalog(tmp_path / "catalog.db"))


def send(zone: LandingZone, *elements: dict, user: str = "alice", stream: str = "HeartRate"):
    lines = [json.dumps(e) for e in elements]
    return append_checked(zone, user, stream, lines, may_write=True, may_inject=True)


def landed_text(zone: LandingZone) -> str:
    return "".join(p.read_text() for p in zone.root.glob("*/*.jsonl"))


@pytest.mark.parametrize(
    ("provider", "reason"),
    [
        ("bob", "provider_not_yours"),
        ("alice2", "provider_not_yours"),  # starts like hers, is not hers
        ("Alice", "provider_not_yours"),
        ("bob.alice", "provider_not_yours"),
        (".alice", "provider_not_yours"),
        ("alice/../bob", "provider_not_yours"),
        ("alice./../bob", "invalid_provider"),
        ("alice.ward\n", "invalid_provider"),
    ],
)
def test_no_sp_or_tuple_on_another_providers_channel(zone, provider, reason) -> None:
    report = send(zone, {**SP, "provider": provider}, {**TUPLE, "provider": provider})
    assert report.accepted == 0
    assert [r.reason for r in report.rejected] == [reason, reason]
    assert landed_text(zone) == ""


def test_her_own_channels_are_hers(zone) -> None:
    report = send(zone, SP, TUPLE, {**SP, "provider": "alice.ward-2"})
    assert report.accepted == 3 and report.rejected == []


def test_no_element_for_another_stream_than_the_request_names(zone) -> None:
    report = send(zone, SP, TUPLE, stream="BodyTemperature")
    assert [r.reason for r in report.rejected] == ["stream_mismatch"] * 2


@pytest.mark.parametrize(
    "forged",
    [
        {**TUPLE, "reason": "pass"},
        {**TUPLE, "policy_id": "p0000000000000000"},
        {**TUPLE, "_ss_r0_0": -1},
        {**TUPLE, "labels": {"readers": "*"}},
        {**TUPLE, "values": {**TUPLE["values"], "_ss_masked": []}},
        {**TUPLE, "values": {**TUPLE["values"], "reason": "pass"}},
        {**TUPLE, "policy": {"ts": 100, "csn": 1, "id": "p0"}},
        {**SP, "server": True},
        {**SP, "srp": {**SP["srp"], "privilege": "grant"}},
        {**SP, "sign": "+", "srp": {**SP["srp"], "roles": "{C, ND, ROOT}"}},
    ],
    ids=[
        "reason",
        "policy-id",
        "label-column",
        "labels",
        "masked-value",
        "reason-value",
        "policy-id-field",
        "server-flag",
        "grant-privilege",
        "unknown-role",
    ],
)
def test_fields_the_engine_computes_cannot_be_sent(zone, forged) -> None:
    report = send(zone, forged)
    assert report.accepted == 0 and len(report.rejected) == 1
    assert "pass" not in report.rejected[0].message
    assert landed_text(zone) == ""


def test_what_lands_is_the_parsed_element_not_the_sent_text(zone) -> None:
    sent = json.dumps(SP).replace('"type": "sp"', '"type": "sp", "type": "sp"')
    report = append_checked(zone, "alice", "HeartRate", [sent], may_write=True, may_inject=True)
    assert report.accepted == 1
    [line] = landed_text(zone).splitlines()
    assert json.loads(line).keys() == SP.keys() and line.count('"type"') == 1


def test_replayed_and_reordered_elements_do_not_land(zone) -> None:
    assert send(zone, SP, TUPLE).accepted == 2
    report = send(zone, SP, {**TUPLE, "seq": 2}, {**SP, "seq": 1, "ts": 200})
    assert [r.reason for r in report.rejected] == ["seq_not_increasing"] * 3


@pytest.mark.parametrize(
    ("field", "pattern"),
    [
        ("roles", "*" + "a" * 200 + "*"),  # glob longer than 128 characters
        ("roles", "{" + ", ".join(f"R{i}" for i in range(1100)) + "}"),  # > 1024 members
        ("attributes", '"' + "x" * 2000 + '"'),  # literal longer than 1024 characters
        ("tuples", "[1, " + "9" * 5000 + "]"),  # a number Python cannot read
    ],
    ids=["long-glob", "huge-set", "long-literal", "huge-number"],
)
def test_oversized_patterns_are_refused_without_echo(zone, field, pattern) -> None:
    sp = {**SP, "srp": {**SP["srp"]}, "ddp": {**SP["ddp"]}}
    (sp["srp"] if field == "roles" else sp["ddp"])[field] = pattern
    report = send(zone, sp)
    assert report.accepted == 0
    [rejection] = report.rejected
    assert len(rejection.message) < 300 and "aaaaaaaaaa" not in rejection.message
    assert "xxxxxxxxxx" not in rejection.message and "99999999" not in rejection.message


# -- the shield: what a provider's sps can and cannot decide ---------------------------------

GRANT_ALL = "INSERT SP INTO STREAM HeartRate LET DDP = STREAMS: *, SRP = rbac:*"
NURSES = "INSERT SP INTO STREAM HeartRate LET DDP = STREAMS: HeartRate, SRP = rbac:ND"


def reading(channel: Channel, seq: int, ts: int, csn: int) -> TupleElement:
    values = {"patient_id": 120, "beats_per_min": 81.0, "ts": 5}
    return TupleElement(channel, seq, 120, ts, csn, values)


def decisions(elements, roles=("INS",)) -> dict:
    shield = SecurityShield(hospital.hierarchy(), list(roles), hospital.SCHEMAS, {})
    return {
        (d.element.channel.provider, d.element.seq): d.reason for d in shield.decisions(elements)
    }


def sps(channel: Channel, text: str, ts: int, first_seq: int) -> list[SpElement]:
    policy = parse_policy(text, ts=ts)
    return [SpElement(channel, first_seq + i, sp) for i, sp in enumerate(policy.sps)]


def test_an_sp_governs_its_own_channel_only() -> None:
    """Alice's sp granting every role on every stream does not reach Bob's tuples, on
    the same stream, even when it comes first, is immutable, or names Bob's stream."""
    alice, bob = Channel("HeartRate", "alice"), Channel("HeartRate", "bob")
    hostile = sps(alice, GRANT_ALL, 100, 1)
    hostile.append(SpElement(alice, 2, replace(hostile[0].sp, immutable=True, ts=200)))
    bobs = [*sps(bob, NURSES, 100, 1), reading(bob, 2, 100, 1), reading(bob, 3, 200, 1)]
    alone = decisions(bobs)
    mixed = decisions(hostile[:1] + bobs[:1] + hostile[1:] + bobs[1:])
    assert alone == {("bob", 2): Reason.NOT_AUTHORIZED, ("bob", 3): Reason.OUT_OF_ORDER}
    assert {k: v for k, v in mixed.items() if k[0] == "bob"} == alone


def test_a_tuple_passes_only_under_the_exact_newest_complete_policy() -> None:
    channel = Channel("HeartRate", "alice")
    v1 = sps(channel, f"{GRANT_ALL};\n{NURSES}", 100, 1)  # two sps: csn 2
    v2 = sps(channel, NURSES, 300, 9)
    elements = [
        *v1,
        reading(channel, 4, 100, 2),  # the exact policy: passes
        reading(channel, 5, 100, 1),  # declares fewer sps than were sent
        reading(channel, 6, 100, 3),  # declares more
        reading(channel, 7, 200, 1),  # a policy that was never sent
        reading(channel, 8, 100, 2),  # after a forged declaration: denied (fail closed)
        *v2,
        SpElement(channel, 10, v1[0].sp),  # a stale sp replayed under a new seq
        reading(channel, 11, 300, 1),  # still governed by the newest policy
        reading(channel, 12, 100, 2),  # the older policy after a newer one
    ]
    early = Channel("HeartRate", "alice.early")  # a tuple before its policy is complete
    v3 = sps(early, f"{GRANT_ALL};\n{NURSES}", 100, 1)
    elements += [v3[0], reading(early, 3, 100, 2), SpElement(early, 4, v3[1].sp)]
    elements.append(reading(early, 5, 100, 2))  # the late sp does not complete it
    got = decisions(elements)
    assert got[("alice", 4)] == Reason.PASS and got[("alice", 11)] == Reason.NOT_AUTHORIZED
    denied = [got[("alice", seq)] for seq in (5, 6, 7, 8, 12)]
    denied += [got[("alice.early", 3)], got[("alice.early", 5)]]
    assert Reason.PASS not in denied, denied
    assert decisions(elements, roles=("ND",))[("alice", 11)] == Reason.PASS
