"""Every query shape carries what its recipients are checked against: the recipient decides.

A cardiologist's (C) queries over the hospital example are delivered, through the real
Delivery, to a nurse (ND: HeartRate ids and beats only; BodyTemperature temperatures,
not ids) and to the cardiologist herself. The nurse must get exactly what the same
query registered with her own role delivers to her: per shape (plain selection,
expression, CQL window, join) the labels the output carries must be enough for that.
"""

from __future__ import annotations

import pytest

from streamshield.engine.delivery.delivery import Delivery
from streamshield.engine.queries.streaming_queries import CallbackSink
from streamshield.policy.provenance import Rights
from tests.spark.conftest import spark  # noqa: F401 (the session fixture)
from tests.spark.hospital_pipeline import hospital_pipeline

pytestmark = pytest.mark.spark

SHAPES = {
    "selection": "SELECT patient_id, beats_per_min, ts FROM HeartRate",
    "expression": "SELECT patient_id, beats_per_min + ts AS mixed FROM HeartRate",
    "chosen_by_ts": "SELECT patient_id FROM HeartRate WHERE ts > 0",
    "window": "SELECT patient_id, beats_per_min, ts FROM HeartRate [ROWS 100]",
    "join": (
        "SELECT h.patient_id AS pid, h.beats_per_min AS hr, b.temperature AS temp "
        "FROM HeartRate [ROWS 100] h JOIN BodyTemperature [ROWS 100] b "
        "ON h.patient_id = b.patient_id"
    ),
}


@pytest.fixture(scope="module")
def pipeline(spark, tmp_path_factory):  # noqa: F811
    yield from hospital_pipeline(spark, tmp_path_factory.mktemp("recipients"))


class Inbox:
    def __init__(self) -> None:
        self.rows: list[dict] = []

    def __call__(self, rows: list[dict]) -> None:
        self.rows.extend(rows)


def _delivered(pipeline, sql: str, query_roles: list[str], to: dict[str, list[str]]) -> dict:
    """Runs ``sql`` with ``query_roles``; what each recipient (session -> roles) gets."""
    codec = pipeline.queries.codec
    every = Rights(frozenset(pipeline.queries.streams))
    delivery = Delivery(
        lambda _user: every,
        pipeline.queries.provenance,
        roles=lambda s: codec.query(to[s.session]),
    )
    delivery.query_mask = lambda: codec.query(query_roles)
    inboxes = {session: Inbox() for session in to}
    for session, inbox in inboxes.items():
        delivery.subscribe(session, inbox, session)
    query = pipeline.cql.submit(pipeline.cql.admit(sql, query_roles), CallbackSink(delivery))
    query.process_all_available()
    pipeline.cql.stop(query.name)
    return {session: _canonical(inbox.rows) for session, inbox in inboxes.items()}


def _canonical(rows: list[dict]) -> list[tuple]:
    return sorted((tuple(sorted(r.items(), key=str)) for r in rows), key=str)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_nurse_gets_from_a_shared_query_what_her_own_returns(pipeline, shape) -> None:
    sql = SHAPES[shape]
    shared = _delivered(pipeline, sql, ["C"], {"nurse": ["ND"], "cardiologist": ["C"]})
    own = _delivered(pipeline, sql, ["ND"], {"nurse": ["ND"]})
    assert shared["nurse"] == own["nurse"], shape
    if shape != "join":  # nurses never read BodyTemperature's join key: no pair at all
        assert shared["cardiologist"], "the owner's own rows exist"
    assert len(shared["nurse"]) <= len(shared["cardiologist"])
    for row in map(dict, shared["nurse"]):
        assert row.get("ts") is None, "nurses never read HeartRate's ts"
        assert row.get("mixed") is None, "an expression over ts is masked"
