"""Differential fuzz: the Spark ingest labels every tuple as the reference shield does.

The reference shield (``policy/shield.py``, pure Python, the paper's algorithm) is the
specification; the Spark ingest (``engine/ingest/ingest.py``: glob regexes, bitset labels,
state saved between micro-batches) is what runs. A random feed of sps and tuples goes
through both and every tuple's outcome is compared for several role sets: the reason
(pass, no policy, incomplete, out of order, ...), the policy id, and per attribute
whether the roles may read it.

The feeds use every pattern kind (any, literal, set, range, glob) on streams, tuple ids,
attributes and roles; grants and denials; mutable and immutable sps; grant options and
FOR STATISTICS; server-side policies in both combine modes; several channels of one or
two streams interleaved; and the attacks of a provider on its own channel: sps dropped,
duplicated, swapped (out of order), stale policies after newer ones, sps arriving after
their policy's first tuple, and tuples declaring a policy that is not the one in force.

Each case is its own set of channels (its providers are named after the case), so all
cases of a server configuration run through Spark together: one ingest run per
configuration, cut into micro-batches with the shield state saved and reloaded between
them, as on a restart.

CI runs ``DEFAULT_CASES`` cases with a fixed seed (under a minute). Nightly or by hand::

    STREAMSHIELD_FUZZ_CASES=2000 STREAMSHIELD_FUZZ_SEED=7 \\
        python -m pytest tests/security/label_propagation/test_ingest_fuzz.py

A mismatch names the case, the channel and the tuple; the same seed and case count
replay it (each case draws from its own generator, seeded from the run seed and its number).
"""

from __future__ import annotations

import os
import random
from dataclasses import replace
from itertools import pairwise

import pytest

from streamshield.engine.views import labels
from streamshield.examples import hospital
from streamshield.policy.elements import Channel, Element, SpElement, TupleElement
from streamshield.policy.encoding import RoleCodec
from streamshield.policy.policy import Combine, ServerPolicy
from streamshield.policy.privileges import Privilege
from streamshield.policy.punctuation import (
    DataDescription,
    SecurityPunctuation,
    SecurityRestriction,
    Sign,
)
from streamshield.policy.shield import Reason
from streamshield.policy.sp_patterns import ANY, Glob, Literal, OneOf, Range
from tests.spark.conformance import (
    LABELS_ALLOW_A_DENIED_TUPLE,
    Outcome,
    any_reader,
    reference,
    spark_labelled,
)
from tests.spark.conformance import STREAMS as DEFINITIONS

pytestmark = pytest.mark.spark

DEFAULT_CASES = 60
CASES = int(os.environ.get("STREAMSHIELD_FUZZ_CASES", DEFAULT_CASES))
SEED = int(os.environ.get("STREAMSHIELD_FUZZ_SEED", 20261123))

ROLES = hospital.hierarchy().roles
STREAMS = ("HeartRate", "BodyTemperature")
TIDS = (120, 125, 133, 140, 1201)
ROLE_SETS = [["C"], ["ND"], ["GP"], ["ER"], ["INS"], ["E"], ["DM", "ND"], ["D", "ER"]]


def _server_configs() -> list[dict[str, ServerPolicy]]:
    def sp(ddp: DataDescription, roles, sign=Sign.GRANT) -> SecurityPunctuation:
        return SecurityPunctuation(ddp, SecurityRestriction(roles), sign, ts=1)

    heart = DataDescription(Literal("HeartRate"), ANY, OneOf(frozenset(map(Literal, ("ts",)))))
    return [
        {},
        {  # the hospital narrows heart rates to employees, denying insurers outright
            "HeartRate": ServerPolicy(
                (sp(DataDescription(), Literal("E")), sp(heart, Literal("INS"), Sign.DENY)),
                Combine.INTERSECT,
            )
        },
        {  # the hospital widens temperatures of some patients to emergency responders
            "BodyTemperature": ServerPolicy(
                (sp(DataDescription(ANY, Range(120, 130), ANY), Glob("E*")),), Combine.UNION
            ),
            "HeartRate": ServerPolicy((sp(DataDescription(), Glob("?P")),), Combine.INTERSECT),
        },
    ]


