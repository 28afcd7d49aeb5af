"""The audit log: an append-only table of security-relevant events.

What is recorded: logins (success, failure, throttled), logouts, user and role
changes, catalog changes, permission changes (with cascades), query lifecycle,
refused requests, and access decisions that dropped data at delivery (policy ids and
counts, never data values). ``detail`` holds identifiers and counts only.

Who reads what (:meth:`SecurityCatalog.audit_entries`): holders of CHANGE SYSTEM on
SYSTEM (administrators) read every entry; everyone else reads only entries whose
actor is themselves. Entries cannot be changed or deleted: the storage refuses UPDATE
and DELETE on the table (triggers), and this module offers neither.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from sqlalchemy import Connection, insert, select

from streamshield.catalog import tables as t
from streamshield.catalog.oxrbac import Kind, ObjectRef

ADMIN_ONLY = "admin_only"
"""Detail key (a dict) only administrators (CHANGE SYSTEM holders) may read, e.g. a
query failure's full message, which may quote data values."""


class Event(StrEnum):
    LOGIN = "login"
    LOGOUT = "logout"
    CREATE_USER = "create_user"
    SET_USER_ROLES = "set_user_roles"
    RESET_PASSWORD = "reset_password"
    CHANGE_PASSWORD = "change_password"
    DISABLE_USER = "disable_user"
    ENABLE_USER = "enable_user"
    CREATE_ROLE = "create_role"
    ADD_JUNIOR = "add_junior"
    REMOVE_JUNIOR = "remove_junior"
    ADD_SCHEMA = "add_schema"
    ADD_STREAM = "add_stream"
    ADD_QUERY = "add_query"
    SET_QUERY_STATUS = "set_query_status"
    REMOVE_QUERY = "remove_query"
    QUERY_FAILED = "query_failed"
    GRANT = "grant"
    REVOKE = "revoke"
    SET_SETTING = "set_setting"
    SET_QUOTA = "set_quota"
    DEFINE_COI_CLASS = "define_coi_class"
    ADD_COMPANY = "add_company"
    DEFINE_CI_CLASS = "define_ci_class"
    SET_STREAM_LEVEL = "set_stream_level"
    SET_CHANNEL_LEVEL = "set_channel_level"
    REMOVE_CHANNEL_LEVEL = "remove_channel_level"
    SET_CLEARANCE = "set_clearance"
    ACTIVATE_LEVEL = "activate_level"
    DENIED = "denied"
    DATA_DROPPED = "data_dropped"
    BIND_CONNECTOR = "bind_connector"
    UNBIND_CONNECTOR = "unbind_connector"
    QUERY_SP = "query_sp"
    """A query-scoped sp that changed nothing (ignored or refused): privacy switches."""
    SET_STREAM_TAGS = "set_stream_tags"
    SET_SERVER_POLICY = "set_server_policy"


class Outcome(StrEnum):
    OK = "ok"
    FAILED = "failed"
    DENIED = "denied"
    THROTTLED = "throttled"
    REFUSED = "refused"
    """A request the rights allowed but its content did not (a query Spark refused)."""


@dataclass(frozen=True)
class AuditEntry:
    id: int
    at: float
    actor: str | None
    client: str | None
    event: Event
    outcome: Outcome
    object: ObjectRef | None
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AuditFilter:
    """Narrows a read of the log; every field is optional (None: no condition)."""

    actor: str | None = None
    event: Event | None = None
    since: float | None = None
    until: float | None = None
    after_id: int | None = None
    before_id: int | None = None
    limit: int = 1000
    newest_first: bool = False


def record(
    db: Connection,
    at: float,
    event: Event,
    outcome: Outcome,
    *,
    actor: str | None = None,
    client: str | None = None,
    obj: ObjectRef | None = None,
    detail: Mapping[str, Any] | None = None,
) -> None:
    """Appends one entry in the caller's (writing) transaction."""
    db.execute(
        insert(t.audit).values(
            at=at,
            actor=actor,
            client=client,
            event=event.value,
            outcome=outcome.value,
            object_kind=None if obj is None else obj.kind.value,
            object_name=None if obj is None else obj.name,
            detail=json.dumps(dict(detail or {}), sort_keys=True, default=str),
        )
    )


def without_admin_only(entry: AuditEntry) -> AuditEntry:
    """The entry as a non-administrator may read it: no ``admin_only`` detail."""
    if "admin_only" not in entry.detail:
        return entry
    detail = {k: v for k, v in entry.detail.items() if k != "admin_only"}
    return replace(entry, detail=detail)


def read(db: Connection, filters: AuditFilter, only_actor: str | None) -> list[AuditEntry]:
    """Entries matching the filters, oldest first (``newest_first``: the reverse).

    ``only_actor`` confines them to one user, a reader without CHANGE SYSTEM: such a
    reader never gets a detail's :data:`ADMIN_ONLY` part either.
    """

    c = t.audit.c
    order = c.id.desc() if filters.newest_first else c.id
    query = select(t.audit).order_by(order).limit(max(0, filters.limit))
    if only_actor is not None:
        query = query.where(c.actor == only_actor)
    if filters.actor is not None:
        query = query.where(c.actor == filters.actor)
    if filters.event is not None:
        query = query.where(c.event == Event(filters.event).value)
    if filters.since is not None:
        query = query.where(c.at >= filters.since)
    if filters.until is not None:
        query = query.where(c.at < filters.until)
    if filters.after_id is not None:
        query = query.where(c.id > filters.after_id)
    if filters.before_id is not None:
        query = query.where(c.id < filters.before_id)
    return [
        AuditEntry(
            id=row.id,
            at=row.at,
            actor=row.actor,
            client=row.client,
            event=Event(row.event),
            outcome=Outcome(row.outcome),
            object=None
            if row.object_kind is None
            else ObjectRef(Kind(row.object_kind), row.object_name),
            detail=_shown(json.loads(row.detail), admin=only_actor is None),
        )
        for row in db.execute(query)
    ]


def _shown(detail: dict[str, Any], admin: bool) -> dict[str, Any]:
    """The detail a reader gets: without its :data:`ADMIN_ONLY` part unless administrator."""
    if admin or ADMIN_ONLY not in detail:
        return detail
    return {k: v for k, v in detail.items() if k != ADMIN_ONLY}
