"""Secure ingest whose micro-batches a landing starts (engine/ingest/driven_ingest.py).

The rules of ingest as a streaming query must hold unchanged: the stored labels conform to
the reference shield, every landed tuple is stored exactly once across stops, restarts,
replays of a failed micro-batch and switches between the two ways of running, and a
landing starts its micro-batch at once, without waiting for a poll.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from streamshield.engine.ingest.ingest import Ingest
from streamshield.engine.ingest.ingest_job import IngestJob
from streamshield.engine.ingest.source_log import SourceLog
from streamshield.examples import hospital
from tests.polling import poll
from tests.spark.conformance import STREAMS, reference, spark_outcome, stored
from tests.spark.test_ingest_job import ROLE_SETS, chunks, crash_before_marker, land

pytestmark = pytest.mark.spark


def job(spark, landing: Path, root: Path, driven: bool = True) -> IngestJob:
    out = IngestJob(
        Ingest(spark, hospital.hierarchy(), STREAMS, hospital.server_policies()), landing, root
    )
    out.driven = driven
    return out


def run(spark, landing: Path, root: Path, driven: bool = True) -> IngestJob:
    ingest = job(spark, landing, root, driven)
    ingest.start(available_now=True, max_files=2).awaitTermination()
    return ingest


def tuples(spark, ingest: IngestJob) -> int:
    return sum(spark.read.parquet(str(ingest.store.path(s))).count() for s in STREAMS)


def landed_tuples(elements) -> int:
    return sum(1 for e in elements if hasattr(e, "tid"))


def test_driven_ingest_conforms_and_survives_restarts_and_switches(spark, tmp_path) -> None:
    """Files landed in three rounds, read driven, then by Spark's file source, then
    driven again, on one checkpoint: the labels are the reference shield's and no tuple
    is lost or read twice (the seen files come from the log either way)."""
    elements = hospital.elements()
    parts = chunks(elements, 4)
    landing, root = tmp_path / "landing", tmp_path / "root"
    rounds = [(parts[:3], True), (parts[3:6], False), (parts[6:], True)]
    batches: list[int] = []
    for number, (landed, driven) in enumerate(rounds):
        for part in landed:
            land(landing, part, elements.index(part[0]))
        resumed = run(spark, landing, root, driven)
        markers = resumed.store.markers()
        assert markers == list(range(len(markers))) and len(markers) > len(batches), number
        batches = markers
    for roles in ROLE_SETS:
        assert spark_outcome(stored(spark, resumed.store), roles) == reference(elements, roles)
    assert tuples(spark, resumed) == landed_tuples(elements), "lost or duplicated tuples"
    progress = resumed._driven.handle.lastProgress  # type: ignore[union-attr]
    assert progress["numInputRows"] > 0 and progress["durationMs"]["addBatch"] >= 0


def test_a_failed_micro_batch_is_replayed_with_its_own_files_and_id(
    spark, tmp_path, monkeypatch
) -> None:
    """The process 'dies' before batch 1's commit marker: the handle reports the failure,
    and the next start replays batch 1 with the files it was planned with (files landed
    since go to batch 2), giving what a run without the failure gives."""
    elements = hospital.elements()
    parts = chunks(elements, 4)
    landing = tmp_path / "landing"
    for i, part in enumerate(parts[:4]):
        land(landing, part, i)
    with crash_before_marker(monkeypatch, 1), pytest.raises(RuntimeError, match="simulated"):
        run(spark, landing, tmp_path / "root")
    planned = SourceLog(tmp_path / "root" / "checkpoints" / "ingest").files(1)
    assert planned, "batch 1 was planned before the crash"
    for i, part in enumerate(parts[4:], start=4):
        land(landing, part, i)
    recovered = job(spark, landing, tmp_path / "root")
    recovered.start(available_now=True).awaitTermination()
    log = SourceLog(recovered.checkpoint)
    assert log.files(1) == planned, "replayed with its own files"
    assert set(log.files(2) or []) - set(planned), "the files landed since in batch 2"
    for roles in (["C"], ["GP"], ["ND"]):
        assert spark_outcome(stored(spark, recovered.store), roles) == reference(elements, roles)
    assert tuples(spark, recovered) == landed_tuples(elements)


def test_a_landing_starts_the_micro_batch_without_waiting_for_a_poll(spark, tmp_path) -> None:
    """Polling once an hour, a running driven ingest labels a file as soon as it is told
    of it; processAllAvailable waits for every file landed when it is called; stop ends
    it between micro-batches."""
    elements = [e for e in hospital.elements() if e.channel.stream == "HeartRate"]
    landing = tmp_path / "landing"
    land(landing, elements[:6], 0)
    ingest = job(spark, landing, tmp_path / "root")
    handle = ingest.start(available_now=False, trigger_seconds=3600)
    try:
        handle.processAllAvailable()
        assert ingest.store.markers() == [0]
        land(landing, elements[6:], 1)
        ingest.wake()  # the only way before the hour's poll
        poll(lambda: ingest.store.markers() == [0, 1], timeout=120, every=0.05)
        assert handle.isActive and handle.exception() is None
    finally:
        handle.stop()
    assert not handle.isActive and handle.exception() is None
    assert tuples(spark, ingest) == landed_tuples(elements)
