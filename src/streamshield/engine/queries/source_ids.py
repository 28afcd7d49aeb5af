"""Stable provenance bit ids for source streams, kept next to the checkpoints.

A source stream's bit must not move while a query runs or across a restart: streaming
aggregates keep OR-ed provenance words in their checkpointed state. Ids are assigned
in the order streams first appear here and written to a small JSON file, so a stream
registered later appends a bit and never renumbers the others.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from streamshield.durable import write_atomic
from streamshield.policy.provenance import ProvenanceCodec


class SourceIds:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        known = json.loads(self.path.read_text()) if self.path.exists() else []
        self.codec = ProvenanceCodec(known)

    def add(self, streams: Iterable[str]) -> None:
        """Give every stream not known yet the next free bit (persisted first)."""
        new = [s for s in streams if s not in self.codec.streams]
        if not new:
            return
        codec = self.codec.appended(new)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, json.dumps(list(codec.streams)))
        self.codec = codec
