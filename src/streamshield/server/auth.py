"""The bearer-token dependency every authenticated route uses (``Auth``).

In its own module so that routers other than :mod:`streamshield.server.app` can
depend on it without importing the application.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from streamshield.server.errors import Unauthorized

if TYPE_CHECKING:
    from streamshield.catalog.security import Session
    from streamshield.server.service import ServerService

_bearer = HTTPBearer(auto_error=False)


class Caller:
    """The authenticated session of a request and the token it came with."""

    def __init__(self, session: Session, token: str) -> None:
        self.session, self.token = session, token


def _caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Caller:
    """The session of the bearer token (401 for none, expired, logged out or forged): a
    session token of ours, or an OpenID Connect token of a configured issuer."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise Unauthorized("a bearer token is needed")
    service: ServerService = request.app.state.service  # set by create_app
    client = request.client.host if request.client else None
    token = credentials.credentials
    return Caller(service.administration.session(token, client), token)


Auth = Annotated[Caller, Depends(_caller)]
