"""A shared network's pass of a micro-batch is stored with ``ResultStore.add``: a replay
(a crash after some branches linked the pass, before the others did) adds its own write
beside the first one instead of replacing it, so the links of the branches that had the
batch keep their files, and the branches that had not get exactly the new write's files
(whose bits mean the branches of the replay).

No Spark here: a frame is a stand-in whose Parquet write creates named part files.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from streamshield.engine.store.result_store import ResultStore


class Frame:
    """Writes two part files per write, named by the write's id as Spark names them."""

    def __init__(self) -> None:
        self.write = self

    def mode(self, _mode: str) -> Frame:
        return self

    def parquet(self, path: str) -> None:
        folder, job = Path(path), uuid.uuid4().hex
        folder.mkdir(parents=True)
        for part in range(2):
            (folder / f"part-0000{part}-{job}-c000.snappy.parquet").write_bytes(b"rows")
            (folder / f".part-0000{part}-{job}-c000.snappy.parquet.crc").write_bytes(b"")
        (folder / "_SUCCESS").write_bytes(b"")


def test_a_replayed_pass_is_stored_beside_the_first_one(tmp_path) -> None:
    store = ResultStore(tmp_path / "network")
    first = store.add(Frame(), 7)
    assert len(first) == 2 and all(Path(f).is_file() for f in first)
    assert store.batches() == [7]
    replayed = store.add(Frame(), 7)
    assert len(replayed) == 2 and not set(replayed) & set(first), "only this write's files"
    assert all(Path(f).is_file() for f in first + replayed), "the first write's links still read"
    assert sorted(store.files(7)) == sorted(first + replayed)
    assert store.batches() == [7]
    assert not list((store.root / "_staging").glob("7.*")), "nothing left in staging"
    assert not list((store.root / "batch=7").glob("*.crc"))


def test_a_pass_is_pruned_with_its_batch(tmp_path) -> None:
    store = ResultStore(tmp_path / "network", keep=2)
    old = store.add(Frame(), 1) + store.add(Frame(), 1)
    store.add(Frame(), 2)
    store.add(Frame(), 3)
    assert store.batches() == [2, 3] and not any(Path(f).exists() for f in old)


def test_links_stored_together_are_the_links_stored_one_by_one(tmp_path, monkeypatch) -> None:
    """One group commit for a batch's links: each store holds what its own ``link`` would
    have written (a replay too replaces its batch), nothing is left staged, the owe
    markers it pays are gone and pruning keeps each store's own ``keep``; every link is
    fsynced and renamed before any rename is made durable, and every one is durable
    before the call returns."""
    from streamshield import durable
    from streamshield.engine.store import result_store as module
    from streamshield.engine.store.result_store import link_together

    files = [str(tmp_path / "pass" / "part-0.parquet")]
    spec = {"taken": ["_ss_taken_0", 1], "view": [], "items": []}
    one = [ResultStore(tmp_path / "one" / f"q{i}", keep=2) for i in range(3)]
    together = [ResultStore(tmp_path / "together" / f"q{i}", keep=2) for i in range(3)]
    for store in one + together:
        store.owe(4)
    steps: list[str] = []
    monkeypatch.setattr(module, "fsync_tree", lambda p: steps.append("sync"))
    monkeypatch.setattr(module, "fsync_dir", lambda p: steps.append("durable"))
    for batch_id in (3, 4, 5, 5):  # 5 twice: a replay
        for i, store in enumerate(one):
            store.link(batch_id, files, f"_ss_b{i}", spec)
        steps.clear()
        link_together([(s, batch_id, files, f"_ss_b{i}", spec) for i, s in enumerate(together)])
        assert steps == ["sync"] * 3 + ["durable"] * 6, steps
    monkeypatch.setattr(module, "fsync_tree", durable.fsync_tree)
    for mine, theirs in zip(one, together, strict=True):
        assert mine.batches() == theirs.batches() == [4, 5]
        for batch_id in (4, 5):
            link = f"batch={batch_id}/link.json"
            assert (mine.root / link).read_text() == (theirs.root / link).read_text()
        assert mine.owed() == theirs.owed() == []
        assert not [p for p in (theirs.root / "_staging").iterdir()]
