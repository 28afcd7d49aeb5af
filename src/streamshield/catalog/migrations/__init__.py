"""Catalog schema migrations (Alembic), run by the code itself when a catalog opens.

The environment ships inside the package (``env.py``, ``versions/``), so no
``alembic.ini`` is needed: :func:`upgrade` builds the Alembic configuration in code
and migrates on the caller's connection, inside its writing transaction.

* A new, empty database is migrated from nothing to :data:`HEAD`.
* A database created before migrations existed (all of revision 0001's tables, no
  ``alembic_version``) is recognised, stamped at 0001 and upgraded: its data is kept.
* A database already at :data:`HEAD` costs one query (the common case on every open).

To add a revision: a new file in ``versions/`` (``down_revision`` = the current head),
update ``tables.py`` to the new head schema and :data:`HEAD`; ``tests/db`` checks that
the migrated schema and ``tables.py`` agree.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, inspect

HEAD = "0007"
"""The newest revision (checked against ``versions/`` by the tests)."""

INITIAL = "0001"
_LEGACY_TABLES = frozenset(
    {
        "streams",
        "stream_attributes",
        "roles",
        "role_juniors",
        "server_policies",
        "channel_seqs",
        "rejections",
        "users",
        "user_roles",
        "sessions",
        "login_failures",
        "quotas",
        "settings",
        "objects",
        "grants",
        "queries",
        "audit",
    }
)
"""The tables the code before migrations created, all at once (revision 0001)."""


class UnrecognisedSchema(RuntimeError):
    """The database holds tables that are neither a catalog nor empty: not touched."""


def config(connection: Connection | None = None) -> Config:
    """An Alembic configuration for the packaged environment (no ini file)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(__file__).parent))
    cfg.attributes["connection"] = connection
    return cfg


def current(connection: Connection) -> str | None:
    """The database's revision (None: never migrated)."""
    return MigrationContext.configure(connection).get_current_revision()


def upgrade(connection: Connection, revision: str = "head") -> None:
    """Brings the schema to ``revision`` in the caller's (writing) transaction."""
    if revision == "head" and current(connection) == HEAD:
        return
    cfg = config(connection)
    if current(connection) is None:
        present = set(inspect(connection).get_table_names())
        if present >= _LEGACY_TABLES:
            command.stamp(cfg, INITIAL)  # created by the code before migrations
        elif present & _LEGACY_TABLES:
            missing = sorted(_LEGACY_TABLES - present)
            raise UnrecognisedSchema(
                f"the catalog database has some catalog tables but lacks {missing}: "
                "not migrating a schema it does not recognise"
            )
    command.upgrade(cfg, revision)
