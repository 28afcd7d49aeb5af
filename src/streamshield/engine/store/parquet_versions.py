"""A relation kept as one Parquet directory per batch id: ``<directory>/v=<batch id>``.

Window states (engine/queries/window_state.py) and aggregate states
(engine/sharing/aggregate_fold.py) are both the relation as of a batch, read back by the
next batch and by a replay of this one. Each version is written to a staging directory
and moved into place by one durable rename, so a reader (or a crash) sees a version
whole or not at all.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame

from streamshield.durable import replace_durably
from streamshield.engine.store.small_writes import write_parquet

_VERSION = "v="


class ParquetVersions:
    """The versions under ``directory``; ``keep``: how many a prune leaves below a new one."""

    def __init__(self, directory: str | Path, keep: int = 2) -> None:
        self.directory = Path(directory)
        self.keep = max(keep, 1)

    def path(self, batch_id: int) -> Path:
        return self.directory / f"{_VERSION}{batch_id}"

    def ids(self) -> list[int]:
        """The batch ids with a version, oldest first."""
        if not self.directory.exists():
            return []
        return sorted(
            int(p.name[len(_VERSION) :])
            for p in self.directory.glob(f"{_VERSION}*")
            if p.name[len(_VERSION) :].isdigit()
        )

    def write(self, rows: DataFrame, batch_id: int, small: bool = False) -> None:
        """``rows`` as the version of ``batch_id`` (one Spark job, one rename); ``small``:
        known to be small, written from the driver (engine/store/small_writes.py)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        staging = self.directory / f"_tmp-{batch_id}"
        shutil.rmtree(staging, ignore_errors=True)
        write_parquet(rows, staging, small=small)
        for marker in staging.glob(".*.crc"):
            marker.unlink()
        replace_durably(staging, self.path(batch_id))

    def write_table(self, table: pa.Table, batch_id: int) -> None:
        """``table`` (on the driver already) as the version of ``batch_id``: one file
        written by pyarrow as engine/store/small_writes.py writes a small frame, one rename."""
        self.directory.mkdir(parents=True, exist_ok=True)
        staging = self.directory / f"_tmp-{batch_id}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
        pq.write_table(table, staging / name, compression="snappy", write_page_index=True)
        replace_durably(staging, self.path(batch_id))

    def read_table(self, batch_id: int) -> pa.Table:
        """The version of ``batch_id`` read on the driver (known small by the caller)."""
        return pq.read_table(self.files(batch_id))

    def files(self, batch_id: int) -> list[Path]:
        return sorted(self.path(batch_id).glob("*.parquet"))

    def discard(self, batch_id: int) -> None:
        shutil.rmtree(self.path(batch_id), ignore_errors=True)

    def prune(self, batch_id: int) -> None:
        """Drops versions no replay can need: a replay of N reads the newest below N, so
        ``keep`` versions below ``batch_id`` are left."""
        older = [v for v in self.ids() if v < batch_id]
        for version in older[: max(len(older) - self.keep + 1, 0)]:
            self.discard(version)
