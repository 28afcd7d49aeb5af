"""Retention (engine/store/retention.py) on a storage root built by hand in Spark's own
checkpoint formats: what is pruned, what never is, and a prune killed midway.

No Spark: the real-server test is tests/server/test_retention.py."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from streamshield.engine.ingest import ingest_consistency
from streamshield.engine.ingest.tracker_state import StateStore
from streamshield.engine.sharing.branch_ledger import BranchLedger
from streamshield.engine.store.labelled_store import LabelledStore
from streamshield.engine.store.retention import (
    PRUNED,
    Pruner,
    parse_retention,
    read_record,
    write_record,
)
from streamshield.server.retention_watch import RetentionWatch
from streamshield.server.settings import ConfigError, load
from tests.polling import poll

OLD = time.time() - 3600  # an hour ago: past a retention of 60 s


def _checkpoint(path: Path, reads: list[list[Path]], committed: int, *, age: float = 7200):
    """A single-file-source checkpoint: micro-batch i read ``reads[i]`` (log offset i);
    batches up to ``committed`` are done."""
    (path / "offsets").mkdir(parents=True)
    (path / "commits").mkdir()
    sources = path / "sources" / "0"
    sources.mkdir(parents=True)
    (path / "metadata").write_text('{"id":"x"}')
    stamp = time.time() - age
    os.utime(path / "metadata", (stamp, stamp))
    for i, files in enumerate(reads):
        (path / "offsets" / str(i)).write_text(f'v1\n{{"batchWatermarkMs":0}}\n{{"logOffset":{i}}}')
        lines = [json.dumps({"path": f"file://{f}", "timestamp": 0, "batchId": i}) for f in files]
        (sources / str(i)).write_text("\n".join(["v1", *lines]))
        if i <= committed:
            (path / "commits" / str(i)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def _old(path: Path) -> Path:
    os.utime(path, (OLD, OLD))
    return path


class Root:
    """A storage root with landed files, labelled batches and ingest's checkpoint."""

    def __init__(self, root: Path, batches: int = 4) -> None:
        self.root = root
        self.landing = root / "landing" / "s"
        self.labelled = root / "store" / "labelled"
        self.landing.mkdir(parents=True)
        self.store = LabelledStore(self.labelled)
        self.state = StateStore(root / "store" / "shield_state")
        self.landed: list[Path] = []
        self.batch_files: dict[int, list[Path]] = {}
        for batch in range(batches):
            landed = self.landing / f"p-{batch + 1:012d}-0000000{batch}.jsonl"
            landed.write_text(json.dumps({"seq": batch + 1}) + "\n")
            self.landed.append(_old(landed))
            target = self.labelled / "s" / f"batch={batch}"
            target.mkdir(parents=True)
            part = target / f"part-{batch}.parquet"
            part.write_bytes(b"PAR1" * 10)
            _old(target)
            self.batch_files[batch] = [part]
            self.store._mark(batch, ["s"])
            self.state.save(batch, {})
        self.batches = batches
        _checkpoint(
            root / "store" / "checkpoints" / "ingest",
            [[f] for f in self.landed],
            committed=batches - 1,
        )

    def reader(self, name: str, through: int, planned: int | None = None, **kw) -> Path:
        """A query that committed batches ``0..through`` of stream s (one micro-batch
        each) and planned ``planned`` without committing it."""
        reads = [self.batch_files[b] for b in range(through + 1)]
        if planned is not None:
            reads.append(self.batch_files[planned])
        path = self.root / "store" / "checkpoints" / "queries" / name
        _checkpoint(path, reads, committed=through, **kw)
        return path

    def kept_batches(self) -> list[int]:
        return sorted(int(p.name[6:]) for p in (self.labelled / "s").glob("batch=*"))

    def check(self) -> int | None:
        checkpoint = self.root / "store" / "checkpoints" / "ingest"
        return ingest_consistency.check(checkpoint, self.store, self.state)


def test_durations_and_what_is_refused() -> None:
    assert parse_retention("7d") == 7 * 86400
    assert parse_retention("90s") == parse_retention(90) == 90
    assert parse_retention("1.5h") == 5400
    assert parse_retention("2w") == 14 * 86400
    assert parse_retention("forever") is None
    for bad in ("0", 0, "0s", -5, "0.5", "soon", "7 days", True):
        with pytest.raises(ValueError, match=r"not a duration|less than 1 second"):
            parse_retention(bad)
    with pytest.raises(ValueError, match=r"less than 1 second.*forever"):
        parse_retention("0")


