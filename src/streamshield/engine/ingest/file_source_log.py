"""A file-source checkpoint written by this project the way Spark writes it.

Why. Two of the pipeline's streaming queries are run by the project itself instead of by
Spark's file source, to take a small landing's way to its subscriber through fewer fixed
costs: a stream's scan (engine/sharing/driven_scan.py) and secure ingest
(engine/ingest/driven_ingest.py). Their micro-batches keep the file source's durable bookkeeping
in its own format and in the same checkpoint, so everything that reads a checkpoint reads
theirs unchanged (:class:`~streamshield.engine.ingest.source_log.SourceLog`, retention,
ingest's start-up check), and a query that switches between the two ways of running
resumes where the other stopped. Per micro-batch, before it runs: its files as the next
file-source log entry (``sources/0/<offset>``, a ``.compact`` file every tenth offset as
Spark writes them), then ``offsets/<batch>`` naming that log offset; after it:
``commits/<batch>``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from streamshield.durable import write_atomic
from streamshield.engine.ingest.source_log import SourceLog
from streamshield.engine.store.checkpoint_leftovers import sweep

COMPACT_INTERVAL = 10
"""Spark's file-source log compacts every tenth offset (``compactInterval``)."""
RETAINED = 100
"""Micro-batches whose offsets and commits the log keeps (Spark's
``minBatchesToRetain``); older ones, and file-source log files a newer compact file
holds, are deleted as Spark deletes them."""


