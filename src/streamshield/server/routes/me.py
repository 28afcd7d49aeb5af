"""What the caller's session may do, so that a client offers only what will succeed.

Read-only: the answers come from the same OxRBAC checks the acting routes make, and the
acting routes check again, so a client that shows a button it should not (or a user
who forces a request) still gets the API's 403/404. The console uses these to hide
administration pages and query actions a user does not hold; nothing here grants.
"""

# No ``from __future__ import annotations``: FastAPI must see the real ``Auth`` type.
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from streamshield.server import security_port as port
from streamshield.server.auth import Auth
from streamshield.server.errors import NotFound
from streamshield.server.openapi import AUTHED, errors
from streamshield.server.routes.operations import iso

if TYPE_CHECKING:
    from streamshield.catalog.security import Session


class SessionRights(BaseModel):
    user: str
    roles: list[str] = Field(description="The roles active in this session")
    expires_at: str = Field(description="ISO-8601 UTC")
    administrator: bool = Field(description="CHANGE SYSTEM: users, roles, settings, metrics")
    add_queries: bool = Field(description="ADD on SYSTEM: may register queries")


class SessionRoles(BaseModel):
    user: str
    held: list[str] = Field(description="Every role the user holds: what login may activate")
    active: list[str] = Field(description="The roles active in this session")


class QueryRights(BaseModel):
    name: str
    set_status: bool = Field(description="SET QUERY STATUS: may start and stop it")
    remove: bool = Field(description="Its owner or an administrator")
    subscribe: bool = Field(description="SUBSCRIBE on its output stream")
    read_text: bool = Field(description="Its owner or an administrator: text and explain")


def router(security: Any) -> APIRouter:
    """``GET /me``, ``GET /me/roles`` and ``GET /me/queries/{name}`` of one server
    (``security``: its catalog)."""
    api = APIRouter(tags=["session"])

    def holds(session: "Session", permission: str, kind: str, name: str) -> bool:
        return port.check(security, session, permission, kind, name)

    @api.get("/me", response_model=SessionRights, responses=errors(*AUTHED))
    def me(who: Auth) -> SessionRights:
        """The session's user, active roles, expiry and system-wide rights."""
        session = who.session
        return SessionRights(
            user=port.user_of(session),
            roles=sorted(port.roles_of(session)),
            expires_at=iso(session.expires_at) or "",
            administrator=holds(session, "CHANGE SYSTEM", "system", "system"),
            add_queries=holds(session, "ADD", "system", "system"),
        )

    @api.get("/me/roles", response_model=SessionRoles, responses=errors(*AUTHED))
    def my_roles(who: Auth) -> SessionRoles:
        """The roles the user holds and those this session activated: a login with
        ``roles`` omitted activates all held ones; role names match ignoring case."""
        session = who.session
        user = port.user_of(session)
        return SessionRoles(
            user=user,
            held=sorted(port.held_roles(security, user)),
            active=sorted(port.roles_of(session)),
        )

    @api.get("/me/queries/{name}", response_model=QueryRights, responses=errors(*AUTHED, 404, 422))
    def query_rights(name: str, who: Auth) -> QueryRights:
        """What the session may do with one query it may view (404 otherwise)."""
        session = who.session
        record = next((r for r in port.queries(security, session) if r.name == name), None)
        if record is None:
            raise NotFound("no such query")
        admin = holds(session, "CHANGE SYSTEM", "system", "system")
        owner = record.owner == port.user_of(session)
        output = record.output_stream
        subscribe = output is not None and (
            holds(session, "VIEW OBJECT", "stream", output)
            and port.can_subscribe(security, session, output)
        )
        return QueryRights(
            name=record.name,
            set_status=holds(session, "SET QUERY STATUS", "query", record.name),
            remove=owner or admin,
            subscribe=bool(subscribe),
            read_text=owner or admin,
        )

    return api
