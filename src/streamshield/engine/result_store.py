"""A query's labelled results on storage: each micro-batch written once, whoever listens.

A stateful plan (an aggregate, a window, a join) commits its state only when its
micro-batch is executed to the end. When results went straight to subscribers, a batch
nobody subscribed to was never executed, and Spark refused to commit the batch
(``STATE_STORE_COMMIT_VALIDATION_FAILED``): the query died. So every batch is first
written here, labels and provenance included, and subscribers are served from what was
written. Delivery (SecFilter) then reads Parquet files, not the query's plan.

Layout: ``<root>/batch=<id>/`` per micro-batch, renamed into place from a private
staging directory, so a reader sees a whole batch or none of it. A replayed batch (the
query restarted before Spark recorded the batch as done) is executed again, as Spark
requires, and replaces its directory with the same rows: the store never holds a batch
twice. Only the newest ``keep`` batches are kept.

A stored batch is read by its exact files, never by its directory. Spark's cache matches
plans by equality, and two reads of one directory are equal plans whatever the files in
it: a frame persisted by one reader (a subscriber resuming from batch 3) would be taken
by another reading batch 3 after a replay replaced it (the query's own delivery), with
the old file list, and fail on files gone or serve rows no longer stored. The file
names carry the write's id, so each write of a batch is a plan of its own.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from streamshield.durable import replace_durably
from streamshield.faults import crash_point

_BATCH = re.compile(r"^batch=(\d+)$")
DEFAULT_KEEP = 200


class ResultStore:
    def __init__(self, root: str | Path, keep: int = DEFAULT_KEEP) -> None:
        if keep < 1:
            raise ValueError("a result store keeps at least one batch")
        self.root, self.keep = Path(root), keep
        self._staging = self.root / "_staging"

    def write(self, frame: DataFrame, batch_id: int) -> DataFrame:
        """Execute ``frame`` to the end, store it as batch ``batch_id``, return the stored rows."""
        staging = self._staging / str(batch_id)
        shutil.rmtree(staging, ignore_errors=True)
        frame.write.mode("overwrite").parquet(str(staging))
        for marker in staging.glob("*.crc"):
            marker.unlink()
        target = self._path(batch_id)
        if target.exists():  # a replay: the same batch again, never a second copy
            old = self._staging / f"{batch_id}.replaced"
            shutil.rmtree(old, ignore_errors=True)
            os.replace(target, old)
            shutil.rmtree(old, ignore_errors=True)
        crash_point("result.before_rename")
        replace_durably(staging, target)
        crash_point("result.after_rename")
        self._prune()
        return self.read(batch_id, frame)

    def read(self, batch_id: int, like: DataFrame) -> DataFrame:
        """One stored batch, with the schema of ``like`` (an empty batch has no inference)."""
        files = self._files(batch_id)
        if not files:
            raise FileNotFoundError(f"batch {batch_id} is not stored in {self.root}")
        return like.sparkSession.read.schema(like.schema).parquet(*files)

    def stored(self, batch_id: int, spark: SparkSession) -> DataFrame | None:
        """One stored batch as written (None: pruned, or a batch without rows)."""
        files = self._files(batch_id)
        return spark.read.parquet(*files) if files else None

    def batches(self) -> list[int]:
        """Stored batch ids, oldest first."""
        if not self.root.is_dir():
            return []
        found = (_BATCH.match(p.name) for p in self.root.iterdir())
        return sorted(int(m.group(1)) for m in found if m)

    def clear(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def _path(self, batch_id: int) -> Path:
        return self.root / f"batch={batch_id}"

    def _files(self, batch_id: int) -> list[str]:
        return sorted(str(p) for p in self._path(batch_id).glob("*.parquet"))

    def _prune(self) -> None:
        for old in self.batches()[: -self.keep]:
            shutil.rmtree(self._path(old), ignore_errors=True)


class StoringSink:
    """``foreachBatch`` function: store the batch, then hand the stored rows on.

    ``deliver`` runs only when ``wanted()`` says someone listens; the batch is stored and
    so fully executed either way.
    """

    def __init__(
        self,
        store: ResultStore,
        deliver: Callable[[DataFrame, int], None],
        wanted: Callable[[], bool] = lambda: True,
    ) -> None:
        self.store, self.deliver, self.wanted = store, deliver, wanted

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        stored = self.store.write(frame, batch_id)
        if self.wanted():
            self.deliver(stored, batch_id)
