"""Tampering with secure ingest's state: every accepted tuple stays accounted for.

A real ingest query (availableNow) labels the first part of the hospital feed in several
micro-batches; the rest lands; then one piece of state is deleted, truncated or rolled
back, and ingest restarts. Each accepted tuple must be labelled exactly once, or ingest
must refuse with a clear error (and then the documented recovery, relabelling from the
beginning, labels each exactly once and as the reference shield does). Never silently
lost, never labelled from a rolled-back state.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException

from streamshield.engine.ingest.ingest import Ingest
from streamshield.engine.ingest.ingest_consistency import IngestOutOfStep
from streamshield.engine.ingest.ingest_job import IngestJob
from streamshield.engine.ingest.tracker_state import ShieldStateError
from streamshield.examples import hospital
from tests.spark.conformance import STREAMS, reference, spark_outcome, stored
from tests.spark.test_ingest_job import chunks, land

pytestmark = pytest.mark.spark
ELEMENTS = hospital.elements()
PARTS = chunks(ELEMENTS, 5)
FIRST = 4  # parts landed and labelled before the tampering (several micro-batches)
ACCEPTED = Counter(
    (e.channel.stream, e.channel.provider, e.seq) for e in ELEMENTS if hasattr(e, "tid")
)


def job(spark, landing: Path, root: Path) -> IngestJob:
    ingest = Ingest(spark, hospital.hierarchy(), STREAMS, hospital.server_policies())
    return IngestJob(ingest, landing, root)


def run(spark, landing: Path, root: Path, max_files: int | None = None) -> IngestJob:
    ingest_job = job(spark, landing, root)
    ingest_job.start(available_now=True, max_files=max_files).awaitTermination()
    return ingest_job


def labelled(spark, ingest_job: IngestJob) -> Counter:
    """(stream, provider, seq) of every labelled row, counted."""
    found: Counter = Counter()
    for stream in STREAMS:
        if ingest_job.store.path(stream).exists():
            rows = spark.read.parquet(str(ingest_job.store.path(stream))).collect()
            found.update((r["stream"], r["provider"], r["seq"]) for r in rows)
    return found


@pytest.fixture(scope="module")
def labelled_root(spark, tmp_path_factory) -> tuple[Path, Path]:
    """A root whose ingest labelled the first parts in several batches; all parts landed."""
    base = tmp_path_factory.mktemp("tampering")
    landing, root = base / "landing", base / "root"
    for i, part in enumerate(PARTS[:FIRST]):
        _land_in_order(landing, part, i)
    run(spark, landing, root, max_files=2)
    for i, part in enumerate(PARTS[FIRST:], start=FIRST):
        _land_in_order(landing, part, i)
    return landing, root


def _land_in_order(landing: Path, part, index: int) -> None:
    """Spark's file source takes the oldest files first: distinct times keep seq order."""
    land(landing, part, index)
    for path in landing.glob(f"*/*-{index:08d}.jsonl"):
        os.utime(path, (1_700_000_000 + index, 1_700_000_000 + index))


def _snapshots(root: Path) -> list[Path]:
    return sorted((root / "shield_state").glob("*.json"), key=lambda p: int(p.stem))


def delete_checkpoint(root: Path) -> None:
    shutil.rmtree(root / "checkpoints" / "ingest")


def delete_labelled_store(root: Path) -> None:
    shutil.rmtree(root / "labelled")


def delete_shield_state(root: Path) -> None:
    shutil.rmtree(root / "shield_state")


def truncate_snapshot(root: Path) -> None:
    newest = _snapshots(root)[-1]
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])


def roll_back_snapshot(root: Path) -> None:
    """The newest snapshot replaced by an older one (complete, valid JSON)."""
    snapshots = _snapshots(root)
    shutil.copyfile(snapshots[0], snapshots[-1])


def delete_newest_snapshot(root: Path) -> None:
    """Only the newest: an older one is there to fall back to, which must not happen."""
    _snapshots(root)[-1].unlink()


def delete_a_batch_directory(root: Path) -> None:
    shutil.rmtree(root / "labelled" / "HeartRate" / "batch=1")


RECOVERED = {"checkpoint deleted", "snapshot rolled back"}  # the recovery costs a run: two show it
TAMPERING: dict[str, tuple[Callable[[Path], None], str]] = {
    "checkpoint deleted": (delete_checkpoint, "checkpoint is missing"),
    "labelled store deleted": (delete_labelled_store, "lacks the commit markers"),
    "batch directory deleted": (delete_a_batch_directory, "lost files of stream HeartRate"),
    "shield state deleted": (delete_shield_state, "is missing"),
    "newest snapshot deleted": (delete_newest_snapshot, "is missing"),
    "snapshot truncated": (truncate_snapshot, "unreadable"),
    "snapshot rolled back": (roll_back_snapshot, "does not belong to batch"),
}


@pytest.mark.parametrize("case", list(TAMPERING))
def test_restart_refuses_tampered_state_and_loses_no_tuple(
    spark, labelled_root, tmp_path, case
) -> None:
    landing, template = labelled_root
    root = tmp_path / "root"
    shutil.copytree(template, root)
    before = labelled(spark, job(spark, landing, root))
    assert before and set(before) < set(ACCEPTED) and max(before.values()) == 1
    tamper, message = TAMPERING[case]
    tamper(root)

    restarted = job(spark, landing, root)
    with pytest.raises(ShieldStateError, match=message) as refused:
        restarted.start(available_now=True)
    assert isinstance(refused.value, IngestOutOfStep) or "snapshot" in str(refused.value)
    assert not (root / "quarantine").exists()
    # refused: nothing relabelled from a guessed state (what was labelled stays as it was)
    assert labelled(spark, restarted) == labelled(spark, job(spark, landing, root))

    if case not in RECOVERED:
        return
    restarted.quarantine()  # the documented recovery: relabel from the beginning
    recovered = run(spark, landing, root)
    assert labelled(spark, recovered) == ACCEPTED, "a tuple lost or labelled twice"
    frames = stored(spark, recovered.store)
    for roles in (["C"], ["GP"], ["ND"]):
        assert spark_outcome(frames, roles) == reference(ELEMENTS, roles)


def test_untampered_restart_labels_every_tuple_exactly_once(spark, labelled_root, tmp_path) -> None:
    landing, template = labelled_root
    root = tmp_path / "root"
    shutil.copytree(template, root)
    resumed = run(spark, landing, root)
    assert labelled(spark, resumed) == ACCEPTED
    frames = stored(spark, resumed.store)
    assert spark_outcome(frames, ["GP"]) == reference(ELEMENTS, ["GP"])


def test_a_running_ingest_never_falls_back_to_an_older_snapshot(
    spark, labelled_root, tmp_path, monkeypatch
) -> None:
    """The snapshot batch N needs vanishes while ingest runs (past the start-up check):
    batch N stops with a clear error instead of starting from snapshot N-2."""
    landing, template = labelled_root
    root = tmp_path / "root"
    shutil.copytree(template, root)
    running = job(spark, landing, root)
    upcoming = running.check()
    assert upcoming is not None and upcoming >= 2
    monkeypatch.setattr(IngestJob, "check", lambda self: upcoming)
    (root / "shield_state" / f"{upcoming - 1}.json").unlink()
    with pytest.raises(StreamingQueryException, match="ShieldStateError"):
        running.start(available_now=True).awaitTermination()
    assert not (running.store.commits / str(upcoming)).exists()
    assert not (root / "shield_state" / f"{upcoming}.json").exists()
