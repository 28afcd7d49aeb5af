"""Opening the catalog database and running one transaction on it (SQLAlchemy 2 Core).

One interface for two back ends: a SQLite file is the zero-set-up default, PostgreSQL
(psycopg 3) is the shared server choice. Both get the same guarantee that the old
stdlib store gave: a *writing* transaction holds the database's single write lock from
its first statement, so read-then-write checks ("is this name free?", "may this user
grant?") cannot interleave with another writer in any process.

* SQLite: the driver's own transaction handling is switched off and each transaction
  starts with ``BEGIN IMMEDIATE`` (writers) or ``BEGIN`` (readers); WAL lets readers
  run beside the writer.
* PostgreSQL: a writer takes a transaction-scoped advisory lock first. Catalog writes
  are rare and short, so serialising them costs little and keeps the code free of
  serialisation-failure retries.
"""

from __future__ import annotations

import inspect
import os
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Table, create_engine, event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.pool import NullPool

BUSY_TIMEOUT = 30.0  # seconds a SQLite writer waits for another process's write lock
_WRITE = "streamshield_write"  # execution option marking a writing transaction
_PG_WRITE_LOCK = 0x5354_5348  # advisory lock key ("STSH") serialising catalog writers

UrlOrEngine = str | os.PathLike[str] | Engine
_callbacks_lock = threading.Lock()


def open_engine(target: UrlOrEngine) -> Engine:
    """An engine for a database URL, a SQLite file path, or an engine given as is.

    A string containing ``://`` is a URL (``postgresql+psycopg://...``,
    ``sqlite:///...``); anything else is a file path for SQLite, whose parent
    directories are created.
    """
    if isinstance(target, Engine):
        engine = target
    elif isinstance(target, str) and "://" in target:
        engine = _from_url(target)
    else:
        path = Path(target)
        path.parent.mkdir(parents=True, exist_ok=True)
        engine = _from_url(f"sqlite:///{path}")
    if engine.dialect.name == "sqlite" and engine.url.database not in (None, "", ":memory:"):
        owner_only(Path(engine.url.database))
    _install_hooks(engine)
    return engine


SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def owner_only(path: Path) -> None:
    """Creates the SQLite file readable and writable by its owner only (0600), or
    tightens one that exists, before SQLite opens it: the catalog holds password and
    session-token hashes. SQLite gives its WAL, shared-memory and journal files the
    database file's mode; those that exist already are tightened too. (PostgreSQL
    keeps its files itself: nothing to do there.)"""
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    for file in (path, *(path.with_name(path.name + s) for s in SQLITE_SIDE_FILES)):
        try:
            status = file.stat()
        except FileNotFoundError:
            continue
        if status.st_mode & 0o077 and status.st_uid == os.getuid():
            os.chmod(file, 0o600)


def _from_url(url: str) -> Engine:
    if url.startswith("sqlite"):
        if url in ("sqlite://", "sqlite:///:memory:"):
            # Each operation opens its own connection: an in-memory database would be
            # a new, empty one every time.
            raise ValueError("the catalog needs a SQLite file, not an in-memory database")
        # NullPool: a connection per transaction, as before; cheap for SQLite and safe
        # when a process forks (Spark's Python workers, landing writers).
        return create_engine(url, poolclass=NullPool, connect_args={"timeout": BUSY_TIMEOUT})
    return create_engine(url, pool_pre_ping=True)


def _install_hooks(engine: Engine) -> None:
    if getattr(engine, "_streamshield_hooks", False):
        return
    engine._streamshield_hooks = True  # type: ignore[attr-defined]
    if engine.dialect.name == "sqlite":

        @event.listens_for(engine, "connect")
        def _connect(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None  # we issue BEGIN ourselves
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _begin(connection: Connection) -> None:
            write = connection.get_execution_options().get(_WRITE, False)
            connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    elif engine.dialect.name == "postgresql":

        @event.listens_for(engine, "begin")
        def _begin_pg(connection: Connection) -> None:
            if connection.get_execution_options().get(_WRITE, False):
                connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_WRITE_LOCK})")


@contextmanager
def transaction(
    engine: Engine, write: bool = False, *, versioned: bool = True
) -> Iterator[Connection]:
    """One connection, one transaction: committed on success, rolled back on any error.

    After a writing transaction ends (committed or not) the engine's :func:`on_write`
    callbacks run, so that what this process derived from the catalog is checked
    against the catalog version at once. ``versioned=False`` skips them for a writer of
    tables no right is derived from (the audit log, sequence numbers); were one of those
    tables versioned after all, the change would still be seen within the view's poll
    period, as one made by another process.
    """
    connection = engine.connect().execution_options(**{_WRITE: write})
    try:
        with connection, connection.begin():
            yield connection
    finally:
        if write and versioned:
            _wrote(engine)


def on_write(engine: Engine, callback: Callable[[], None]) -> None:
    """Calls ``callback`` after every writing transaction on ``engine`` in this process.

    Held weakly when it is a bound method: a catalog object that is gone is forgotten.
    """
    held: Callable[[], Callable[[], None] | None] = (
        weakref.WeakMethod(callback) if inspect.ismethod(callback) else lambda: callback
    )
    with _callbacks_lock:
        callbacks = engine.__dict__.setdefault("_streamshield_on_write", [])
        callbacks[:] = [c for c in callbacks if c() is not None] + [held]


def _wrote(engine: Engine) -> None:
    for held in list(engine.__dict__.get("_streamshield_on_write", ())):
        callback = held()
        if callback is not None:
            callback()


def upsert(
    connection: Connection,
    table: Table,
    values: Mapping[str, Any],
    keys: Sequence[str],
    update: Mapping[str, Any],
) -> None:
    """``INSERT ... ON CONFLICT (keys) DO UPDATE SET update`` in the connection's dialect.

    ``update`` values may refer to the proposed row through the ``excluded`` argument
    passed to a callable value: ``{"seq": lambda excluded: ...}``.
    """
    dialect = connection.dialect.name
    if dialect == "sqlite":
        statement: Any = sqlite.insert(table).values(**values)
    elif dialect == "postgresql":
        statement = postgresql.insert(table).values(**values)
    else:  # pragma: no cover - only the two supported back ends reach here
        raise NotImplementedError(f"upsert on {dialect}")
    excluded = statement.excluded
    set_ = {k: (v(excluded) if callable(v) else v) for k, v in update.items()}
    connection.execute(statement.on_conflict_do_update(index_elements=list(keys), set_=set_))
