"""What the server needs to restart a query that the security catalog does not keep.

The catalog records a query's owner, roles, inputs, output stream and status, not its
text, nor the internal name its checkpoints live under. Both are kept here, one JSON
file per query under the storage root, written atomically (a crash never leaves half a
definition), so that after a restart a query recorded as running resumes from its own
checkpoint with its owner's recorded roles.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from streamshield.durable import pending, promote, write_atomic


@dataclass(frozen=True)
class StoredQuery:
    name: str
    text: str
    output: str
    internal: str
    level: str | None = None
    """The Chinese-Wall level it runs at (``[1, B]``), fixed at registration from the
    session's; None: registered while levels were off."""


class QueryStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)

    def save(self, query: StoredQuery) -> None:
        write_atomic(self._path(query.name), json.dumps(asdict(query)))

    def stage(self, query: StoredQuery) -> None:
        """Written before the catalog records the query (:func:`~streamshield.durable.promote`)."""
        write_atomic(pending(self._path(query.name)), json.dumps(asdict(query)))

    def commit(self, name: str) -> None:
        """The catalog recorded it and it started: the staged definition is the query's."""
        promote(self._path(name))

    def discard(self, name: str) -> None:
        """The catalog refused it or it did not start: the staged definition goes."""
        pending(self._path(name)).unlink(missing_ok=True)

    def load(self, name: str) -> StoredQuery | None:
        """The stored definition of a query the catalog records; a staged one left by a
        crash after the catalog recorded it is promoted here. None when missing or
        unreadable (never a guess)."""
        path = self._path(name)
        if not path.is_file() and not promote(path):
            return None
        try:
            data = json.loads(path.read_text())
            level = data.get("level")
            if level is not None and not isinstance(level, str):
                return None
            return StoredQuery(data["name"], data["text"], data["output"], data["internal"], level)
        except (ValueError, KeyError, TypeError):
            return None

    def remove(self, name: str) -> None:
        self._path(name).unlink(missing_ok=True)
        pending(self._path(name)).unlink(missing_ok=True)

    def _path(self, name: str) -> Path:
        return self.root / f"{name}.json"
