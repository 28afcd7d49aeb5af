"""The catalog: registered streams, roles, server-side policies and landing bookkeeping.

The interface is a :class:`Catalog` protocol; :class:`SqlCatalog` implements it on
SQLAlchemy Core for a SQLite file (the zero-set-up default) or PostgreSQL, in the same
database as the security tables (:mod:`streamshield.catalog.security`).
:class:`SqliteCatalog` is the old name and constructor (a file path) kept for callers.

Every operation runs in one transaction (:func:`database.transaction`): several
processes (providers' landing, the Spark driver, admin commands) may share one
catalog, writers are serialised, and a half-applied change (say, a role set without
its edges) is never observed. Server policies are stored as their CQL text, the same
text an administrator wrote, and re-parsed on read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol, runtime_checkable

from sqlalchemy import Connection, Engine, case, delete, func, insert, select, update

from streamshield.catalog import migrations
from streamshield.catalog import tables as t
from streamshield.catalog.database import UrlOrEngine, open_engine, transaction, upsert
from streamshield.catalog.streams import StreamDefinition
from streamshield.catalog.view import CatalogView
from streamshield.lang.cql import parse_policy, parse_statements
from streamshield.policy.elements import Channel
from streamshield.policy.policy import Combine, ServerPolicy
from streamshield.policy.roles import RoleHierarchy, capacity_for
from streamshield.policy.sp_patterns import Glob, Literal, OneOf, Pattern
from streamshield.policy.tag_policies import is_scope_pattern, scope_takes_in

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


DEFAULT_ROLE_CAPACITY = 64
"""Roles a new root's labels make room for (one 64-bit word per privilege block)."""


