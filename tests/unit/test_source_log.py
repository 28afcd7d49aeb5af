"""Reading which labelled-store batches a file-stream micro-batch read, from its checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

from streamshield.engine.ingest.source_log import SourceLog, ingest_id


def _file(stream: str, ingest: int) -> dict:
    return {"path": f"file:///store/{stream}/batch={ingest}/part-0.parquet", "timestamp": 1}


def checkpoint(root: Path, batches: dict[int, int], logs: dict[int, list[int]], done: int):
    """``batches``: micro-batch -> log offset; ``logs``: offset -> ingest ids found."""
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "sources" / "0").mkdir(parents=True)
    for batch, offset in batches.items():
        (root / "offsets" / str(batch)).write_text(f'v1\n{{"conf":1}}\n{{"logOffset":{offset}}}')
    for batch in range(done + 1):
        (root / "commits" / str(batch)).write_text("v1\n{}")
    for offset, ids in logs.items():
        lines = [json.dumps(_file("s", i) | {"batchId": offset}) for i in ids]
        (root / "sources" / "0" / str(offset)).write_text("\n".join(["v1", *lines]))


def test_the_ingest_batches_of_each_micro_batch(tmp_path) -> None:
    checkpoint(tmp_path, {0: 0, 1: 2}, {0: [0, 1], 1: [3], 2: [4, 4]}, done=0)
    log = SourceLog(tmp_path)
    assert log.ingest_ids(0) == {0, 1}
    assert log.ingest_ids(1) == {3, 4}, "a micro-batch may span several log offsets"
    assert log.position() == 1, "only committed micro-batches count"


def test_offsets_folded_into_a_compact_file_are_read_from_it(tmp_path) -> None:
    checkpoint(tmp_path, {0: 9}, {}, done=0)
    entries = [_file("s", i) | {"batchId": i} for i in range(10)]
    folder = tmp_path / "sources" / "0"
    (folder / "9.compact").write_text("\n".join(["v1", *map(json.dumps, entries)]))
    assert SourceLog(tmp_path).ingest_ids(0) == set(range(10))
    assert SourceLog(tmp_path).position() == 9


def test_anything_unexpected_is_unknown_not_guessed(tmp_path) -> None:
    assert SourceLog(tmp_path / "none").ingest_ids(0) is None
    assert SourceLog(tmp_path / "none").position() == -1, "no commit yet: read nothing"
    checkpoint(tmp_path, {0: 0}, {0: [1]}, done=0)
    (tmp_path / "sources" / "0" / "0").write_text("v2\n{}")
    assert SourceLog(tmp_path).ingest_ids(0) is None
    assert SourceLog(tmp_path).position() is None
    assert ingest_id("file:///elsewhere/part-0.parquet") is None
    assert ingest_id("file:///store/s/batch=12/part-0.parquet") == 12


def test_the_files_of_each_micro_batch(tmp_path) -> None:
    """What ingest sizes a micro-batch by: its ``foreachBatch`` frame names no files."""
    checkpoint(tmp_path, {0: 0, 1: 2}, {0: [0, 1], 1: [3], 2: [4]}, done=0)
    log = SourceLog(tmp_path)
    assert [ingest_id(f) for f in log.files(0) or []] == [0, 1]
    assert [ingest_id(f) for f in log.files(1) or []] == [3, 4]
    assert log.files(2) is None, "no offset written for it: unknown"
    (tmp_path / "sources" / "0" / "2").unlink()
    assert log.files(1) is None, "a log file gone: unknown, never a partial list"
