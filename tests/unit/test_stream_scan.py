"""Which checkpoint a stream's one scan resumes from (engine/sharing/stream_scan.py): the one
whose micro-batch ids are newest, so that no network's ids ever go back."""

from __future__ import annotations

from pathlib import Path

from streamshield.engine.sharing.stream_scan import scan_checkpoint


def _committed(checkpoint: Path, *ids: int) -> Path:
    commits = checkpoint / "commits"
    commits.mkdir(parents=True)
    for batch in ids:
        (commits / str(batch)).write_text("v1\n{}")
        (commits / f".{batch}.crc").write_text("")
    return checkpoint


def test_a_fresh_stream_scans_from_the_selection_networks_checkpoint(tmp_path) -> None:
    selections, windows = tmp_path / "networks" / "s", tmp_path / "windows" / "s"
    assert scan_checkpoint([selections, windows]) == selections


def test_the_scan_resumes_where_the_newest_micro_batch_was_committed(tmp_path) -> None:
    selections = _committed(tmp_path / "networks" / "s", 0, 1, 2, 3)
    windows = _committed(tmp_path / "windows" / "s", *range(12))  # ids 10 and 11 sort first
    assert scan_checkpoint([selections, windows]) == windows
    assert scan_checkpoint([windows, selections]) == windows
    later = _committed(tmp_path / "later", 0, 40)
    assert scan_checkpoint([selections, windows, later]) == later


def test_a_checkpoint_without_commits_loses_to_one_with_any(tmp_path) -> None:
    empty = tmp_path / "networks" / "s"
    (empty / "commits").mkdir(parents=True)
    windows = _committed(tmp_path / "windows" / "s", 0)
    assert scan_checkpoint([empty, windows]) == windows
