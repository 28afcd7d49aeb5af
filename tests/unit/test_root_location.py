"""A root is served from where its checkpoints were written, or refused with the path it
belongs at: elsewhere Spark's file sources would read every file again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamshield.engine.store.root_location import INGEST_SOURCES, RootMoved, check, recorded_root


def _written_at(root: Path, where: Path) -> None:
    log = root / INGEST_SOURCES
    log.mkdir(parents=True)
    entry = {"path": f"file://{where}/landing/s/ed-000000000001-0a1b2c3d.jsonl", "batchId": 0}
    (log / "0").write_text("v1\n" + json.dumps(entry) + "\n")


def test_a_root_served_where_it_was_written_passes(tmp_path) -> None:
    _written_at(tmp_path, tmp_path.resolve())
    assert recorded_root(tmp_path) == tmp_path.resolve()
    check(tmp_path)


def test_a_fresh_root_passes(tmp_path) -> None:
    check(tmp_path)


def test_a_moved_root_is_refused_naming_where_it_belongs(tmp_path) -> None:
    _written_at(tmp_path, Path("/srv/old root"))
    with pytest.raises(RootMoved) as refused:
        check(tmp_path)
    assert "/srv/old root" in str(refused.value) and "mount it there" in str(refused.value)


def test_an_unreadable_log_is_not_a_verdict(tmp_path) -> None:
    log = tmp_path / INGEST_SOURCES
    log.mkdir(parents=True)
    (log / "0").write_text("v1\nnot json\n")
    check(tmp_path)
