"""Masked is not null: delivered rows name the columns hidden from the query's roles.

A channel of HeartRate lets nurses (ND) read patient ids and times but not heart rates,
which cardiologists (C) read too; one tuple has a real NULL heart rate. Selections,
expressions over a hidden attribute, ``*`` and a ``[ROWS n]`` window must say
``beats_per_min`` is masked for ND and never for C, whose NULL is a real one.
"""

from __future__ import annotations

import pytest

from streamshield.engine.pipeline import Pipeline
from streamshield.engine.queries.streaming_queries import CallbackSink
from streamshield.examples import hospital
from streamshield.examples.hospital_catalog import hospital_catalog
from streamshield.lang.cql import parse_policy
from streamshield.policy.elements import Channel, SpElement, TupleElement

pytestmark = pytest.mark.spark

POLICY = """
INSERT SP INTO STREAM HeartRate LET DDP = ATTRIBUTES: {patient_id, ts}, SRP = rbac:{C, ND};
INSERT SP INTO STREAM HeartRate LET DDP = ATTRIBUTES: beats_per_min, SRP = rbac:C
"""
CHANNEL = Channel("HeartRate", "ward-M")
PATIENTS = {901: 71.0, 902: 88.0, 903: None}  # 903: a real NULL


def elements() -> list:
    policy = parse_policy(POLICY, ts=70)
    out: list = [SpElement(CHANNEL, sp.sn, sp) for sp in policy.sps]
    for seq, (patient, rate) in enumerate(PATIENTS.items(), start=len(out) + 1):
        values = {"patient_id": patient, "beats_per_min": rate, "ts": 2000 + seq}
        out.append(TupleElement(CHANNEL, seq, patient, 70, policy.csn, values))
    return out


class Collect:
    def __init__(self) -> None:
        self.rows: list[dict] = []

    def __call__(self, frame, _batch) -> None:
        self.rows += [r.asDict(recursive=True) for r in frame.collect()]


@pytest.fixture(scope="module")
def pipeline(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("masked")
    pipeline = Pipeline(spark, hospital_catalog(root / "catalog.db"), root)
    result = pipeline.landing.append(hospital.elements() + elements())
    assert not result.rejected, result.rejected
    pipeline.ingest_available()
    yield pipeline
    for query in list(pipeline.queries.list()):
        pipeline.cql.stop(query.name)


def _rows(pipeline, text: str, roles: list[str]) -> dict[int, dict]:
    sink = Collect()
    query = pipeline.cql.submit(pipeline.cql.admit(text, roles), CallbackSink(sink))
    query.process_all_available()
    pipeline.cql.stop(query.name)
    return {r["patient_id"]: r for r in sink.rows if r.get("patient_id") in PATIENTS}


@pytest.mark.parametrize(
    "text",
    [
        "SELECT patient_id, beats_per_min FROM HeartRate",
        "SELECT h.patient_id, h.beats_per_min FROM HeartRate h WHERE h.ts > 0",
        "SELECT patient_id, beats_per_min FROM HeartRate [ROWS 50]",
        "SELECT patient_id, beats_per_min FROM HeartRate [NOW]",
    ],
)
def test_a_hidden_attribute_is_named_and_a_real_null_is_not(pipeline, text) -> None:
    nurse = _rows(pipeline, text, ["ND"])
    assert set(nurse) == set(PATIENTS)
    for row in nurse.values():
        assert row["beats_per_min"] is None and row["_ss_masked"] == ["beats_per_min"]
    cardiologist = _rows(pipeline, text, ["C"])
    assert {p: r["beats_per_min"] for p, r in cardiologist.items()} == PATIENTS
    assert all(r["_ss_masked"] == [] for r in cardiologist.values())  # 903's NULL is real


def test_expressions_are_masked_only_when_null_because_of_a_hidden_input(pipeline) -> None:
    text = (
        "SELECT patient_id AS pid_alias, patient_id, beats_per_min * 2 AS double_rate, "
        "coalesce(beats_per_min, -1.0) AS rate_or_default, beats_per_min AS rate, "
        "ts + 1 AS later FROM HeartRate"
    )
    nurse = _rows(pipeline, text, ["ND"])
    for row in nurse.values():
        assert row["_ss_masked"] == ["double_rate", "rate"], row
        assert row["rate_or_default"] == -1.0  # a value, though computed from a hidden one
    cardiologist = _rows(pipeline, text, ["C"])
    assert all(r["_ss_masked"] == [] for r in cardiologist.values())


def test_a_star_lists_every_hidden_attribute(pipeline) -> None:
    nurse = _rows(pipeline, "SELECT * FROM HeartRate", ["ND"])
    assert all(r["_ss_masked"] == ["beats_per_min"] for r in nurse.values())


def test_aggregates_carry_no_masked_list(pipeline) -> None:
    sink = Collect()
    query = pipeline.cql.submit(
        pipeline.cql.admit("SELECT count(beats_per_min) AS n FROM HeartRate", ["ND"]),
        CallbackSink(sink),
    )
    query.process_all_available()
    pipeline.cql.stop(query.name)
    assert sink.rows and all("_ss_masked" not in r for r in sink.rows)