def _pattern(rng: random.Random, universe: tuple, numeric: bool = False):
    kind = rng.choice(["any", "literal", "set", "range" if numeric else "glob"])
    if kind == "any":
        return ANY
    if kind == "literal":
        return Literal(rng.choice(universe))
    if kind == "set":
        return OneOf(
            frozenset(
                Literal(v) for v in rng.sample(universe, min(len(universe), rng.randint(2, 3)))
            )
        )
    if kind == "range":
        low = rng.choice([100, 120, 125, 134])
        return Range(low, low + rng.choice([0, 5, 13, 1200]))
    if numeric:
        raise AssertionError(kind)
    text = str(rng.choice(universe))
    return Glob(rng.choice([text[:1] + "*", "*" + text[-1:], text[:-1] + "?", "*", "?*"]))


def _tuple_pattern(rng: random.Random):
    if rng.random() < 0.2:  # tuple ids are matched as text by a glob too
        return Glob(rng.choice(["12*", "*0", "1?0", "*3*"]))
    return _pattern(rng, TIDS, numeric=True)


def _sp(rng: random.Random, ts: int, sn: int) -> SecurityPunctuation:
    attributes = hospital.SCHEMAS[rng.choice(STREAMS)].attributes
    ddp = DataDescription(
        _pattern(rng, STREAMS), _tuple_pattern(rng), _pattern(rng, tuple(attributes))
    )
    sign = Sign.DENY if rng.random() < 0.25 else Sign.GRANT
    grant = sign is Sign.GRANT and rng.random() < 0.3
    privilege = (
        Privilege.STATISTICS if sign is Sign.GRANT and rng.random() < 0.2 else Privilege.READ
    )
    srp = SecurityRestriction(_pattern(rng, ROLES), grant, privilege)
    return SecurityPunctuation(ddp, srp, sign, rng.random() < 0.3, ts=ts, sn=sn)


def _channel(rng: random.Random, channel: Channel) -> list[Element]:
    """A channel's honest feed, then its provider's tampering with it."""
    elements: list[Element] = []
    for index in range(rng.randint(1, 3)):
        ts = 100 * (index + 1) + rng.randint(0, 50)
        sps = [_sp(rng, ts, sn) for sn in range(1, rng.randint(1, 4) + 1)]
        elements += [SpElement(channel, 0, sp) for sp in sps]
        for _ in range(rng.randint(0, 4)):
            tid = rng.choice(TIDS)
            values = {a: None if rng.random() < 0.1 else tid for a in _attributes(channel)}
            values["patient_id"] = tid
            elements.append(TupleElement(channel, 0, tid, ts, len(sps), values))
    for _ in range(rng.randint(0, 4)):
        i = rng.randrange(len(elements))
        kind = rng.choice(["drop", "duplicate", "swap", "forge", "stale"])
        if kind == "drop" and len(elements) > 1:
            del elements[i]
        elif kind == "duplicate":
            elements.insert(i, elements[i])
        elif kind == "swap" and i + 1 < len(elements):
            elements[i], elements[i + 1] = elements[i + 1], elements[i]
        elif kind == "forge" and isinstance(elements[i], TupleElement):
            t = elements[i]
            ts = rng.choice([t.policy_ts + 1, t.policy_ts - 1, 1, t.policy_ts])
            elements[i] = replace(t, policy_ts=ts, policy_csn=rng.randint(0, 5))
        elif kind == "stale":  # an older policy's sp after a newer one
            elements.insert(i, SpElement(channel, 0, _sp(rng, rng.randint(1, 99), 1)))
    return [replace(e, seq=seq) for seq, e in enumerate(elements, 1)]


def _attributes(channel: Channel) -> tuple[str, ...]:
    return hospital.SCHEMAS[channel.stream].attributes


