"""Unfinished writes that a killed process leaves in a streaming checkpoint.

Spark writes every offset and commit log entry to a hidden temporary file
(``.0.<uuid>.tmp`` and its ``..0.<uuid>.tmp.crc``) and renames it into place. A process
killed between the two leaves the temporary file behind. Spark 4 refuses to start a query
whose log holds no batch yet but whose ``offsets`` directory is not empty
(``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``), so a single SIGKILL during the very
first batch would stop that query for good, and a restart loop would retry forever.
Nothing ever reads a temporary file, so removing them before a start loses nothing."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql.streaming import DataStreamWriter

log = logging.getLogger(__name__)

LOGS = ("offsets", "commits")


def is_leftover(path: Path) -> bool:
    name = path.name
    return name.startswith(".") and (name.endswith(".tmp") or name.endswith(".tmp.crc"))


def sweep(checkpoint: str | Path) -> list[Path]:
    """Removes the unfinished log writes under ``checkpoint``; returns what was removed.
    Call it only while no query runs on that checkpoint (that is, before starting it)."""
    removed = []
    for name in LOGS:
        folder = Path(checkpoint) / name
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            if path.is_file() and is_leftover(path):
                path.unlink(missing_ok=True)
                removed.append(path)
    if removed:
        log.warning("removed %d unfinished checkpoint write(s) under %s", len(removed), checkpoint)
    return removed


def at_checkpoint(writer: DataStreamWriter, checkpoint: str | Path) -> DataStreamWriter:
    """``writer`` set to ``checkpoint`` after the leftovers there are swept: every
    streaming query of the project is given its checkpoint through here."""
    sweep(checkpoint)
    return writer.option("checkpointLocation", str(checkpoint))