class FileSourceLog(SourceLog):
    """A file-source checkpoint written the way Spark writes it (one source)."""

    def __init__(self, checkpoint: str | Path) -> None:
        super().__init__(checkpoint)
        self.sources = self.checkpoint / "sources" / "0"

    def prepare(self) -> None:
        """Creates the checkpoint's folders and its ``metadata`` (a query id) if missing."""
        for folder in (self.checkpoint / "offsets", self.checkpoint / "commits", self.sources):
            folder.mkdir(parents=True, exist_ok=True)
        metadata = self.checkpoint / "metadata"
        if not metadata.exists():
            write_atomic(metadata, json.dumps({"id": str(uuid.uuid4())}))
        sweep(self.checkpoint)

    def query_id(self) -> str:
        try:
            return str(json.loads((self.checkpoint / "metadata").read_text())["id"])
        except (OSError, ValueError, KeyError, TypeError):
            return ""

    def planned(self) -> list[int]:
        return _numbered(self.checkpoint / "offsets")

    def committed_batches(self) -> list[int]:
        return _numbered(self.checkpoint / "commits")

    def pending(self) -> tuple[int, list[str]] | None:
        """The newest micro-batch planned and not committed, with the files it reads
        (None: none; ValueError: its log is unreadable)."""
        planned = self.planned()
        if not planned or planned[-1] in set(self.committed_batches()):
            return None
        batch = planned[-1]
        files = self.files(batch)
        if files is None:
            raise ValueError(
                f"{self.checkpoint}: micro-batch {batch} is planned, its files unreadable"
            )
        return batch, files

    def plan(
        self, batch_id: int, files: Sequence[str], stamps: Sequence[int] | None = None
    ) -> None:
        """Logs ``files`` at the next source offset, then micro-batch ``batch_id`` at it;
        ``stamps``: each file's modification time in ms, as Spark logs it (default: now)."""
        previous = self._log_offset(batch_id - 1) if batch_id > 0 else -1
        if previous is None:  # no earlier micro-batch in the log: after every offset there
            previous = max(self._offsets(), default=-1)
        offset = previous + 1
        now = int(time.time() * 1000)
        times = list(stamps) if stamps is not None else [now] * len(files)
        entries = [
            {"path": path, "timestamp": at, "batchId": offset}
            for path, at in zip(files, times, strict=True)
        ]
        lines = [json.dumps(e, separators=(",", ":")) for e in entries]
        if (offset + 1) % COMPACT_INTERVAL == 0:
            self._write_lines(self.sources / f"{offset}.compact", self._before(offset) + lines)
            # an offset logged without its micro-batch (a crash) is written again here: its
            # plain file would shadow this compact file for every reader (SourceLog)
            (self.sources / str(offset)).unlink(missing_ok=True)
        else:
            self._write_lines(self.sources / str(offset), lines)
        metadata = {"batchWatermarkMs": 0, "batchTimestampMs": now, "conf": self._conf()}
        tight = (",", ":")
        head = [
            json.dumps(metadata, separators=tight),
            json.dumps({"logOffset": offset}, separators=tight),
        ]
        text = "\n".join(["v1", *head])
        write_atomic(self.checkpoint / "offsets" / str(batch_id), text)

    def seen(self) -> set[str]:
        """Every file a planned micro-batch reads or read: the log's entries up to the
        offset of the newest planned micro-batch (what the file source's ``seenFiles``
        holds after a restart). An offset logged after it, by a run that stopped before
        planning its micro-batch, is not seen: its files are found again and read in the
        next micro-batch (:meth:`plan` writes that offset again); ValueError: the log is
        unreadable."""
        planned = self.planned()
        if not planned:
            return set()
        last = self._log_offset(planned[-1])
        if last is None:
            raise ValueError(f"{self.checkpoint}: offsets of micro-batch {planned[-1]} unreadable")
        return {str(json.loads(line)["path"]) for line in self._through(last)}

    def _through(self, last: int) -> list[str]:
        """Every entry logged at offsets up to ``last``: the newest compact file at or
        before it (it holds every earlier entry) and the plain files after it."""
        compacts = [
            o for o in self._offsets() if o <= last and (self.sources / f"{o}.compact").is_file()
        ]
        first, lines = 0, []
        if compacts:
            newest = max(compacts)
            lines = _lines(self.sources / f"{newest}.compact")
            first = newest + 1
        for at in range(first, last + 1):
            plain = self.sources / str(at)
            if not plain.is_file():
                raise ValueError(f"{self.checkpoint}: file-source log offset {at} is missing")
            lines += _lines(plain)
        return lines

    def commit(self, batch_id: int) -> None:
        write_atomic(self.checkpoint / "commits" / str(batch_id), 'v1\n{"nextBatchWatermarkMs":0}')
        if batch_id % COMPACT_INTERVAL == 0:
            self.clean(batch_id)

    def clean(self, batch_id: int) -> None:
        """Deletes offsets and commits older than the :data:`RETAINED` newest, and the
        file-source log files a compact file at least as old as the oldest offset kept
        holds (a reader of a kept micro-batch finds its files in that compact file)."""
        oldest = batch_id - RETAINED
        if oldest <= 0:
            return
        for folder in ("offsets", "commits"):
            for old in _numbered(self.checkpoint / folder):
                if old < oldest:
                    (self.checkpoint / folder / str(old)).unlink(missing_ok=True)
        kept = self._log_offset(oldest)
        if kept is None:
            return
        compacts = [o for o in self._offsets() if (self.sources / f"{o}.compact").is_file()]
        holder = max((c for c in compacts if c < kept), default=None)
        if holder is None:
            return
        for offset in self._offsets():
            if offset < holder:
                (self.sources / str(offset)).unlink(missing_ok=True)
                (self.sources / f"{offset}.compact").unlink(missing_ok=True)

    def _conf(self) -> dict[str, Any]:
        """The newest offsets' SQL confs (Spark's, when it ran the scan before), so that
        a file-source query resuming from this log reads the confs it wrote."""
        planned = self.planned()
        if not planned:
            return {}
        try:
            lines = (self.checkpoint / "offsets" / str(planned[-1])).read_text().splitlines()
            conf = json.loads(lines[1]).get("conf", {})
        except (OSError, ValueError, IndexError, AttributeError):
            return {}
        return conf if isinstance(conf, dict) else {}

    def _offsets(self) -> list[int]:
        if not self.sources.is_dir():
            return []
        return sorted(
            int(p.name.split(".")[0])
            for p in self.sources.iterdir()
            if p.name.split(".")[0].isdigit()
        )

    def _before(self, offset: int) -> list[str]:
        """Every entry logged before ``offset`` (a compact file holds them all): the
        previous compact file's lines and the plain files after it, as Spark compacts."""
        previous = offset - COMPACT_INTERVAL
        first, lines = 0, []
        if previous >= 0 and (self.sources / f"{previous}.compact").is_file():
            lines = _lines(self.sources / f"{previous}.compact")
            first = previous + 1
        for at in range(first, offset):
            plain = self.sources / str(at)
            if not plain.is_file():
                raise ValueError(f"{self.checkpoint}: file-source log offset {at} is missing")
            lines += _lines(plain)
        return lines

    @staticmethod
    def _write_lines(path: Path, lines: list[str]) -> None:
        write_atomic(path, "\n".join(["v1", *lines]))


def _lines(path: Path) -> list[str]:
    lines = path.read_text().splitlines()
    if not lines or lines[0] != "v1":
        raise ValueError(f"{path}: not a file-source log")
    return [line for line in lines[1:] if line.strip()]


def _numbered(folder: Path) -> list[int]:
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


def file_uri(path: Path) -> str:
    """A file's URI as Spark's file source logs it (``batch=1`` unescaped)."""
    return "file://" + quote(str(path.absolute()), safe="/=:@!$&'()*+,;-._~")


def local_path(uri: str) -> str:
    return unquote(uri[len("file://") :]) if uri.startswith("file://") else uri
