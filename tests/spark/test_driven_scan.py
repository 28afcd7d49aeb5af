"""A stream's scan driven by ingest's commits (engine/sharing/driven_scan.py).

With ``driven_scan`` on, no file-source streaming query reads a stream for its networks:
each committed ingest batch is handed to them at once, from the files its commit marker
lists, in micro-batches whose bookkeeping is the file source's own checkpoint format. The
rules of the streaming scan must hold unchanged: every row once per branch across joins,
leaves, rejoins and replays, a window network beside the selections, and a scan that
switches between the two ways of running resumes where the other stopped.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamshield.engine.ingest.file_source_log import FileSourceLog
from streamshield.engine.ingest.source_log import SourceLog
from streamshield.engine.pipeline import Pipeline
from streamshield.engine.queries.streaming_queries import CallbackSink
from streamshield.engine.sharing.driven_scan import DrivenScan
from streamshield.engine.store.retention import checkpoint_sources
from tests.spark.hospital_pipeline import (
    Rows,
    alone,
    hospital_pipeline,
    land,
    parts,
    submit,
)

pytestmark = pytest.mark.spark

KEY = ("HeartRate", "unlevelled")
WINDOW = "SELECT count(*) AS n FROM HeartRate [ROWS 2]"


@pytest.fixture
def pipeline(spark, tmp_path):
    for running in hospital_pipeline(spark, tmp_path, []):
        running.cql.tuning = replace(running.cql.tuning, driven_scan=True)
        yield running


def streaming_scans(pipeline: Pipeline) -> list[str]:
    """Spark streaming queries reading HeartRate for the networks."""
    sessions = {n.spark for n in pipeline.cql.networks.values()} | {
        n.spark for n in pipeline.cql.window_networks.values()
    }
    return [q.name for s in sessions for q in s.streams.active if "HeartRate" in (q.name or "")]


class Arrivals(Rows):
    """Rows, with an event set by every batch handed over."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived = threading.Event()

    def __call__(self, frame, batch_id) -> None:
        super().__call__(frame, batch_id)
        self.arrived.set()


def test_a_committed_batch_reaches_the_branch_at_once_without_a_streaming_query(
    pipeline,
) -> None:
    first, second, third = parts()
    land(pipeline, first)
    nurse = Arrivals()
    submit(pipeline, "nurse", nurse).process_all_available()
    network = pipeline.cql.networks[KEY]
    scan = pipeline.cql.scans[KEY]
    assert isinstance(scan, DrivenScan) and network.handle is scan.handle
    assert network.handle.isActive and streaming_scans(pipeline) == []
    assert nurse.rows, "the history was handed over"
    scan.poll_seconds = 3600.0  # no poll: only ingest's commit can start the next batch
    scan.wake.set()  # the wait under way ends; the next one is an hour
    for part in (second, third):
        nurse.arrived.clear()
        land(pipeline, part)
        assert nurse.arrived.wait(120), "ingest's commit handed the batch over"
    network.handle.processAllAvailable()  # its commit follows the hand-over
    newest = pipeline.queries.labelled.markers()[-1]
    log = SourceLog(scan.checkpoint)  # the file source's own format, read as before
    last = log.last_batch()
    assert log.ingest_ids(last) == frozenset({newest}) and log.position() == newest
    assert network.ledger.covered("nurse") == newest
    (source,) = checkpoint_sources(scan.checkpoint)  # what retention reads
    assert not source.planned and len(source.committed) == len(
        {p for b in range(last + 1) for p in (log.files(b) or ())}
    )
    progress = network.handle.lastProgress
    assert progress["batchId"] == last and progress["numInputRows"] > 0
    # the rates a streaming query reports, which the API, /metrics and the console show
    assert progress["processedRowsPerSecond"] > 0 and progress["inputRowsPerSecond"] > 0
    assert nurse.sorted() == alone(pipeline, "nurse")


