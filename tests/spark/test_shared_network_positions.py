"""Branches of a shared network join, leave, rejoin, fail and replay without losing or
repeating a row (issue 12, item 2).

The network is the one CqlService runs for every selection over HeartRate. Each query's
rows, summed over everything its branch was handed, must equal what the same query
registered as a streaming query of its own returns over the whole stream: a late joiner
gets the history, a branch that left gets exactly what it missed, a replayed micro-batch
nothing twice, and one failing branch stops alone.
"""

from __future__ import annotations

import pytest

from streamshield.engine.pipeline import Pipeline
from streamshield.engine.queries import CallbackSink, QueryFailed
from streamshield.examples import hospital
from tests.spark.hospital_pipeline import Rows, hospital_pipeline, land

pytestmark = pytest.mark.spark

QUERIES = {
    "cardio": ("SELECT patient_id, beats_per_min, ts FROM HeartRate WHERE patient_id >= 120", "C"),
    "nurse": ("SELECT patient_id, beats_per_min FROM HeartRate WHERE patient_id >= 120", "ND"),
}


@pytest.fixture
def pipeline(spark, tmp_path):
    yield from hospital_pipeline(spark, tmp_path, [])


def parts() -> list[list]:
    """The example's elements in three consecutive parts, each with HeartRate tuples (its
    18 elements come first; every channel stays in order)."""
    elements = hospital.elements()
    return [elements[:6], elements[6:12], elements[12:]]


def submit(pipeline: Pipeline, name: str, sink) -> object:
    text, role = QUERIES[name]
    return pipeline.cql.submit(text, [role], CallbackSink(sink), name=name)


def alone(pipeline: Pipeline, name: str) -> list[tuple]:
    """The query as a streaming query of its own, over everything stored."""
    text, role = QUERIES[name]
    rows = Rows()
    query = pipeline.queries.register(text, [role], CallbackSink(rows), f"alone_{name}")
    query.process_all_available()
    pipeline.queries.stop(query.name)
    return rows.sorted()


def networks(pipeline) -> list[str]:
    """Running networks (each runs in its level processor's session, not the test's)."""
    handles = [n.handle for n in pipeline.cql.networks.values() if n.handle is not None]
    return [h.name for h in handles if h.isActive]


def test_join_leave_and_rejoin_give_every_row_exactly_once(pipeline, spark) -> None:
    first, second, third = parts()
    cardio, nurse = Rows(), Rows()
    land(pipeline, first)
    submit(pipeline, "nurse", nurse).process_all_available()
    land(pipeline, second)
    joined = submit(pipeline, "cardio", cardio)  # joins a running network: catches up
    joined.process_all_available()
    assert networks(pipeline) == ["network-HeartRate"], "both queries run in one network"
    assert cardio.rows, "the late joiner got the stream's history"
    pipeline.cql.stop("cardio")  # leaves; the network goes on for the nurse
    seen = len(cardio.rows)
    land(pipeline, third)
    pipeline.queries.queries["nurse"].process_all_available()
    assert len(cardio.rows) == seen, "a branch that left is handed nothing"
    submit(pipeline, "cardio", cardio).process_all_available()  # rejoins: what it missed
    assert len(cardio.rows) > seen, "it got the rows stored while it was away"
    assert cardio.sorted() == alone(pipeline, "cardio")
    assert nurse.sorted() == alone(pipeline, "nurse")


def test_a_failing_branch_stops_alone(pipeline) -> None:
    land(pipeline, hospital.elements())

    def broken(_frame, _batch_id) -> None:
        raise RuntimeError("the sink is broken")

    cardio = Rows()
    healthy = submit(pipeline, "cardio", cardio)
    failing = submit(pipeline, "nurse", broken)
    with pytest.raises((QueryFailed, RuntimeError)):
        failing.process_all_available()
    healthy.process_all_available()
    assert not failing.active and failing.error() is not None
    assert healthy.active
    assert cardio.sorted() == alone(pipeline, "cardio")


def test_a_replayed_micro_batch_hands_nothing_twice(pipeline) -> None:
    first, second, _ = parts()
    land(pipeline, first)
    cardio = Rows()
    submit(pipeline, "cardio", cardio).process_all_available()
    land(pipeline, second)
    pipeline.queries.queries["cardio"].process_all_available()
    commits = pipeline.cql.networks[("HeartRate", "unlevelled")].root / "checkpoint" / "commits"
    pipeline.cql.stop("cardio")  # the last branch: the network stops
    assert ("HeartRate", "unlevelled") not in pipeline.cql.networks
    last = max((p for p in commits.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    last.unlink()  # as if the process died before Spark recorded the batch as done
    (commits / f".{last.name}.crc").unlink(missing_ok=True)
    handed = list(cardio.rows)
    submit(pipeline, "cardio", cardio).process_all_available()  # Spark replays that batch
    assert cardio.rows == handed, "the replay handed nothing again"
    assert cardio.sorted() == alone(pipeline, "cardio")
