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

from streamshield.engine.result_store import ResultStore


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
