"""Alembic environment of the catalog: online only, on the connection the caller passes.

:func:`streamshield.catalog.migrations.upgrade` hands over a connection that is already
inside a writing transaction (SQLite ``BEGIN IMMEDIATE`` / PostgreSQL advisory lock), so
two processes opening one new database migrate one after the other, never together.
Alembic sees the external transaction and does not commit on its own.
"""

from __future__ import annotations

from alembic import context

from streamshield.catalog.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None or context.is_offline_mode():
    raise RuntimeError("catalog migrations run online, on a connection given by the caller")

# render_as_batch: SQLite cannot ALTER most things in place; batch mode copies the table.
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