def test_settings_refuse_zero_with_a_clear_error(tmp_path: Path) -> None:
    assert load({"root": tmp_path}).retention == 7 * 86400  # the default: a week
    assert load({"retention": "forever"}).retention is None
    with pytest.raises(ConfigError, match=r"retention: less than 1 second.*'forever'"):
        load({"retention": "0"})


def test_prunes_only_what_every_reader_committed(tmp_path: Path) -> None:
    root = Root(tmp_path)
    root.reader("fast", through=3)
    root.reader("slow", through=1, planned=2)  # batch 2 read, not committed: replayed
    report = Pruner(tmp_path, 60).run()
    assert root.kept_batches() == [2, 3]
    assert read_record(root.labelled) == {"streams": {"s": 1}, "markers": 1}
    assert root.store.markers() == [2, 3]
    assert report.pruned["labelled"].files == 2
    # the landing zone: every file ingest committed, except the channel's newest
    assert [p.exists() for p in root.landed] == [False, False, False, True]
    assert report.pruned["landing"].files == 3
    assert report.kept["landing"].files == 1
    assert root.check() == root.batches  # ingest's start-up check accepts the pruned store


def test_a_network_branch_holds_what_it_has_not_covered(tmp_path: Path) -> None:
    """A shared network's scan read everything, but a stopped, restorable branch of it
    resumes after its own position from the stored history: its ledger holds those
    batches (a removed query's ledger is dropped, and holds nothing)."""
    root = Root(tmp_path)
    root.reader("scan", through=3)
    BranchLedger(tmp_path / "store" / "networks" / "s" / "branches").advance("held", 1)
    BranchLedger(
        tmp_path / "store" / "levels" / "L" / "window-networks" / "s" / "branches"
    ).advance("w", 2)
    Pruner(tmp_path, 60).run()
    assert root.kept_batches() == [2, 3]
    BranchLedger(tmp_path / "store" / "networks" / "s" / "branches").drop("held")
    Pruner(tmp_path, 60).run()
    assert root.kept_batches() == [3], "the level's window branch still holds batch 3"


def test_keeps_young_data_and_batches_ingest_has_not_committed(tmp_path: Path) -> None:
    root = Root(tmp_path)
    root.reader("q", through=3)
    young = root.labelled / "s" / "batch=2"
    os.utime(young, None)  # written now
    os.utime(root.landed[1], None)
    (root.root / "store/checkpoints/ingest/commits/3").unlink()  # ingest may replay 3
    Pruner(tmp_path, 60).run()
    assert root.kept_batches() == [2, 3]  # 2 is young; nothing after a kept batch goes
    assert [p.exists() for p in root.landed] == [False, True, False, True]


def test_no_reader_of_a_stream_prunes_by_age(tmp_path: Path) -> None:
    root = Root(tmp_path)
    Pruner(tmp_path, 60).run()
    assert root.kept_batches() == []  # a query registered later reads what is kept
    assert root.check() == root.batches


def test_nothing_pruned_while_off_or_a_checkpoint_is_unreadable(tmp_path: Path) -> None:
    root = Root(tmp_path)
    root.reader("q", through=3)
    report = Pruner(tmp_path, None).run()  # retention off: figures only
    assert report.kept["labelled"].files == 4 and report.pruned["labelled"].files == 0
    bad = root.reader("bad", through=3)
    (bad / "sources" / "0" / "1").write_text("v1\nnot json")
    report = Pruner(tmp_path, 60).run()
    assert root.kept_batches() == [0, 1, 2, 3] and all(p.exists() for p in root.landed)
    assert any("unreadable" in why for why in report.held)


def test_a_starting_reader_holds_the_labelled_store(tmp_path: Path) -> None:
    """A checkpoint that has not yet logged what it read may be listing the store now."""
    root = Root(tmp_path)
    starting = root.root / "store" / "checkpoints" / "queries" / "new"
    starting.mkdir(parents=True)
    (starting / "metadata").write_text('{"id":"y"}')
    (starting / "offsets").mkdir()
    report = Pruner(tmp_path, 60).run()
    assert root.kept_batches() == [0, 1, 2, 3]
    assert any("has not logged" in why for why in report.held)
    old = time.time() - 7200  # one that never read anything, long ago, holds nothing
    os.utime(starting / "metadata", (old, old))
    Pruner(tmp_path, 60).run()
    assert root.kept_batches() == []


