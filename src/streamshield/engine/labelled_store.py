"""The labelled streams on storage: one Parquet directory per stream, written per batch.

A micro-batch's files are first written to a private temporary directory, then moved
into place under deterministic names (``b<batch>-<n>.parquet``), and only then is the
batch's commit marker written. A replayed batch (after a crash) finds no marker, removes
whatever a previous attempt moved, and writes again: since ingest is deterministic for a
batch, readers never see a tuple twice or miss one.
"""

from __future__ import annotations

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
        return self.root / stream

    def committed(self, batch_id: int) -> bool:
        return (self.commits / str(batch_id)).exists()

    def write_batch(self, batch_id: int, frames: dict[str, DataFrame]) -> None:
        """Write every stream's labelled rows of one batch, all or nothing for readers."""
        if self.committed(batch_id):
            return
        staging = self.tmp / str(batch_id)
        shutil.rmtree(staging, ignore_errors=True)
        for stream, frame in frames.items():
            frame.coalesce(1).write.mode("overwrite").parquet(str(staging / stream))
        for stream in frames:
            target = self.path(stream)
            target.mkdir(parents=True, exist_ok=True)
            for stale in target.glob(f"b{batch_id:012d}-*.parquet"):
                stale.unlink()
            parts = sorted((staging / stream).glob("part-*.parquet"))
            for n, part in enumerate(parts):
                part.replace(target / f"b{batch_id:012d}-{n:04d}.parquet")
        self._mark(batch_id)
        shutil.rmtree(staging, ignore_errors=True)

    def _mark(self, batch_id: int) -> None:
        (self.commits / str(batch_id)).touch()


def labelled_schema(spark: SparkSession, ddl: str, n_attributes: int, width: int) -> StructType:
    """The schema of a labelled stream: metadata, attributes, then label words."""
    attributes = spark.createDataFrame([], ddl).schema.fields
    labels = [
        StructField(name(obj, w), LongType())
        for obj in range(n_attributes + 1)
        for w in range(width)
        for name in (reader_column, denied_column)
    ]
    return StructType([StructField(n, t) for n, t in META_FIELDS] + attributes + labels)
