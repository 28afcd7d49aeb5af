"""Schema definitions (attributes, tuple id, event time) that streams are created from.

The security catalog keeps a SCHEMA as an OxRBAC object (owner, grants) only; the
attribute list a stream copies when it is added lives here, one JSON file per schema
under the storage root, written atomically so that a crash never leaves half a schema.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from streamshield.durable import write_atomic


@dataclass(frozen=True)
class SchemaDef:
    name: str
    attributes: tuple[tuple[str, str], ...]
    tid: str
    event_time: str | None = None


class SchemaStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)

    def save(self, schema: SchemaDef) -> None:
        data = {
            "attributes": [list(a) for a in schema.attributes],
            "tid": schema.tid,
            "event_time": schema.event_time,
        }
        write_atomic(self.root / f"{schema.name}.json", json.dumps(data))

    def load(self, name: str) -> SchemaDef | None:
        path = self.root / f"{name}.json"
        if not path.is_file():
            return None
        data = json.loads(path.read_text())
        attributes = tuple((a, t) for a, t in data["attributes"])
        return SchemaDef(name, attributes, data["tid"], data["event_time"])
