"""Schema definitions (attributes, tuple id, event time) that streams are created from.

The security catalog keeps a SCHEMA as an OxRBAC object (owner, grants) only; the
attribute list a stream copies when it is added lives here, one JSON file per schema
under the storage root, written atomically so that a crash never leaves half a schema.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from streamshield.durable import pending, promote, write_atomic


@dataclass(frozen=True)
class SchemaDef:
    name: str
    attributes: tuple[tuple[str, str], ...]
    tid: str
    event_time: str | None = None
    not_null: tuple[str, ...] = ()
    tags: dict[str, list[str]] = field(default_factory=dict, hash=False, compare=True)
    """Classification tags per attribute, copied into each stream made from the schema."""


class SchemaStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)

    def save(self, schema: SchemaDef) -> None:
        write_atomic(self._path(schema.name), _json(schema))

    def stage(self, schema: SchemaDef) -> None:
        """Written before the catalog records the schema (:func:`~streamshield.durable.promote`)."""
        write_atomic(pending(self._path(schema.name)), _json(schema))

    def commit(self, name: str) -> None:
        """The catalog recorded it: the staged definition is the schema's."""
        promote(self._path(name))

    def discard(self, name: str) -> None:
        """The catalog refused it: the staged definition goes."""
        pending(self._path(name)).unlink(missing_ok=True)

    def load(self, name: str) -> SchemaDef | None:
        """The definition of a schema the catalog knows (callers check that first); a
        staged one left by a crash after the catalog recorded it is promoted here."""
        path = self._path(name)
        if not path.is_file() and not promote(path):
            return None
        data = json.loads(path.read_text())
        attributes = tuple((a, t) for a, t in data["attributes"])
        not_null = tuple(data.get("not_null", ()))  # absent: written before NOT NULL existed
        tags = dict(data.get("tags", {}))  # absent: written before tags existed
        return SchemaDef(name, attributes, data["tid"], data["event_time"], not_null, tags)

    def _path(self, name: str) -> Path:
        return self.root / f"{name}.json"


def _json(schema: SchemaDef) -> str:
    data = {
        "attributes": [list(a) for a in schema.attributes],
        "tid": schema.tid,
        "event_time": schema.event_time,
        "not_null": list(schema.not_null),
        "tags": schema.tags,
    }
    return json.dumps(data)
