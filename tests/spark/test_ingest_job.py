"""Secure ingest as a real streaming query: conformance, restart, replay, late data."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException

from streamshield.engine.ingest.ingest import Ingest
from streamshield.engine.ingest.ingest_job import IngestJob
from streamshield.engine.store.labelled_store import LabelledStore
from streamshield.examples import hospital
from streamshield.lang.wire import to_line
from tests.spark.conformance import STREAMS, reference, spark_outcome, stored

pytestmark = pytest.mark.spark
ROLE_SETS = [["C"], ["GP"], ["ND"], ["ER"], ["INS"]]


def land(landing: Path, elements, start: int) -> None:
    """Write elements as landing-zone files, one per channel and chunk (seq order)."""
    by_channel: dict = {}
    for element in elements:
        by_channel.setdefault(element.channel, []).append(element)
    for channel, items in by_channel.items():
        folder = landing / channel.stream
        folder.mkdir(parents=True, exist_ok=True)
        name = f"{channel.provider}-{items[0].seq:012d}-{start:08d}.jsonl"
        (folder / name).write_text("\n".join(to_line(e) for e in items) + "\n")


@contextmanager
def crash_before_marker(monkeypatch, batch: int) -> Iterator[None]:
    """Inside: ingest 'dies' after batch ``batch``'s files are in place, before its commit
    marker."""
    original = LabelledStore._mark

    def crash(store: LabelledStore, batch_id: int, streams: list[str]) -> None:
        if batch_id == batch:
            raise RuntimeError("simulated crash before the commit marker")
        original(store, batch_id, streams)

    with monkeypatch.context() as patched:
        patched.setattr(LabelledStore, "_mark", crash)
        yield


def run(spark, landing: Path, root: Path) -> IngestJob:
    ingest = Ingest(spark, hospital.hierarchy(), STREAMS, hospital.server_policies())
    job = IngestJob(ingest, landing, root)
    job.start(available_now=True, max_files=2).awaitTermination()
    return job


def outcome(spark, job: IngestJob, roles):
    return spark_outcome(stored(spark, job.store), roles)


def chunks(elements, size):
    return [elements[i : i + size] for i in range(0, len(elements), size)]


def test_streaming_ingest_conforms_and_survives_restart(spark, tmp_path) -> None:
    elements = hospital.elements()
    parts = chunks(elements, 9)
    # uninterrupted run
    for i, part in enumerate(parts):
        land(tmp_path / "landing-a", part, i)
    whole = run(spark, tmp_path / "landing-a", tmp_path / "a")
    # interrupted run: half the files, stop, the rest, restart from the checkpoint
    for i, part in enumerate(parts[:3]):
        land(tmp_path / "landing-b", part, i)
    run(spark, tmp_path / "landing-b", tmp_path / "b")
    for i, part in enumerate(parts[3:], start=3):
        land(tmp_path / "landing-b", part, i)
    resumed = run(spark, tmp_path / "landing-b", tmp_path / "b")
    for roles in ROLE_SETS:
        expected = reference(elements, roles)
        assert outcome(spark, whole, roles) == expected, roles
        assert outcome(spark, resumed, roles) == expected, roles
    total = sum(spark.read.parquet(str(resumed.store.path(s))).count() for s in STREAMS)
    assert total == sum(1 for e in elements if hasattr(e, "tid")), "lost or duplicated tuples"


def test_crash_before_commit_replays_the_batch_identically(spark, tmp_path, monkeypatch) -> None:
    """Batch 2's files are moved into place, then the process 'dies' before the commit
    marker: the restarted query replays batch 2 and the output equals a clean run's."""
    elements = hospital.elements()
    for i, part in enumerate(chunks(elements, 9)):
        land(tmp_path / "landing", part, i)
    clean = run(spark, tmp_path / "landing", tmp_path / "clean")
    with (
        crash_before_marker(monkeypatch, 2),
        pytest.raises(StreamingQueryException, match="simulated crash"),
    ):
        run(spark, tmp_path / "landing", tmp_path / "crashed")
    recovered = run(spark, tmp_path / "landing", tmp_path / "crashed")
    for roles in (["C"], ["GP"], ["ND"]):
        assert outcome(spark, recovered, roles) == outcome(spark, clean, roles)
    total = sum(spark.read.parquet(str(recovered.store.path(s))).count() for s in STREAMS)
    assert total == sum(1 for e in elements if hasattr(e, "tid"))


def test_late_tuple_is_denied_out_of_order(spark, tmp_path) -> None:
    elements = [e for e in hospital.elements() if e.channel.stream == "HeartRate"]
    land(tmp_path / "landing", elements[:8], 0)
    job = run(spark, tmp_path / "landing", tmp_path / "root")
    land(tmp_path / "landing", elements[5:6], 1)  # seq 6 again, after seq 8 was processed
    job = run(spark, tmp_path / "landing", tmp_path / "root")
    rows = spark.read.parquet(str(job.store.path("HeartRate"))).filter("seq = 6").collect()
    assert sorted(r["reason"] for r in rows) == ["out of order", "pass"]