class SqlCatalog:
    """A :class:`Catalog` on SQLAlchemy Core; opening migrates the schema to the head
    revision (:mod:`streamshield.catalog.migrations`).

    ``target`` is a database URL (``postgresql+psycopg://user@host/db``,
    ``sqlite:///path``), a SQLite file path, or an :class:`~sqlalchemy.Engine`.
    Opening is idempotent and data survives reopening.
    """

    def __init__(self, target: UrlOrEngine) -> None:
        self.engine: Engine = open_engine(target)
        self.view: CatalogView | None = None
        """Set by :class:`~streamshield.catalog.security.SecurityCatalog`: streams and the
        hierarchy are then kept until the catalog version moves."""
        with transaction(self.engine, write=True) as db:
            migrations.upgrade(db)

    # -- streams ---------------------------------------------------------------------------

    def register_stream(self, definition: StreamDefinition) -> None:
        """Adds a stream; StreamExists if the name (ignoring case) is taken.

        Case-insensitive uniqueness: stream names become directories, and on a
        case-insensitive file system two such streams would share one.
        """
        with transaction(self.engine, write=True) as db:
            insert_stream(db, definition)

    def stream(self, name: str) -> StreamDefinition:
        """The stream of exactly this name, or UnknownStreamError."""
        with transaction(self.engine) as db:
            definition = find_stream(db, name)
        if definition is None:
            raise UnknownStreamError(name)
        return definition

    def streams(self) -> list[StreamDefinition]:
        """All streams, sorted by name (binary order); kept by the security catalog's
        view when there is one (the landing zone asks with every append)."""
        if self.view is None:
            return self._streams()
        return list(self.view.lookup(("streams",), lambda: tuple(self._streams())))

    def _streams(self) -> list[StreamDefinition]:
        with transaction(self.engine) as db:
            rows = db.execute(select(t.streams.c.name, t.streams.c.tid, t.streams.c.event_time))
            found = [_definition(db, *row) for row in rows.all()]
        return sorted(found, key=lambda definition: definition.name.encode())

    # -- roles -----------------------------------------------------------------------------

    def set_roles(self, roles: Iterable[str], junior_of: Iterable[tuple[str, str]]) -> None:
        """Replaces all roles and (senior, junior) edges; invalid hierarchies change nothing.

        This *lays out* the root's labels anew (positions in sorted order, the capacity
        grown to fit): it is the set-up of a root before any data is labelled. On a
        running root, add roles and edges one by one (:func:`store_hierarchy`), which
        keeps every position and the width.
        """
        roles, junior_of = list(roles), list(junior_of)
        for role in roles:
            if not isinstance(role, str) or not role:
                raise ValueError(f"role names must be non-empty strings, got {role!r}")
        RoleHierarchy.build(roles, junior_of)  # unknown roles, cycles
        with transaction(self.engine, write=True) as db:
            capacity = max(role_capacity(db), capacity_for(len(set(roles))))
            hierarchy = RoleHierarchy.build(
                roles, junior_of, order=sorted(set(roles)), capacity=capacity
            )
            db.execute(delete(t.role_juniors))
            db.execute(delete(t.roles))
            set_role_capacity(db, capacity)
            store_hierarchy(db, hierarchy)

    def hierarchy(self) -> RoleHierarchy:
        """The stored hierarchy; an empty one when no roles were set (kept by the view
        when there is one)."""

        def read() -> RoleHierarchy:
            with transaction(self.engine) as db:
                return load_hierarchy(db)

        return read() if self.view is None else self.view.lookup(("hierarchy",), read)

    # -- server-side policies --------------------------------------------------------------

    def set_server_policy(self, stream: str, cql_text: str, mode: Combine) -> None:
        """Stores (replaces) the server-side policy of a scope after checking it parses.

        The scope ``stream`` is one stream's name, or a stream-name glob (``ward*``,
        ``*``) that also takes in streams registered later. Every statement must be
        ``INTO STREAM <stream>`` (for a glob: a stream it takes in, or no stream) and
        name only known roles; a registered stream must not end up under policies of
        both modes. A policy that can never apply as written is refused here, not
        discovered later.
        """
        with transaction(self.engine, write=True) as db:
            store_server_policy(db, stream, cql_text, Combine(mode))

    def server_policies(self) -> dict[str, ServerPolicy]:
        """Server-side policies by scope (a stream or a stream-name glob), parsed from
        their stored CQL, tags unresolved (policy.tag_policies resolves them per stream)."""
        with transaction(self.engine) as db:
            return load_server_policies(db)

    # -- landing bookkeeping ---------------------------------------------------------------

    def last_seq(self, channel: Channel) -> int:
        """The last seq accepted on a channel, -1 if none."""
        with transaction(self.engine) as db:
            seq = db.scalar(
                select(t.channel_seqs.c.seq).where(
                    t.channel_seqs.c.stream == channel.stream,
                    t.channel_seqs.c.provider == channel.provider,
                )
            )
        return -1 if seq is None else int(seq)

    def advance_seq(self, channel: Channel, seq: int) -> None:
        """Records ``seq`` as accepted; never moves a channel backwards."""
        current = t.channel_seqs.c.seq
        with transaction(self.engine, write=True, versioned=False) as db:
            upsert(
                db,
                t.channel_seqs,
                {"stream": channel.stream, "provider": channel.provider, "seq": seq},
                ["stream", "provider"],
                {"seq": lambda new: case((new.seq > current, new.seq), else_=current)},
            )

    def count_rejection(self, stream: str | None, reason: str, n: int = 1) -> None:
        """Adds ``n`` rejections of ``reason`` for ``stream`` (None: not attributable)."""
        with transaction(self.engine, write=True, versioned=False) as db:
            upsert(
                db,
                t.rejections,
                {"stream": stream or "", "reason": reason, "count": n},
                ["stream", "reason"],
                {"count": lambda new: t.rejections.c.count + new.count},
            )

    def rejections(self) -> dict[tuple[str, str], int]:
        """Rejection counts by (stream or "", reason code)."""
        with transaction(self.engine) as db:
            rows = db.execute(select(t.rejections)).all()
        return {(stream, reason): int(count) for stream, reason, count in rows}


