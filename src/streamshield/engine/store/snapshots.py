"""Per-batch JSON snapshots, written atomically: the state a replayed batch starts from.

Snapshot N is written after batch N's output is committed; batch N starts from exactly
snapshot N-1 (:meth:`Snapshots.start_of`). A replay of N starts from the same state again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from streamshield.durable import write_atomic


class ShieldStateError(RuntimeError):
    """The shield state a batch must start from is missing or unreadable: refuse to guess.

    Never answered by an older snapshot or an empty state: an older state can let a
    tuple pass under a policy that was already replaced. The class name appears in the
    streaming query's failure, which is how the server tells this stop apart from a
    transient one (:mod:`streamshield.server.ingest_guard`).
    """


class Snapshots:
    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def start_of(self, batch_id: int, initial: Any) -> Any:
        """The state batch ``batch_id`` starts from: ``initial`` for batch 0, else exactly
        snapshot N-1; missing or unreadable is a ShieldStateError, never an older one (a
        rolled-back state would re-number or re-emit what was already sent)."""
        if batch_id == 0:
            return initial
        path = self.directory / f"{batch_id - 1}.json"
        try:
            return json.loads(path.read_bytes())
        except FileNotFoundError:
            raise ShieldStateError(f"state snapshot {path.name} is missing") from None
        except (OSError, ValueError):
            raise ShieldStateError(f"state snapshot {path.name} is unreadable") from None

    def before(self, batch_id: int) -> Any | None:
        """The newest snapshot of a batch before ``batch_id``, or None if there is none
        (for hints only, such as a join's last strategies: security state uses
        :meth:`start_of`)."""
        earlier = [int(p.stem) for p in self.directory.glob("*.json") if int(p.stem) < batch_id]
        if not earlier:
            return None
        return json.loads((self.directory / f"{max(earlier)}.json").read_text())

    def save(self, batch_id: int, data: Any) -> None:
        write_atomic(self.directory / f"{batch_id}.json", json.dumps(data))
