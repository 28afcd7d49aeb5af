"""Which labelled-store batches a file-stream micro-batch read, from its checkpoint.

A shared network keeps, per branch, the newest ingest batch the branch has covered, so
that a query joining late, restarting or rejoining after a stop gets exactly the batches
it has not had (no loss, no repeat). That needs the ingest batch ids in each of the
network's micro-batches. Asking Spark for them costs a job over the rows (a distinct over
file paths took twice the time of a count in a measurement); the file source writes the
answer down before the micro-batch runs, in its checkpoint: ``offsets/<batch>`` names the
source's log offset, and ``sources/0/<offset>`` (or a ``.compact`` file every tenth
offset) lists the files found at that offset, one JSON object per line. The format is
Spark's own (``FileStreamSourceLog``, "v1"); anything unexpected gives ``None`` and the
caller falls back to asking Spark.

A labelled store's files sit under ``<stream>/batch=<ingest id>/``, so a file's path
names its ingest batch.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

_INGEST = re.compile(r"/batch=(\d+)/[^/]*$")


def ingest_id(path: str) -> int | None:
    """The ingest batch of a labelled-store file (None for a path of another layout)."""
    found = _INGEST.search(path)
    return int(found.group(1)) if found else None


class SourceLog:
    """The file source log of one streaming query's checkpoint (single source)."""

    def __init__(self, checkpoint: str | Path) -> None:
        self.checkpoint = Path(checkpoint)

    def ingest_ids(self, batch_id: int) -> frozenset[int] | None:
        """Ingest batches read by micro-batch ``batch_id`` (None: the log is unreadable)."""
        end = self._log_offset(batch_id)
        if end is None:
            return None
        start = self._log_offset(batch_id - 1) if batch_id > 0 else -1
        return None if start is None else self._ids(start + 1, end)

    def last_batch(self) -> int:
        """The newest micro-batch committed (-1: none yet)."""
        commits = self.checkpoint / "commits"
        return max((int(p.name) for p in commits.glob("*") if p.name.isdigit()), default=-1)

    def position(self) -> int | None:
        """The newest ingest batch of every micro-batch committed so far (-1: none yet;
        None: the log is unreadable). Files reach the store in ingest order, so what the
        query has read is exactly the ingest batches up to this one."""
        last = self.last_batch()
        if last < 0:
            return -1
        end = self._log_offset(last)
        ids = None if end is None else self._ids(0, end)
        return None if ids is None else max(ids, default=-1)

    def files(self, batch_id: int) -> list[str] | None:
        """The files micro-batch ``batch_id`` read (None: the log is unreadable). A
        micro-batch's frame cannot say (``inputFiles`` of a ``foreachBatch`` frame is
        empty), the log can."""
        end = self._log_offset(batch_id)
        start = self._log_offset(batch_id - 1) if batch_id > 0 else -1
        if end is None or start is None:
            return None
        return self._found(start + 1, end)

    def _ids(self, first: int, last: int) -> frozenset[int] | None:
        """The ingest batches of the files found at log offsets ``first..last``."""
        paths = self._found(first, last)
        if paths is None:
            return None
        found = [ingest_id(path) for path in paths]
        if None in found:
            return None
        return frozenset(i for i in found if i is not None)

    def _found(self, first: int, last: int) -> list[str] | None:
        """The files found at log offsets ``first..last``."""
        out: list[str] = []
        for offset in range(first, last + 1):
            paths = self._files(offset)
            if paths is None:
                return None
            out += paths
        return out

    def _log_offset(self, batch_id: int) -> int | None:
        try:
            lines = (self.checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
            offset = json.loads(lines[-1])["logOffset"]
        except (OSError, ValueError, KeyError, IndexError, TypeError):
            return None
        return offset if isinstance(offset, int) else None

    def _files(self, offset: int) -> list[str] | None:
        """Paths the source found at ``offset``: its own file, else the compact file that
        holds it (every tenth offset Spark folds the earlier files into one)."""
        folder = self.checkpoint / "sources" / "0"
        plain = folder / str(offset)
        if plain.is_file():
            return _entries(plain, None)
        compacts = sorted(
            int(p.name.split(".")[0])
            for p in folder.glob("*.compact")
            if p.name.split(".")[0].isdigit()
        )
        holder = next((c for c in compacts if c >= offset), None)
        if holder is None:
            return None
        return _entries(folder / f"{holder}.compact", offset)


def _entries(path: Path, offset: int | None) -> list[str] | None:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    if not lines or lines[0] != "v1":
        return None
    paths = []
    for line in lines[1:]:
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            if offset is None or entry["batchId"] == offset:
                paths.append(str(entry["path"]))
        except (ValueError, KeyError, TypeError):
            return None
    return paths
