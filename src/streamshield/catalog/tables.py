"""The catalog's tables, one schema for SQLite and PostgreSQL (the schema at the head
migration, :mod:`streamshield.catalog.migrations`; every change goes through a new
revision there, these declarations are what queries are written against).

Plain column types only (text, integers, floats, booleans): JSON values are stored as
text and times as seconds since the epoch (float), so both back ends store and compare
them the same way. Names that must be unique ignoring case (streams, catalog objects)
carry a unique index on ``lower(name)``; lookups stay exact.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    false,
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
    # a tuple without it (or with null) is refused, as without its tid or event time
    Column("not_null", Boolean, nullable=False, server_default=false()),
    # classification tags, upper case, space-separated, sorted ("" for none)
    Column("tags", Text, nullable=False, server_default=""),
)

roles = Table(
    "roles",
    metadata,
    Column("name", String(200), primary_key=True),
    # the role's bit in every stored label: fixed when the role is created, never reused
    Column("position", Integer, nullable=False, unique=True),
)

catalog_meta = Table(
    "catalog_meta",
    metadata,
    Column("key", String(100), primary_key=True),
    Column("value", Text, nullable=False),  # JSON
)
"""Facts about the storage root itself, e.g. ``role_capacity`` (the fixed label width)."""

catalog_version = Table(
    "catalog_version",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),  # the one row: 1
    Column("version", BigInteger, nullable=False),
)
"""Moved by database triggers with every change of a table rights are derived from
(migration 0004 lists them); :mod:`streamshield.catalog.view` keeps what it derived
while it stays put."""

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
    Column("disabled", Boolean, nullable=False, server_default=false()),
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
    Column("level", Text),  # JSON stored level the session activated; NULL: public
    # a session opened by an OpenID Connect token: its issuer and the token's iat
    # (NULL: a password login)
    Column("issuer", String(500)),
    Column("issued_at", Float),
)

identities = Table(
    "identities",
    metadata,
    Column("issuer", String(500), primary_key=True),
    Column("subject", String(500), primary_key=True),
    Column("user_name", String(200), nullable=False),
    Column("linked_at", Float, nullable=False),
    Index("identities_user", "issuer", "user_name", unique=True),
)
"""Which user an OpenID Connect identity (issuer, subject) is: bound at her first token,
so that a later token with the same user name but another subject is refused."""

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

# -- Chinese-Wall levels (paper 2; streamshield.catalog.levels) ------------------------------

coi_classes = Table(
    "coi_classes",
    metadata,
    Column("name", String(64), primary_key=True),
    # component k of every level is the class at the k-th position: fixed, never reused
    Column("position", Integer, nullable=False, unique=True),
    Column("created_at", Float, nullable=False),
)
Index("coi_classes_name_ci", func.lower(coi_classes.c.name), unique=True)

companies = Table(
    "companies",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("coi_class", String(64), nullable=False),
    # the company's bit in every stored level label: fixed, never reused
    Column("position", Integer, nullable=False, unique=True),
)
Index("companies_name_ci", func.lower(companies.c.name), unique=True)

ci_classes = Table(
    "ci_classes",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("created_at", Float, nullable=False),
)
Index("ci_classes_name_ci", func.lower(ci_classes.c.name), unique=True)

ci_members = Table(
    "ci_members",
    metadata,
    Column("ci_class", String(64), primary_key=True),
    Column("company", String(64), primary_key=True),
)

stream_levels = Table(
    "stream_levels",
    metadata,
    Column("stream", String(200), primary_key=True),
    Column("level", Text, nullable=False),  # JSON stored level
)

channel_levels = Table(
    "channel_levels",
    metadata,
    Column("stream", String(200), primary_key=True),
    Column("provider", String(200), primary_key=True),
    Column("level", Text, nullable=False),  # JSON stored level
)

clearances = Table(
    "clearances",
    metadata,
    Column("user_name", String(200), primary_key=True),
    Column("level", Text, nullable=False),  # JSON stored level
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

APPEND_ONLY = {
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

"""The audit log's append-only triggers per dialect (created by the first migration)."""