class SqliteCatalog(SqlCatalog):
    """A :class:`SqlCatalog` in one SQLite file: the zero-set-up default.

    ``path`` must be a file (not ``:memory:``), because each operation uses a fresh
    connection. Kept so that callers written for the first catalog keep working.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        super().__init__(self.path)


# -- helpers shared with the security catalog (they run inside a caller's transaction) ------


def insert_stream(db: Connection, definition: StreamDefinition) -> None:
    """Adds a stream in the caller's writing transaction; StreamExists if the name is taken."""
    taken = select(t.streams.c.name).where(func.lower(t.streams.c.name) == definition.name.lower())
    if db.execute(taken).first() is not None:
        raise StreamExists(definition.name)
    modes = {
        Combine(mode): scope
        for scope, mode in db.execute(select(t.server_policies.c.stream, t.server_policies.c.mode))
        if scope_takes_in(scope, definition.name)
    }
    if len(modes) > 1:
        raise ValueError(
            f"stream {definition.name} would be under server policies of both modes "
            f"({', '.join(sorted(modes.values()))}): one mode per stream"
        )
    db.execute(
        insert(t.streams).values(
            name=definition.name, tid=definition.tid, event_time=definition.event_time
        )
    )
    db.execute(
        insert(t.stream_attributes),
        [
            {
                "stream": definition.name,
                "position": i,
                "name": n,
                "type": typ,
                "not_null": n in definition.not_null,
                "tags": tags_text(definition.tags_of.get(n, frozenset())),
            }
            for i, (n, typ) in enumerate(definition.attributes)
        ],
    )


def find_stream(db: Connection, name: str) -> StreamDefinition | None:
    """The stream of exactly this name, None if there is none."""
    row = db.execute(
        select(t.streams.c.name, t.streams.c.tid, t.streams.c.event_time).where(
            t.streams.c.name == name
        )
    ).first()
    return None if row is None else _definition(db, *row)


def load_hierarchy(db: Connection) -> RoleHierarchy:
    """The stored role hierarchy with its bit layout, read in the caller's transaction."""
    roles = db.scalars(select(t.roles.c.name).order_by(t.roles.c.position)).all()
    edges = [tuple(edge) for edge in db.execute(select(t.role_juniors)).all()]
    return RoleHierarchy.build(
        roles,
        edges,
        order=roles,
        capacity=role_capacity(db),
    )


def store_hierarchy(db: Connection, hierarchy: RoleHierarchy) -> None:
    """Writes a hierarchy that extends the stored one, in the caller's transaction.

    Roles already stored keep their rows (and so their positions); new roles are
    inserted at their index in ``hierarchy.roles``; the edges are replaced. A stored
    role missing from ``hierarchy`` or moved to another position is refused: that
    would re-read every stored label with other roles.
    """
    stored = dict(db.execute(select(t.roles.c.name, t.roles.c.position)).all())
    for position, role in enumerate(hierarchy.roles):
        if role in stored:
            if stored.pop(role) != position:
                raise ValueError(f"role {role!r} would move to another bit position")
        else:
            db.execute(insert(t.roles).values(name=role, position=position))
    if stored:
        raise ValueError(f"roles {sorted(stored)} would be removed")
    db.execute(delete(t.role_juniors))
    if hierarchy.edges:
        db.execute(insert(t.role_juniors), [{"senior": s, "junior": j} for s, j in hierarchy.edges])


def role_capacity(db: Connection) -> int:
    """The root's fixed role capacity (label width in roles)."""
    value = db.scalar(select(t.catalog_meta.c.value).where(t.catalog_meta.c.key == "role_capacity"))
    return DEFAULT_ROLE_CAPACITY if value is None else int(json.loads(value))


def set_role_capacity(db: Connection, capacity: int) -> None:
    """Records the capacity; only sound while no label of this root is stored."""
    if capacity <= 0 or capacity % 64:
        raise ValueError(f"a role capacity is a positive multiple of 64, got {capacity}")
    row = {"key": "role_capacity", "value": json.dumps(capacity)}
    upsert(db, t.catalog_meta, row, ["key"], {"value": row["value"]})