def test_a_removed_querys_checkpoint_holds_nothing_back(tmp_path: Path) -> None:
    root = Root(tmp_path)
    root.reader("api_gone", through=0)
    queries = tmp_path / "queries"
    queries.mkdir()
    watch = RetentionWatch(tmp_path, queries, 60)
    watch.prune()
    assert root.kept_batches() == []  # no definition names api_gone
    root2 = Root(tmp_path / "other")
    root2.reader("api_kept", through=0)
    (tmp_path / "other" / "queries").mkdir()
    (tmp_path / "other" / "queries" / "q.json").write_text(json.dumps({"internal": "api_kept"}))
    RetentionWatch(tmp_path / "other", tmp_path / "other" / "queries", 60).prune()
    assert root2.kept_batches() == [1, 2, 3]
    watch.drop("api_gone")
    assert not (tmp_path / "store" / "checkpoints" / "queries" / "api_gone").exists()


def test_a_new_retention_applies_at_once_and_stop_is_prompt(tmp_path: Path) -> None:
    root = Root(tmp_path)
    root.reader("q", through=3)
    queries = tmp_path / "queries"
    queries.mkdir()
    (queries / "q.json").write_text(json.dumps({"internal": "q"}))
    watch = RetentionWatch(tmp_path, queries, None)  # keeps everything: a minute's sleep
    watch.start()
    try:
        assert watch.interval == 60
        watch.max_age = 60  # not a minute later: now
        poll(lambda: watch.pruner.last is not None, 10.0, 0.02)
        assert watch.interval == 30
    finally:
        began = time.monotonic()
        watch.stop()
    assert time.monotonic() - began < 5  # not the rest of the interval
    assert root.kept_batches() == [] and root.check() == root.batches


def test_a_quarantined_checkpoint_is_no_reader(tmp_path: Path) -> None:
    root = Root(tmp_path)
    aside = tmp_path / "quarantine" / "20260101T000000Z" / "checkpoints-ingest"
    _checkpoint(aside, [root.batch_files[0]], committed=-1)
    Pruner(tmp_path, 60).run()
    assert root.kept_batches() == []


def test_a_prune_killed_midway_loses_nothing_and_finishes(tmp_path: Path) -> None:
    """Killed after the record, before the directories went: start-up accepts the root
    and the next prune (of any retention) removes what the record names."""
    root = Root(tmp_path)
    root.reader("q", through=3)
    write_record(root.labelled, {"s": 1}, 0)  # what the prune had decided
    assert root.check() == root.batches
    (root.labelled / "_pruning" / "s-0").mkdir(parents=True)  # a rename before the kill
    Pruner(tmp_path, None).run()
    assert root.kept_batches() == [2, 3] and root.store.markers() == [1, 2, 3]
    assert not (root.labelled / "_pruning").exists()
    assert root.check() == root.batches


def test_start_up_still_refuses_a_store_that_lost_batches(tmp_path: Path) -> None:
    """The record excuses what it names, nothing more."""
    root = Root(tmp_path)
    write_record(root.labelled, {"s": 0}, 0)
    for part in root.batch_files[0] + root.batch_files[1]:
        part.unlink()
    (root.labelled / "_commits" / "0").unlink()
    with pytest.raises(
        ingest_consistency.IngestOutOfStep, match="lost files of stream s in batch 1"
    ):
        root.check()
    (root.labelled / PRUNED).write_text("{")
    with pytest.raises(ingest_consistency.IngestOutOfStep, match="pruning record"):
        root.check()


def test_old_shield_state_snapshots_go(tmp_path: Path) -> None:
    root = Root(tmp_path, batches=14)
    report = Pruner(tmp_path, 60).run()
    assert root.state.batches() == list(range(3, 14))  # the one batch 14 starts from, ten more
    assert report.pruned["shield_state"].files == 3
    assert root.check() == 14


def test_metrics_show_what_is_kept_and_pruned(tmp_path: Path) -> None:
    from streamshield.server.metrics import ServerMetrics

    root = Root(tmp_path)
    pruner = Pruner(tmp_path, 60)
    metrics = ServerMetrics(lambda: [], lambda: None, retention=lambda: pruner)
    assert b"streamshield_storage" not in metrics.exposition()  # nothing before a prune
    pruner.run()
    text = metrics.exposition().decode()
    assert 'streamshield_storage_pruned_files_total{store="labelled"} 4.0' in text
    assert 'streamshield_storage_pruned_files_total{store="landing"} 3.0' in text
    assert 'streamshield_storage_kept_files{store="landing"} 1.0' in text
    assert 'streamshield_storage_kept_bytes{store="labelled"} 0.0' in text
    assert "streamshield_storage_retention_seconds 60.0" in text
    assert "streamshield_storage_prune_held 0.0" in text
    assert root.kept_batches() == []
