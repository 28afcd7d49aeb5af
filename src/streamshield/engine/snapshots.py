"""Per-batch JSON snapshots, written atomically: the state a replayed batch starts from.

Snapshot N is written after batch N's output is committed; batch N starts from the
newest snapshot below N. A replay of N therefore starts from the same state again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from streamshield.durable import write_atomic


class Snapshots:
    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def before(self, batch_id: int) -> Any | None:
        """The newest snapshot of a batch before ``batch_id``, or None if there is none."""
        earlier = [int(p.stem) for p in self.directory.glob("*.json") if int(p.stem) < batch_id]
        if not earlier:
            return None
        return json.loads((self.directory / f"{max(earlier)}.json").read_text())

    def save(self, batch_id: int, data: Any) -> None:
        write_atomic(self.directory / f"{batch_id}.json", json.dumps(data))
