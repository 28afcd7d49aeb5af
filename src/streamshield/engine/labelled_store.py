"""The labelled streams on storage: one Parquet directory per stream and batch.

A micro-batch's rows are written to a private staging directory and then renamed into
place as ``<stream>/batch=<id>/`` in one atomic step, so a reader sees all of a batch
or none of it. The batch's commit marker is written after every stream's directory is
in place. A replayed batch (crash before the marker) keeps the directories already
renamed (they are complete, and ingest is deterministic for a batch) and writes only
the missing ones: nothing is read twice or lost.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import LongType, StringType, StructField, StructType

from streamshield.engine.labels import denied_column, reader_column

META_FIELDS = (
    ("stream", StringType()),
    ("provider", StringType()),
    ("seq", LongType()),
    ("tid", StringType()),
    ("reason", StringType()),
    ("policy_id", StringType()),
)


class LabelledStore:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.commits = self.root / "_commits"
        self.tmp = self.root / "_tmp"
        self.commits.mkdir(parents=True, exist_ok=True)

    def path(self, stream: str) -> Path:
        """Read it with ``recursiveFileLookup`` (batches are subdirectories)."""
        return self.root / stream

    def committed(self, batch_id: int) -> bool:
        return (self.commits / str(batch_id)).exists()

    def write_batch(self, batch_id: int, frames: dict[str, DataFrame]) -> list[str]:
        """Write every stream's labelled rows of one batch, each all or nothing; returns
        the streams written now (a replayed batch's earlier writes are kept as they are)."""
        written: list[str] = []
        if self.committed(batch_id):
            return written
        for stream, frame in frames.items():
            target = self.path(stream) / f"batch={batch_id}"
            if target.exists():
                continue  # renamed in place before a crash: complete
            staging = self.tmp / f"{batch_id}-{stream}"
            shutil.rmtree(staging, ignore_errors=True)
            frame.write.mode("overwrite").parquet(str(staging))
            for marker in staging.glob("*.crc"):
                marker.unlink()
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging, target)
            written.append(stream)
        self._mark(batch_id)
        return written

    def _mark(self, batch_id: int) -> None:
        (self.commits / str(batch_id)).touch()


_DDL_FIELDS: dict[str, tuple[StructField, ...]] = {}
"""Parsed attribute DDL: the JVM's parse costs a third of a second per query start
(five JVM round trips and an empty DataFrame), and a stream's DDL never changes."""


def labelled_schema(spark: SparkSession, ddl: str, n_attributes: int, width: int) -> StructType:
    """The schema of a labelled stream: metadata, attributes, then label words."""
    if ddl not in _DDL_FIELDS:
        _DDL_FIELDS[ddl] = tuple(spark.createDataFrame([], ddl).schema.fields)
    attributes = list(_DDL_FIELDS[ddl])
    labels = [
        StructField(name(obj, w), LongType())
        for obj in range(n_attributes + 1)
        for w in range(width)
        for name in (reader_column, denied_column)
    ]
    return StructType([StructField(n, t) for n, t in META_FIELDS] + attributes + labels)
