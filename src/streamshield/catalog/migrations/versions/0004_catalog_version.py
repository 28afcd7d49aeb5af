"""The catalog version: one number every change a right is derived from moves.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02

``catalog_version`` holds one row (``id`` 1). Database triggers on every table that
users, sessions, roles, the hierarchy, objects, grants, queries, streams, levels or
clearances are read from add one to it in the changing transaction, whoever changes it:
this server, another process on the same catalog, the CLI or a hand-written SQL
statement. Readers keep what they derived from those tables only while the number stays
put (``streamshield.catalog.view``). Tables written on the data path (sequence numbers,
rejection counts, the audit log, login failures) and the settings and quotas, from which
no right is derived, have no trigger: writing them never invalidates anything.

A new session (a login) moves nothing either: what is kept is keyed by a session's
token, a new token is never among it, and ending, changing or sweeping sessions (an
update or delete) still moves the version. So a login does not make every live
subscription be re-checked. On PostgreSQL the sessions trigger is per row, so the
sweep of expired sessions at each login moves the version only when it removes one.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

VERSIONED = (
    "users",
    "user_roles",
    "sessions",
    "roles",
    "role_juniors",
    "catalog_meta",
    "objects",
    "grants",
    "queries",
    "streams",
    "stream_attributes",
    "coi_classes",
    "companies",
    "ci_classes",
    "ci_members",
    "stream_levels",
    "channel_levels",
    "clearances",
)
"""Frozen with this revision: a later table rights are derived from gets its trigger in
its own revision."""

_BUMP = "UPDATE catalog_version SET version = version + 1 WHERE id = 1"
_PG_FUNCTION = "streamshield_catalog_changed"


def upgrade() -> None:
    op.create_table(
        "catalog_version",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("version", sa.BigInteger, nullable=False),
    )
    op.execute("INSERT INTO catalog_version (id, version) VALUES (1, 0)")
    if op.get_bind().dialect.name == "postgresql":
        # SET search_path FROM CURRENT: a writer with another search_path still bumps
        # this catalog's row. Statement-level: one bump per statement, TRUNCATE too.
        op.execute(
            f"CREATE OR REPLACE FUNCTION {_PG_FUNCTION}() RETURNS trigger LANGUAGE plpgsql "
            f"SET search_path FROM CURRENT AS $$ BEGIN {_BUMP}; RETURN NULL; END $$"
        )
        for table in VERSIONED:
            if table == "sessions":
                op.execute(
                    f"CREATE TRIGGER {table}_changed AFTER UPDATE OR DELETE ON {table} "
                    f"FOR EACH ROW EXECUTE FUNCTION {_PG_FUNCTION}()"
                )
                op.execute(
                    f"CREATE TRIGGER {table}_truncated_changed AFTER TRUNCATE ON {table} "
                    f"FOR EACH STATEMENT EXECUTE FUNCTION {_PG_FUNCTION}()"
                )
                continue
            op.execute(
                f"CREATE TRIGGER {table}_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE "
                f"ON {table} FOR EACH STATEMENT EXECUTE FUNCTION {_PG_FUNCTION}()"
            )
        return
    for table in VERSIONED:
        for action in _actions(table):
            op.execute(
                f"CREATE TRIGGER {table}_{action.lower()}_changed AFTER {action} ON {table} "
                f"BEGIN {_BUMP}; END"
            )


def _actions(table: str) -> tuple[str, ...]:
    return ("UPDATE", "DELETE") if table == "sessions" else ("INSERT", "UPDATE", "DELETE")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in VERSIONED:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_changed ON {table}")
        op.execute("DROP TRIGGER IF EXISTS sessions_truncated_changed ON sessions")
        op.execute(f"DROP FUNCTION IF EXISTS {_PG_FUNCTION}()")
    else:
        for table in VERSIONED:
            for action in _actions(table):
                op.execute(f"DROP TRIGGER IF EXISTS {table}_{action.lower()}_changed")
    op.drop_table("catalog_version")