def _definition(db: Connection, name: str, tid: str, event_time: str | None) -> StreamDefinition:
    attributes = t.stream_attributes.c
    rows = db.execute(
        select(attributes.name, attributes.type, attributes.not_null, attributes.tags)
        .where(attributes.stream == name)
        .order_by(attributes.position)
    ).all()
    not_null = tuple(n for n, _typ, required, _tags in rows if required)
    tags = {n: text.split() for n, _typ, _required, text in rows if text}
    return StreamDefinition(
        name, tuple((n, typ) for n, typ, _, _ in rows), tid, event_time, not_null, tags
    )


def tags_text(tags: Iterable[str]) -> str:
    """An attribute's tags as stored: sorted, space-separated (tag names have no spaces)."""
    return " ".join(sorted(tags))


def store_stream_tags(db: Connection, definition: StreamDefinition) -> None:
    """Writes a registered stream's attribute tags (all of them: an attribute left out
    loses its tags), in the caller's writing transaction."""
    attributes = t.stream_attributes.c
    for name in definition.names:
        db.execute(
            update(t.stream_attributes)
            .where(attributes.stream == definition.name, attributes.name == name)
            .values(tags=tags_text(definition.tags_of.get(name, frozenset())))
        )


def store_server_policy(db: Connection, scope: str, cql_text: str, mode: Combine) -> None:
    """:meth:`SqlCatalog.set_server_policy` in the caller's writing transaction."""
    _check_server_policy(scope, cql_text, load_hierarchy(db))
    if not is_scope_pattern(scope) and find_stream(db, scope) is None:
        raise UnknownStreamError(scope)
    _check_modes(db, scope, mode)
    row = {"stream": scope, "cql": cql_text, "mode": mode.value}
    upsert(db, t.server_policies, row, ["stream"], {"cql": cql_text, "mode": mode.value})


def load_server_policies(db: Connection) -> dict[str, ServerPolicy]:
    """The stored server policies by scope, read in the caller's transaction."""
    rows = db.execute(select(t.server_policies)).all()
    return {
        scope: ServerPolicy(parse_policy(cql, ts=SERVER_POLICY_TS).sps, Combine(mode))
        for scope, cql, mode in sorted(rows)
    }


def _check_modes(db: Connection, scope: str, mode: Combine) -> None:
    """ValueError when a registered stream the scope takes in is also under a policy of
    another scope with the other mode (its tuples would be denied, tag_policies)."""
    others = [
        (other, Combine(m))
        for other, m in db.execute(select(t.server_policies.c.stream, t.server_policies.c.mode))
        if other != scope and Combine(m) is not mode
    ]
    if not others:
        return
    for name in db.scalars(select(t.streams.c.name)):
        if not scope_takes_in(scope, name):
            continue
        clash = [other for other, _ in others if scope_takes_in(other, name)]
        if clash:
            raise ValueError(
                f"stream {name} is under {mode.value} policy {scope} and the other mode's "
                f"policy {clash[0]}: one mode per stream"
            )


def _check_server_policy(stream: str, cql_text: str, hierarchy: RoleHierarchy) -> None:
    if is_scope_pattern(stream) and stream != "*":
        Glob(stream)  # ValueError for a glob past its limits
    parse_policy(cql_text, ts=SERVER_POLICY_TS)  # CqlError / PolicyError, both ValueErrors
    for statement in parse_statements(cql_text):
        if is_scope_pattern(stream):
            if statement.stream is not None and not scope_takes_in(stream, statement.stream):
                raise ValueError(
                    f"server policy for {stream} has a statement INTO STREAM {statement.stream}"
                )
        elif statement.stream != stream:
            raise ValueError(
                f"server policy for {stream} has a statement INTO STREAM {statement.stream}"
            )
        unknown = [r for r in named_roles(statement.srp.roles) if r not in hierarchy.juniors]
        if unknown:
            raise ValueError(f"server policy for {stream} names unknown roles {unknown}")