def test_ingest_here_starts_the_scan_when_its_micro_batch_returns_not_at_its_marker(
    pipeline, monkeypatch
) -> None:
    """Ingest in the same process holds its batch until its micro-batch returns: the scan
    (polling every 0.1 s) leaves the batch though its marker exists, then reads it."""
    first, second, _ = parts()
    land(pipeline, first)
    nurse = Arrivals()
    submit(pipeline, "nurse", nurse).process_all_available()
    store = pipeline.queries.labelled
    saving, go = threading.Event(), threading.Event()
    save = pipeline.ingest.state.save

    def save_later(batch_id, states) -> None:  # ingest's micro-batch past its marker
        saving.set()
        assert go.wait(120)
        save(batch_id, states)

    monkeypatch.setattr(pipeline.ingest.state, "save", save_later)
    nurse.arrived.clear()
    ingest = threading.Thread(target=land, args=(pipeline, second))
    ingest.start()
    try:
        assert saving.wait(120)
        held = store.held()
        assert held is not None and store.committed(held), "its marker is written"
        assert not nurse.arrived.wait(1.5), "ten polls left the held batch alone"
    finally:
        go.set()
        ingest.join(120)
    assert nurse.arrived.wait(60), "the micro-batch's return handed the batch over"
    assert store.held() is None
    pipeline.cql.scans[KEY].handle.processAllAvailable()
    assert SourceLog(pipeline.cql.scans[KEY].checkpoint).position() == held
    assert nurse.sorted() == alone(pipeline, "nurse")


def test_join_leave_and_rejoin_give_every_row_exactly_once(pipeline) -> None:
    first, second, third = parts()
    cardio, nurse = Rows(), Rows()
    land(pipeline, first)
    submit(pipeline, "nurse", nurse).process_all_available()
    land(pipeline, second)
    joined = submit(pipeline, "cardio", cardio)  # joins a running scan: catches up
    joined.process_all_available()
    assert cardio.rows, "the late joiner got the stream's history"
    pipeline.cql.stop("cardio")
    seen = len(cardio.rows)
    land(pipeline, third)
    pipeline.queries.queries["nurse"].process_all_available()
    assert len(cardio.rows) == seen, "a branch that left is handed nothing"
    submit(pipeline, "cardio", cardio).process_all_available()  # rejoins: what it missed
    assert len(cardio.rows) > seen
    assert cardio.sorted() == alone(pipeline, "cardio")
    assert nurse.sorted() == alone(pipeline, "nurse")


def test_a_planned_micro_batch_is_replayed_with_its_own_files_and_id(pipeline) -> None:
    first, second, third = parts()
    land(pipeline, first)
    cardio = Rows()
    submit(pipeline, "cardio", cardio).process_all_available()
    land(pipeline, second)
    pipeline.queries.queries["cardio"].process_all_available()
    scan = pipeline.cql.scans[KEY]
    checkpoint = scan.checkpoint
    pipeline.cql.stop("cardio")  # the last branch: the scan stops
    log = FileSourceLog(checkpoint)
    last = log.last_batch()
    files = log.files(last)
    (checkpoint / "commits" / str(last)).unlink()  # killed before the commit
    land(pipeline, third)  # more is committed meanwhile: the replay must not take it
    handed = list(cardio.rows)
    submit(pipeline, "cardio", cardio).process_all_available()
    assert cardio.rows[: len(handed)] == handed
    assert log.files(last) == files, "replayed with exactly the files it was planned with"
    assert log.last_batch() == last + 1, "then the new batch under the next id"
    assert cardio.sorted() == alone(pipeline, "cardio"), "nothing twice, nothing lost"


