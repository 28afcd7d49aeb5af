"""A file-source log written by the project (engine/ingest/file_source_log.py): the file
source's own checkpoint format, so that the networks' source log, retention and a
file-source query resuming from it read it as Spark's."""

from __future__ import annotations

from pathlib import Path

from streamshield.engine.ingest import file_source_log
from streamshield.engine.ingest.file_source_log import FileSourceLog
from streamshield.engine.ingest.source_log import SourceLog
from streamshield.engine.store.retention import checkpoint_sources


def _file(root: Path, batch: int) -> str:
    return f"file://{root}/labelled/s/batch={batch}/part-{batch}.parquet"


def test_micro_batches_are_logged_as_the_file_source_logs_them(tmp_path) -> None:
    log = FileSourceLog(tmp_path / "checkpoint")
    log.prepare()
    for batch in range(25):
        log.plan(batch, [_file(tmp_path, batch)])
        log.commit(batch)
    sources = tmp_path / "checkpoint" / "sources" / "0"
    assert (sources / "9.compact").is_file() and (sources / "19.compact").is_file()
    compact = (sources / "19.compact").read_text().splitlines()
    assert compact[0] == "v1" and len(compact) == 21, "every entry up to offset 19"
    reader = SourceLog(tmp_path / "checkpoint")
    assert [reader.ingest_ids(b) for b in range(25)] == [frozenset({b}) for b in range(25)]
    assert reader.position() == 24 and reader.last_batch() == 24
    offsets = (tmp_path / "checkpoint" / "offsets" / "24").read_text().splitlines()
    assert offsets[0] == "v1" and offsets[2] == '{"logOffset":24}'
    (source,) = checkpoint_sources(tmp_path / "checkpoint")
    assert len(source.committed) == 25 and not source.planned


def test_a_planned_micro_batch_is_pending_until_committed(tmp_path) -> None:
    log = FileSourceLog(tmp_path / "checkpoint")
    log.prepare()
    log.plan(0, [_file(tmp_path, 0)])
    log.commit(0)
    assert log.pending() is None
    log.plan(1, [_file(tmp_path, 1), _file(tmp_path, 2)])
    assert log.pending() == (1, [_file(tmp_path, 1), _file(tmp_path, 2)])
    (source,) = checkpoint_sources(tmp_path / "checkpoint")
    assert source.planned == {_file(tmp_path, 1), _file(tmp_path, 2)}, "retention holds them"
    log.commit(1)
    assert log.pending() is None and SourceLog(log.checkpoint).position() == 2


def test_an_offset_logged_without_its_micro_batch_is_written_again(tmp_path) -> None:
    """Killed between the file-source log and the offsets: the next plan reuses the
    offset (as Spark's source would list those files again)."""
    log = FileSourceLog(tmp_path / "checkpoint")
    log.prepare()
    log.plan(0, [_file(tmp_path, 0)])
    log.commit(0)
    (log.sources / "1").write_text('v1\n{"path":"file:///gone/batch=7/x.parquet"}')
    log.plan(1, [_file(tmp_path, 1)])
    assert SourceLog(log.checkpoint).ingest_ids(1) == frozenset({1})


def test_old_offsets_and_log_files_go_as_spark_deletes_them(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(file_source_log, "RETAINED", 15)
    log = FileSourceLog(tmp_path / "checkpoint")
    log.prepare()
    for batch in range(41):
        log.plan(batch, [_file(tmp_path, batch)])
        log.commit(batch)
    offsets = sorted(int(p.name) for p in (log.checkpoint / "offsets").iterdir())
    assert offsets[0] == 40 - 15 and offsets[-1] == 40
    kept = sorted(p.name for p in log.sources.iterdir())
    assert "9.compact" not in kept and "19.compact" in kept and "3" not in kept
    reader = SourceLog(log.checkpoint)
    assert [reader.ingest_ids(b) for b in range(26, 41)] == [frozenset({b}) for b in range(26, 41)]
    (source,) = checkpoint_sources(log.checkpoint)
    assert max(int(p.split("batch=")[1].split("/")[0]) for p in source.committed) == 40


def test_seen_files_are_those_of_planned_micro_batches_across_compactions(
    tmp_path, monkeypatch
) -> None:
    """What driven ingest must never read again: every file a planned micro-batch logged,
    also after compaction deleted the plain files; not a file logged at an offset whose
    micro-batch was never planned (a crash between the two): that one is read again."""
    monkeypatch.setattr(file_source_log, "RETAINED", 15)
    log = FileSourceLog(tmp_path / "checkpoint")
    log.prepare()
    assert log.seen() == set()
    for batch in range(33):
        log.plan(batch, [_file(tmp_path, batch)], stamps=[1000 + batch])
        log.commit(batch)
    assert "3" not in {p.name for p in log.sources.iterdir()}, "compacted and deleted"
    assert log.seen() == {_file(tmp_path, b) for b in range(33)}
    (log.sources / "33").write_text('v1\n{"path":"file:///crashed.jsonl","batchId":33}')
    assert "file:///crashed.jsonl" not in log.seen()
    log.plan(33, [_file(tmp_path, 33)])
    assert log.seen() == {_file(tmp_path, b) for b in range(34)}
    assert '"timestamp":1000,' in (log.sources / "29.compact").read_text(), "the stamps given"


def test_a_compact_offset_logged_without_its_micro_batch_leaves_no_plain_file(tmp_path) -> None:
    """A plain file at the offset a compact file is written for would shadow it."""
    log = FileSourceLog(tmp_path / "checkpoint")
    log.prepare()
    for batch in range(9):
        log.plan(batch, [_file(tmp_path, batch)])
        log.commit(batch)
    (log.sources / "9").write_text('v1\n{"path":"file:///crashed.jsonl","batchId":9}')
    log.plan(9, [_file(tmp_path, 9)])
    assert not (log.sources / "9").exists() and (log.sources / "9.compact").is_file()
    assert SourceLog(log.checkpoint).files(9) == [_file(tmp_path, 9)]