def _case(rng: random.Random, case: int) -> list[Element]:
    """One case: 1-3 channels of one or two streams, interleaved at random."""
    channels = [
        _channel(rng, Channel(rng.choice(STREAMS), f"case{case}-p{k}"))
        for k in range(rng.randint(1, 3))
    ]
    merged: list[Element] = []
    while any(channels):
        source = rng.choice([c for c in channels if c])
        merged.append(source.pop(0))
    return merged


def _batches(rng: random.Random, elements: list[Element]) -> list[list[Element]]:
    cuts = sorted({0, len(elements), *(rng.randrange(len(elements) + 1) for _ in range(2))})
    return [elements[a:b] for a, b in pairwise(cuts)]


def _outcomes(labelled: dict[str, list], role_sets: list[list[str]]) -> list[Outcome]:
    """``conformance.spark_outcome`` for every role set from one collect per frame."""
    codec = RoleCodec(hospital.hierarchy())
    out: list[Outcome] = [{} for _ in role_sets]
    for stream, frames in labelled.items():
        names = DEFINITIONS[stream].names
        for frame in frames:
            columns = [
                labels.allows(obj, codec.query(roles)).alias(f"_r{r}_{obj}")
                for r, roles in enumerate(role_sets)
                for obj in range(len(names) + 1)
            ]
            columns.append(any_reader(len(names), codec.width).alias("_any_reader"))
            for row in frame.select("provider", "seq", "reason", "policy_id", *columns).collect():
                for r, outcome in enumerate(out):
                    reason, attrs = row["reason"], frozenset[str]()
                    if reason == Reason.PASS.value:
                        if row[f"_r{r}_0"]:
                            attrs = frozenset(
                                n for i, n in enumerate(names, 1) if row[f"_r{r}_{i}"]
                            )
                        else:
                            reason = Reason.NOT_AUTHORIZED.value
                    elif row["_any_reader"]:  # the secured view reads labels, not reason
                        reason = LABELS_ALLOW_A_DENIED_TUPLE
                    key = (stream, row["provider"], row["seq"])
                    outcome[key] = (reason, attrs, row["policy_id"])
    return out


def _mismatches(expected: dict, actual: dict, seeds: dict[str, int]) -> list[str]:
    problems = []
    for key in sorted(set(expected) | set(actual), key=str):
        if expected.get(key) != actual.get(key):
            case = key[1].split("-")[0]
            problems.append(
                f"{case} (seed {seeds[case]}) {key}: reference {expected.get(key)}, "
                f"spark {actual.get(key)}"
            )
    return problems


@pytest.mark.parametrize("config", range(3), ids=["no-server", "server-narrows", "server-mixed"])
def test_spark_ingest_labels_as_the_reference_shield(spark, tmp_path, config) -> None:
    server = _server_configs()[config]
    elements: list[Element] = []
    seeds: dict[str, int] = {}
    for case in range(config, CASES, 3):
        seeds[f"case{case}"] = seed = SEED * 100_003 + case
        elements += _case(random.Random(seed), case)
    assert len(elements) > CASES  # the feed is not trivially empty
    labelled = spark_labelled(
        spark, tmp_path, _batches(random.Random(SEED + config), elements), server
    )
    outcomes = set()
    for roles, actual in zip(ROLE_SETS, _outcomes(labelled, ROLE_SETS), strict=True):
        expected = reference(elements, roles, server)
        problems = _mismatches(expected, actual, seeds)
        assert not problems, f"roles {roles}: " + "\n".join(problems[:20])
        outcomes |= {(reason, bool(attrs)) for reason, attrs, _ in expected.values()}
    # the feed reached every kind of decision, so the comparison covered them all
    assert {("pass", True), ("not authorized", False)} <= outcomes, outcomes
    assert {r for r, _ in outcomes} >= {
        "no policy",
        "incomplete policy",
        "out of order",
    } or CASES < 30
