"""The catalog: registered streams, roles, server-side policies and landing bookkeeping.

The interface is a :class:`Catalog` protocol so that a later PostgreSQL store can sit
behind it; :class:`SqliteCatalog` is the zero-set-up default (stdlib ``sqlite3``,
one file). All SQL lives in this module and stays plain (no JSON columns, no
SQLite-only functions beyond upserts) so that porting it is mechanical.

Every operation opens its own connection and runs in one ``BEGIN IMMEDIATE``
transaction: several processes (providers' landing, the Spark driver, admin
commands) may share one catalog file, and a half-applied change (say, a role set
without its edges) must never be observed. Server policies are stored as their CQL
text, the same text an administrator wrote, and re-parsed on read.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol, runtime_checkable

from streamshield.catalog.streams import StreamDefinition
from streamshield.lang.cql import parse_policy, parse_statements
from streamshield.policy.elements import Channel
from streamshield.policy.patterns import Literal, OneOf, Pattern
from streamshield.policy.policy import Combine, ServerPolicy
from streamshield.policy.roles import RoleHierarchy

_BUSY_TIMEOUT = 30.0  # seconds to wait for another process's write lock
SERVER_POLICY_TS = 1
"""Timestamp given to server-side sps: they form no provider batch, so any fixed value works."""


class CatalogError(Exception):
    """A catalog request that cannot be served."""


class StreamExists(CatalogError):
    """A stream of that name (ignoring case) is already registered."""


class UnknownStreamError(CatalogError, LookupError):
    """No stream of that name is registered."""


@runtime_checkable
class Catalog(Protocol):
    """What the landing zone, the engine and the server need from a catalog store."""

    def register_stream(self, definition: StreamDefinition) -> None: ...

    def stream(self, name: str) -> StreamDefinition: ...

    def streams(self) -> list[StreamDefinition]: ...

    def set_roles(self, roles: Iterable[str], junior_of: Iterable[tuple[str, str]]) -> None: ...

    def hierarchy(self) -> RoleHierarchy: ...

    def set_server_policy(self, stream: str, cql_text: str, mode: Combine) -> None: ...

    def server_policies(self) -> dict[str, ServerPolicy]: ...

    def last_seq(self, channel: Channel) -> int: ...

    def advance_seq(self, channel: Channel, seq: int) -> None: ...

    def count_rejection(self, stream: str | None, reason: str, n: int = 1) -> None: ...

    def rejections(self) -> dict[tuple[str, str], int]: ...


def named_roles(pattern: Pattern) -> list[str]:
    """Role names a pattern spells out literally (globs and ``*`` name none).

    A literal naming a role the hierarchy lacks makes an sp unusable (deny by default),
    so callers reject it up front instead of storing a policy that can never apply.
    """
    if isinstance(pattern, Literal):
        return [str(pattern.value)]
    if isinstance(pattern, OneOf):
        return sorted(str(literal.value) for literal in pattern.values)
    return []


_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS streams (
        name TEXT PRIMARY KEY COLLATE NOCASE,
        tid TEXT NOT NULL,
        event_time TEXT
    )""",
    """CREATE TABLE IF NOT EXISTS stream_attributes (
        stream TEXT NOT NULL,
        position INTEGER NOT NULL,
        name TEXT NOT NULL,
        type TEXT NOT NULL,
        PRIMARY KEY (stream, position)
    )""",
    "CREATE TABLE IF NOT EXISTS roles (name TEXT PRIMARY KEY)",
    """CREATE TABLE IF NOT EXISTS role_juniors (
        senior TEXT NOT NULL,
        junior TEXT NOT NULL,
        PRIMARY KEY (senior, junior)
    )""",
    """CREATE TABLE IF NOT EXISTS server_policies (
        stream TEXT PRIMARY KEY,
        cql TEXT NOT NULL,
        mode TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS channel_seqs (
        stream TEXT NOT NULL,
        provider TEXT NOT NULL,
        seq INTEGER NOT NULL,
        PRIMARY KEY (stream, provider)
    )""",
    """CREATE TABLE IF NOT EXISTS rejections (
        stream TEXT NOT NULL,
        reason TEXT NOT NULL,
        count INTEGER NOT NULL,
        PRIMARY KEY (stream, reason)
    )""",
)