def test_the_scan_switches_between_streaming_and_driven_without_loss_or_repeat(
    pipeline,
) -> None:
    first, second, third = parts()
    cardio = Rows()
    pipeline.cql.tuning = replace(pipeline.cql.tuning, driven_scan=False)
    land(pipeline, first)
    submit(pipeline, "cardio", cardio).process_all_available()
    assert streaming_scans(pipeline) == ["scan-HeartRate"]
    checkpoint = pipeline.cql.scans[KEY].checkpoint
    pipeline.cql.stop("cardio")
    spark_last = SourceLog(checkpoint).last_batch()

    pipeline.cql.tuning = replace(pipeline.cql.tuning, driven_scan=True)
    land(pipeline, second)
    submit(pipeline, "cardio", cardio).process_all_available()
    assert isinstance(pipeline.cql.scans[KEY], DrivenScan)
    assert pipeline.cql.scans[KEY].checkpoint == checkpoint, "the same checkpoint"
    pipeline.cql.stop("cardio")
    driven_last = SourceLog(checkpoint).last_batch()
    assert driven_last == spark_last + 1, "its ids go on from Spark's"

    pipeline.cql.tuning = replace(pipeline.cql.tuning, driven_scan=False)
    land(pipeline, third)
    submit(pipeline, "cardio", cardio).process_all_available()
    log = SourceLog(checkpoint)
    newest = pipeline.queries.labelled.markers()[-1]
    assert log.last_batch() == driven_last + 1
    assert log.ingest_ids(log.last_batch()) == frozenset({newest}), "Spark read only the new"
    assert cardio.sorted() == alone(pipeline, "cardio")


def test_selections_and_windows_share_one_driven_scan(pipeline) -> None:
    first, second, third = parts()
    land(pipeline, first)
    nurse, counts = Rows(), Rows()
    submit(pipeline, "nurse", nurse).process_all_available()
    land(pipeline, second)
    window = pipeline.cql.submit(
        pipeline.cql.admit(WINDOW, ["C"]), CallbackSink(counts), name="counts"
    )
    window.process_all_available()
    selections, windows = pipeline.cql.networks[KEY], pipeline.cql.window_networks[KEY]
    assert selections.scan is windows.scan is pipeline.cql.scans[KEY]
    assert selections.handle is windows.handle and streaming_scans(pipeline) == []
    assert counts.rows, "the window network had the history"
    pipeline.cql.stop("nurse")
    assert windows.handle.isActive
    handed = len(counts.rows)
    land(pipeline, third)
    window.process_all_available()
    assert len(counts.rows) > handed
    assert nurse.sorted() == alone(pipeline, "nurse")
    pipeline.cql.stop("counts")
    assert pipeline.cql.scans == {} and not windows.handle.isActive, "stopped with the last"
    pipeline.cql.tuning = replace(pipeline.cql.tuning, share_windows=False)
    own = Rows()
    pipeline.cql.submit(
        pipeline.cql.admit(WINDOW, ["C"]), CallbackSink(own), name="own"
    ).process_all_available()
    assert own.rows[-1] == counts.rows[-1], "the same window over the whole stream"


def test_spark_resumes_from_a_driven_log_past_its_compaction(spark, tmp_path) -> None:
    """Twelve driven micro-batches (a compact file at offset 9, as Spark writes one), then
    a file-source query on the same checkpoint reads only the file landed after them."""
    data, checkpoint = tmp_path / "data", tmp_path / "checkpoint"
    log = FileSourceLog(checkpoint)
    log.prepare()

    def stored(batch: int) -> Path:
        path = data / f"batch={batch}" / f"part-{batch}.parquet"
        path.parent.mkdir(parents=True)
        pq.write_table(pa.table({"x": [batch]}), path)
        return path

    for batch in range(12):
        log.plan(batch, [f"file://{stored(batch)}"])
        log.commit(batch)
    assert (checkpoint / "sources" / "0" / "9.compact").is_file()
    assert [log.ingest_ids(b) for b in range(12)] == [frozenset({b}) for b in range(12)]
    stored(12)
    seen: list[int] = []
    reader = spark.readStream.schema("x long").option("recursiveFileLookup", "true")
    query = (
        reader.parquet(str(data))
        .writeStream.foreachBatch(lambda df, _i: seen.extend(r.x for r in df.collect()))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert seen == [12]
    assert SourceLog(checkpoint).ingest_ids(12) == frozenset({12})
