"""Conformance: the Spark engine passes exactly what the reference shield passes."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamshield.examples import hospital
from streamshield.lang.cql import parse_policy
from streamshield.policy.elements import Channel
from streamshield.policy.policy import Combine, ServerPolicy
from tests.spark.conformance import (
    STREAMS,
    reference,
    reference_batches,
    spark_labelled,
    spark_outcome,
)
from tests.unit.strategies import ROLES
from tests.unit.test_shield import perturbed

pytestmark = pytest.mark.spark
ROLE_SETS = [["C"], ["GP"], ["ND"], ["ER"], ["INS"], ["E"], ["ND", "GP"], ["DM", "ER"]]


def _split(elements, cuts):
    bounds = sorted({0, len(elements), *(c % (len(elements) + 1) for c in cuts)})
    return [elements[a:b] for a, b in pairwise(bounds)]


@pytest.mark.parametrize("cuts", [[], [7], [3, 20, 31]], ids=["one-batch", "two", "four"])
def test_hospital_example_conforms(spark, tmp_path, cuts) -> None:
    elements = hospital.elements()
    labelled = spark_labelled(spark, tmp_path, _split(elements, cuts))
    for roles in ROLE_SETS:
        assert spark_outcome(labelled, roles) == reference(elements, roles), roles


def _renumbered(elements, stream: str, provider: str) -> list:
    """Channel order is ``seq`` order: after perturbing, seq must follow the list again."""
    channel = Channel(stream, provider)
    return [replace(e, channel=channel, seq=i) for i, e in enumerate(elements, 1)]


@st.composite
def two_channel_feeds(draw):
    a = _renumbered(draw(perturbed()), "HeartRate", "ward-A")
    b = _renumbered(
        draw(perturbed()), draw(st.sampled_from(["HeartRate", "BodyTemperature"])), "ward-B"
    )
    order = draw(st.lists(st.booleans(), max_size=len(a) + len(b)))
    merged, ia, ib = [], list(a), list(b)
    for take_a in order:
        source = ia if take_a else ib
        if source:
            merged.append(source.pop(0))
    return merged + ia + ib


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    elements=two_channel_feeds(),
    cuts=st.lists(st.integers(0, 40), max_size=2),
    roles=st.sets(st.sampled_from(ROLES), min_size=1, max_size=2),
)
def test_random_channels_conform(spark, tmp_path_factory, elements, cuts, roles) -> None:
    """Random interleavings, missing, duplicated, reordered sps and forged declarations,
    two channels (of one stream or of two), several micro-batches, and the shield state
    saved and reloaded between batches as on a restart."""
    tmp = tmp_path_factory.mktemp("conf")
    labelled = spark_labelled(spark, tmp, _split(elements, cuts), server={})
    assert spark_outcome(labelled, roles) == reference(elements, roles, server={})


PHI_FOR_DOCTORS = (
    "INSERT SP INTO STREAM LET DDP = ATTRIBUTES: TAGGED PHI, SRP = rbac:D;"
    "INSERT SP INTO STREAM LET DDP = ATTRIBUTES: NOT TAGGED {PHI, PII}, SRP = rbac:E"
)
PHI_FOR_THE_INSURER = (
    "INSERT SP INTO STREAM LET DDP = ATTRIBUTES: TAGGED {PHI, PII}, SRP = rbac:INS"
)


def _tagged(tags_by_stream: dict[str, dict[str, list[str]]]) -> dict:
    """Every hospital stream's definition, with these tags (the others' cleared)."""
    return {n: d.retagged(tags_by_stream.get(n, {})) for n, d in STREAMS.items()}


RETAGGING = [
    _tagged({"HeartRate": {"beats_per_min": ["PHI"]}, "BreathingRate": {"frequency": ["PHI"]}}),
    _tagged({}),  # no attribute carries PHI or PII: the TAGGED sps cover nothing
    _tagged({"BodyTemperature": {"temperature": ["phi"], "patient_id": ["PII"]}}),
]
TAG_ROLE_SETS = [["ND"], ["INS"], ["GP", "ER"]]


@pytest.mark.parametrize(
    ("server", "mode"),
    [
        ({"*": PHI_FOR_DOCTORS, "BreathingRate": None}, Combine.INTERSECT),
        # UNION on HeartRate and BodyTemperature; BreathingRate under both modes
        ({"*": PHI_FOR_THE_INSURER, "BreathingRate": None}, Combine.UNION),
    ],
    ids=["intersect", "union-and-both-modes"],
)
def test_tag_policies_conform_as_tags_change_between_batches(spark, tmp_path, server, mode):
    """A ``*``-scoped TAGGED policy (with the hospital's own BreathingRate policy, which
    is INTERSECT: under a UNION tag policy that stream is under both modes, and both
    engines deny its tuples), the streams retagged between micro-batches: each batch is
    labelled under the tags in force when it is, on Spark exactly as in the reference."""
    policies = {
        scope: (
            hospital.server_policies()[scope]
            if text is None
            else ServerPolicy(parse_policy(text, ts=1).sps, mode)
        )
        for scope, text in server.items()
    }
    elements = hospital.elements()
    batches = _split(elements, [12, 24])
    labelled = spark_labelled(spark, tmp_path, batches, server=policies, definitions=RETAGGING)
    for roles in TAG_ROLE_SETS:
        expected = reference_batches(batches, roles, policies, RETAGGING)
        assert spark_outcome(labelled, roles) == expected, roles
    # the tags made a difference: somebody sees another attribute set than untagged
    untagged = [RETAGGING[1]] * len(batches)
    assert any(
        reference_batches(batches, roles, policies, untagged)
        != reference_batches(batches, roles, policies, RETAGGING)
        for roles in TAG_ROLE_SETS
    )
