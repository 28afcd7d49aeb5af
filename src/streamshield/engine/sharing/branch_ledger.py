"""How far each branch of a shared network has read its stream, durably.

A branch covers the labelled store's ingest batches up to some id: its output of a
micro-batch is stored under the newest ingest id it covers (deterministic, so a replay
replaces the stored batch instead of adding a second copy), then the ledger moves on.
A branch that stops keeps its entry, so starting it again reads exactly the batches it
missed; removing the query drops the entry. A branch without an entry has never been
received: it reads the kept history at its first opening.
"""

from __future__ import annotations

import json
from pathlib import Path

from streamshield.durable import write_atomic

NOTHING = -1
"""The covered id of a branch that has read nothing yet."""


class BranchLedger:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def covered(self, branch: str) -> int:
        """The newest ingest batch ``branch`` has covered (NOTHING if none or unreadable:
        reading again is safe, stored batches are replaced, never doubled)."""
        try:
            value = json.loads(self._path(branch).read_text())["covered"]
        except (OSError, ValueError, KeyError, TypeError):
            return NOTHING
        return value if isinstance(value, int) and value >= NOTHING else NOTHING

    def has(self, branch: str) -> bool:
        """Whether ``branch`` has an entry: it has computed (or moved on) at least once.
        A branch without one has never been received: its history waits for its first
        opening (engine/sharing/branched_network.py, ``open``)."""
        return self._path(branch).exists()

    def advance(self, branch: str, covered: int) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        write_atomic(self._path(branch), json.dumps({"covered": covered}))

    def drop(self, branch: str) -> None:
        self._path(branch).unlink(missing_ok=True)

    def _path(self, branch: str) -> Path:
        if not branch or "/" in branch or branch.startswith("."):
            raise ValueError(f"{branch!r} is not a branch name")
        return self.root / f"{branch}.json"


def owes(branch: object, after: int, upto: int) -> bool:
    """Whether ``branch``'s sink delivered an output in ``(after, upto]`` and a crash came
    before it was stored (engine/store/result_store.py, ``owed``): that output must then be
    computed and stored again, even while the branch's switch is off, or its subscriber
    would hold rows its store never has."""
    return bool(owed_between(branch, after, upto))


def owed_between(branch: object, after: int, upto: int) -> list[int]:
    """The ids of :func:`owes`, oldest first: each must be stored again under its own id
    (its subscriber may have had it under that id), not folded into a later output."""
    owed = getattr(getattr(branch, "sink", None), "owed", None)
    return [] if owed is None else [i for i in owed() if after < i <= upto]
