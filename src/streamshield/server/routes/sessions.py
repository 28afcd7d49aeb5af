"""Logging in and out: ``POST /login`` (the one route without a token) and ``POST /logout``.

A login's argon2id check runs in the login gate's few threads (:mod:`..login_gate`),
never in the framework's shared pool or on the event loop; a login beyond the gate's
queue is answered at once with 503 ``login_busy`` and a ``Retry-After``. A login may
also activate a Chinese-Wall level (:func:`.levels.activate_at_login`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from fastapi import APIRouter, Request

from streamshield.server.auth import Auth
from streamshield.server.login_gate import LoginGate
from streamshield.server.models import LoginAnswer, LoginBody, LogoutAnswer
from streamshield.server.openapi import AUTHED, LOGIN_BUSY, errors
from streamshield.server.routes.levels import activate_at_login
from streamshield.server.routes.operations import iso

if TYPE_CHECKING:
    from streamshield.catalog.security import Session


class SessionsApi(Protocol):
    """What the session routes ask of the server
    (:class:`~streamshield.server.administration_service.AdministrationService`)."""

    def login(self, user: str, password: str, roles: list[str], client: str) -> Session: ...

    def logout(self, token: str) -> None: ...


def router(sessions: SessionsApi, security: Any, gate: LoginGate) -> APIRouter:
    """The session routes of one server (``security``: its catalog, for the level a
    login activates); its logins pass through ``gate``."""
    api = APIRouter()

    def log_in(body: LoginBody, client: str) -> tuple[Any, str | None]:
        session = sessions.login(body.user, body.password, body.roles, client)
        return session, activate_at_login(security, session, body.level)

    @api.post(
        "/login",
        response_model=LoginAnswer,
        responses={**errors(401, 403, 409, 413, 422, 429), **LOGIN_BUSY},
    )
    async def login(body: LoginBody, request: Request) -> dict:
        client = request.client.host if request.client else "unknown"
        session, level = await gate.run(log_in, body, client)
        return {
            "token": session.token,
            "user": session.user,
            "roles": sorted(session.roles),
            "expires_at": iso(session.expires_at),
            "level": level,
        }

    @api.post("/logout", response_model=LogoutAnswer, responses=errors(*AUTHED))
    def logout(who: Auth) -> dict:
        sessions.logout(who.token)
        return {"ok": True}

    return api