class SqliteCatalog:
    """A :class:`Catalog` in one SQLite file; the schema is created on first open.

    Data survives reopening the same path. ``path`` must be a file (not ``:memory:``),
    because each operation uses a fresh connection.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT)
        try:
            # WAL lets readers (the Spark driver polling policies) run beside a writer.
            db.execute("PRAGMA journal_mode=WAL")
        finally:
            db.close()
        with self._transaction(write=True) as db:
            for statement in _SCHEMA:
                db.execute(statement)

    @contextmanager
    def _transaction(self, write: bool = False) -> Iterator[sqlite3.Connection]:
        """One connection, one transaction: all of it is committed or none of it.

        Writers take the write lock up front (``IMMEDIATE``) so that a read-then-write
        check such as "is this name free?" cannot interleave with another writer.
        """
        db = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT, isolation_level=None)
        try:
            db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield db
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            db.close()

    # -- streams ---------------------------------------------------------------------------

    def register_stream(self, definition: StreamDefinition) -> None:
        """Adds a stream; StreamExists if the name (ignoring case) is taken.

        Case-insensitive uniqueness: stream names become directories, and on a
        case-insensitive file system two such streams would share one.
        """
        with self._transaction(write=True) as db:
            if db.execute("SELECT 1 FROM streams WHERE name = ?", (definition.name,)).fetchone():
                raise StreamExists(definition.name)
            db.execute(
                "INSERT INTO streams (name, tid, event_time) VALUES (?, ?, ?)",
                (definition.name, definition.tid, definition.event_time),
            )
            db.executemany(
                "INSERT INTO stream_attributes (stream, position, name, type) VALUES (?, ?, ?, ?)",
                [(definition.name, i, n, t) for i, (n, t) in enumerate(definition.attributes)],
            )

    def stream(self, name: str) -> StreamDefinition:
        """The stream of exactly this name, or UnknownStreamError."""
        with self._transaction() as db:
            row = db.execute(
                "SELECT name, tid, event_time FROM streams WHERE name = ? COLLATE BINARY",
                (name,),
            ).fetchone()
            if row is None:
                raise UnknownStreamError(name)
            return _definition(db, *row)

    def streams(self) -> list[StreamDefinition]:
        """All streams, sorted by name."""
        with self._transaction() as db:
            rows = db.execute(
                "SELECT name, tid, event_time FROM streams ORDER BY name COLLATE BINARY"
            ).fetchall()
            return [_definition(db, *row) for row in rows]

    # -- roles -----------------------------------------------------------------------------

    def set_roles(self, roles: Iterable[str], junior_of: Iterable[tuple[str, str]]) -> None:
        """Replaces all roles and (senior, junior) edges; invalid hierarchies change nothing."""
        roles, junior_of = list(roles), list(junior_of)
        for role in roles:
            if not isinstance(role, str) or not role:
                raise ValueError(f"role names must be non-empty strings, got {role!r}")
        hierarchy = RoleHierarchy.build(roles, junior_of)  # unknown roles, cycles
        with self._transaction(write=True) as db:
            db.execute("DELETE FROM role_juniors")
            db.execute("DELETE FROM roles")
            db.executemany("INSERT INTO roles (name) VALUES (?)", [(r,) for r in hierarchy.roles])
            db.executemany(
                "INSERT INTO role_juniors (senior, junior) VALUES (?, ?)",
                sorted(set(junior_of)),
            )

    def hierarchy(self) -> RoleHierarchy:
        """The stored hierarchy; an empty one when no roles were set."""
        with self._transaction() as db:
            roles = [r for (r,) in db.execute("SELECT name FROM roles")]
            edges = db.execute("SELECT senior, junior FROM role_juniors").fetchall()
        return RoleHierarchy.build(roles, edges)

    # -- server-side policies --------------------------------------------------------------

    def set_server_policy(self, stream: str, cql_text: str, mode: Combine) -> None:
        """Stores (replaces) a stream's server-side policy after checking it parses.

        Every statement must be ``INTO STREAM <stream>`` and name only known roles: a
        policy that can never apply as written is refused here, not discovered later.
        """
        mode = Combine(mode)
        _check_server_policy(stream, cql_text, self.hierarchy())
        with self._transaction(write=True) as db:
            known = "SELECT 1 FROM streams WHERE name = ? COLLATE BINARY"
            if db.execute(known, (stream,)).fetchone() is None:
                raise UnknownStreamError(stream)
            db.execute(
                "INSERT INTO server_policies (stream, cql, mode) VALUES (?, ?, ?) "
                "ON CONFLICT (stream) DO UPDATE SET cql = excluded.cql, mode = excluded.mode",
                (stream, cql_text, mode.value),
            )

    def server_policies(self) -> dict[str, ServerPolicy]:
        """Server-side policies by stream, parsed from their stored CQL."""
        with self._transaction() as db:
            rows = db.execute("SELECT stream, cql, mode FROM server_policies").fetchall()
        return {
            stream: ServerPolicy(parse_policy(cql, ts=SERVER_POLICY_TS).sps, Combine(mode))
            for stream, cql, mode in sorted(rows)
        }

    # -- landing bookkeeping ---------------------------------------------------------------

    def last_seq(self, channel: Channel) -> int:
        """The last seq accepted on a channel, -1 if none."""
        with self._transaction() as db:
            row = db.execute(
                "SELECT seq FROM channel_seqs WHERE stream = ? AND provider = ?",
                (channel.stream, channel.provider),
            ).fetchone()
        return -1 if row is None else row[0]

    def advance_seq(self, channel: Channel, seq: int) -> None:
        """Records ``seq`` as accepted; never moves a channel backwards."""
        with self._transaction(write=True) as db:
            db.execute(
                "INSERT INTO channel_seqs (stream, provider, seq) VALUES (?, ?, ?) "
                "ON CONFLICT (stream, provider) DO UPDATE SET seq = MAX(seq, excluded.seq)",
                (channel.stream, channel.provider, seq),
            )

    def count_rejection(self, stream: str | None, reason: str, n: int = 1) -> None:
        """Adds ``n`` rejections of ``reason`` for ``stream`` (None: not attributable)."""
        with self._transaction(write=True) as db:
            db.execute(
                "INSERT INTO rejections (stream, reason, count) VALUES (?, ?, ?) "
                "ON CONFLICT (stream, reason) DO UPDATE SET count = count + excluded.count",
                (stream or "", reason, n),
            )

    def rejections(self) -> dict[tuple[str, str], int]:
        """Rejection counts by (stream or "", reason code)."""
        with self._transaction() as db:
            rows = db.execute("SELECT stream, reason, count FROM rejections").fetchall()
        return {(stream, reason): count for stream, reason, count in rows}


def _definition(
    db: sqlite3.Connection, name: str, tid: str, event_time: str | None
) -> StreamDefinition:
    attributes = db.execute(
        "SELECT name, type FROM stream_attributes WHERE stream = ? ORDER BY position", (name,)
    ).fetchall()
    return StreamDefinition(name, tuple(attributes), tid, event_time)


def _hierarchy(db: sqlite3.Connection) -> RoleHierarchy:
    roles = [role for (role,) in db.execute("SELECT name FROM roles")]
    edges = db.execute("SELECT senior, junior FROM role_juniors").fetchall()
    return RoleHierarchy.build(roles, edges)


def _check_server_policy(stream: str, cql_text: str, hierarchy: RoleHierarchy) -> None:
    parse_policy(cql_text, ts=SERVER_POLICY_TS)  # CqlError / PolicyError, both ValueErrors
    for statement in parse_statements(cql_text):
        if statement.stream != stream:
            raise ValueError(
                f"server policy for {stream} has a statement INTO STREAM {statement.stream}"
            )
        unknown = [r for r in named_roles(statement.srp.roles) if r not in hierarchy.juniors]
        if unknown:
            raise ValueError(f"server policy for {stream} names unknown roles {unknown}")
