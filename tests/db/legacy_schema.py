"""The catalog schema exactly as the code before migrations created it (frozen copy of
that code's ``tables.py``), to test that such databases are recognised and upgraded.
Deliberately not shared with the migration itself: this is the old *code*, the
migration is the new description of it.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    func,
)

metadata = MetaData()

_AUTO_ID = BigInteger().with_variant(Integer, "sqlite")  # INTEGER PRIMARY KEY = rowid on SQLite

# -- streams, roles, server policies, landing bookkeeping (the engine's catalog) ----------

streams = Table(
    "streams",
    metadata,
    Column("name", String(200), primary_key=True),
    Column("tid", String(200), nullable=False),
    Column("event_time", String(200)),
)
Index("streams_name_ci", func.lower(streams.c.name), unique=True)

stream_attributes = Table(
    "stream_attributes",
    metadata,
    Column("stream", String(200), primary_key=True),
    Column("position", Integer, primary_key=True, autoincrement=False),
    Column("name", String(200), nullable=False),
    Column("type", String(50), nullable=False),
)

roles = Table("roles", metadata, Column("name", String(200), primary_key=True))

role_juniors = Table(
    "role_juniors",
    metadata,
    Column("senior", String(200), primary_key=True),
    Column("junior", String(200), primary_key=True),
)

server_policies = Table(
    "server_policies",
    metadata,
    Column("stream", String(200), primary_key=True),
    Column("cql", Text, nullable=False),
    Column("mode", String(20), nullable=False),
)

channel_seqs = Table(
    "channel_seqs",
    metadata,
    Column("stream", String(200), primary_key=True),
    Column("provider", String(200), primary_key=True),
    Column("seq", BigInteger, nullable=False),
)

rejections = Table(
    "rejections",
    metadata,
    Column("stream", String(200), primary_key=True),
    Column("reason", String(100), primary_key=True),
    Column("count", BigInteger, nullable=False),
)

# -- users, sessions, login throttling -----------------------------------------------------

users = Table(
    "users",
    metadata,
    Column("name", String(200), primary_key=True),
    Column("password_hash", Text, nullable=False),
    Column("created_at", Float, nullable=False),
)
Index("users_name_ci", func.lower(users.c.name), unique=True)

user_roles = Table(
    "user_roles",
    metadata,
    Column("user_name", String(200), primary_key=True),
    Column("role", String(200), primary_key=True),
)

sessions = Table(
    "sessions",
    metadata,
    Column("token_hash", String(64), primary_key=True),  # sha256 hex of the token
    Column("user_name", String(200), nullable=False, index=True),
    Column("roles", Text, nullable=False),  # JSON list of activated roles
    Column("client", String(200)),
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
)

login_failures = Table(
    "login_failures",
    metadata,
    Column("id", _AUTO_ID, primary_key=True, autoincrement=True),
    Column("key_kind", String(10), nullable=False),  # "user" or "client"
    Column("key", String(200), nullable=False),
    Column("at", Float, nullable=False),
    Index("login_failures_key", "key_kind", "key", "at"),
)

quotas = Table(
    "quotas",
    metadata,
    Column("user_name", String(200), primary_key=True),
    Column("max_running_queries", Integer),
    Column("max_state_rows", BigInteger),
)

settings = Table(
    "settings",
    metadata,
    Column("key", String(200), primary_key=True),
    Column("value", Text, nullable=False),  # JSON
)

# -- OxRBAC objects and grants ---------------------------------------------------------------

objects = Table(
    "objects",
    metadata,
    Column("kind", String(10), primary_key=True),
    Column("name", String(200), primary_key=True),
    Column("owner", String(200)),
    Column("parent_kind", String(10)),
    Column("parent_name", String(200)),
    Column("created_at", Float, nullable=False),
)
Index("objects_name_ci", objects.c.kind, func.lower(objects.c.name), unique=True)

grants = Table(
    "grants",
    metadata,
    Column("permission", String(30), primary_key=True),
    Column("obj_kind", String(10), primary_key=True),
    Column("obj_name", String(200), primary_key=True),
    Column("grantee_kind", String(10), primary_key=True),
    Column("grantee", String(200), primary_key=True),
    Column("grantor", String(200), primary_key=True),
    Column("with_grant_option", Boolean, nullable=False),
    Index("grants_grantee", "grantee_kind", "grantee", "permission"),
)

queries = Table(
    "queries",
    metadata,
    Column("name", String(200), primary_key=True),
    Column("owner", String(200), nullable=False),
    Column("roles", Text, nullable=False),  # JSON list: the roles the query runs with
    Column("inputs", Text, nullable=False),  # JSON list of input stream names
    Column("output_stream", String(200)),
    Column("status", String(20), nullable=False),
)

# -- audit -------------------------------------------------------------------------------------

audit = Table(
    "audit",
    metadata,
    Column("id", _AUTO_ID, primary_key=True, autoincrement=True),
    Column("at", Float, nullable=False),
    Column("actor", String(200), index=True),  # the authenticated user, None if none
    Column("client", String(200)),
    Column("event", String(50), nullable=False, index=True),
    Column("outcome", String(20), nullable=False),
    Column("object_kind", String(10)),
    Column("object_name", String(200)),
    Column("detail", Text, nullable=False),  # JSON: ids and counts, never data values
)

_APPEND_ONLY = {
    "sqlite": (
        "CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit "
        "BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END",
        "CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit "
        "BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END",
    ),
    "postgresql": (
        "CREATE OR REPLACE FUNCTION streamshield_audit_append_only() RETURNS trigger "
        "LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'the audit log is append-only'; END $$",
        "CREATE OR REPLACE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON audit "
        "FOR EACH ROW EXECUTE FUNCTION streamshield_audit_append_only()",
        "CREATE OR REPLACE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit "
        "FOR EACH STATEMENT EXECUTE FUNCTION streamshield_audit_append_only()",
    ),
}


def create_schema(connection: Connection) -> None:
    """Creates missing tables, indexes and the audit log's append-only triggers.

    Idempotent; run inside a writing transaction so that two processes opening a new
    database at once do not both try to create the same table.
    """
    metadata.create_all(connection, checkfirst=True)
    for statement in _APPEND_ONLY.get(connection.dialect.name, ()):
        connection.exec_driver_sql(statement)
