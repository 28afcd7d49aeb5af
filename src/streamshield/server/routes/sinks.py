"""``/queries/{name}/sinks`` and ``/sinks``: a query's rows written for their recipient.

Whoever may SUBSCRIBE to a query's output attaches a sink (a Kafka topic or a Delta
table) and receives there exactly what her own subscription would (docs/connectors.md).
She sees and removes her own sinks; administrators see and remove every one. A sink's
broker password is never shown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from fastapi import APIRouter
from pydantic import BaseModel

from streamshield.server.auth import Auth
from streamshield.server.models import Removed
from streamshield.server.openapi import AUTHED, errors
from streamshield.server.sink_service import SinkRequest

if TYPE_CHECKING:
    from streamshield.catalog.security import Session


class SinkView(BaseModel):
    name: str
    query: str
    user: str
    roles: list[str]
    level: str | None
    target: dict[str, Any]
    status: str
    """``ok``; ``suspended: ...`` while she may not receive the rows (those batches are
    skipped for good); ``failing: ...`` while the target refuses (retried from the
    result store); ``waiting: ...`` while the query is not there."""
    last_batch: int
    rows_written: int


class SinkList(BaseModel):
    sinks: list[SinkView]


class Sinks(Protocol):
    """What the routes ask of :class:`~streamshield.server.sink_service.SinkService`."""

    def attach(self, session: Session, query_name: str, request: SinkRequest) -> dict: ...
    def detach(self, session: Session, name: str) -> None: ...
    def listed(self, session: Session) -> list[dict]: ...
    def shown(self, session: Session, name: str) -> dict: ...


def router(sinks: Sinks) -> APIRouter:
    api = APIRouter(tags=["sinks"])

    @api.post(
        "/queries/{name}/sinks",
        status_code=201,
        response_model=SinkView,
        responses=errors(*AUTHED, 403, 404, 409, 422),
    )
    def attach(name: str, request: SinkRequest, who: Auth) -> dict:
        """Writes the query's rows, as this session would receive them, to a target."""
        return sinks.attach(who.session, name, request)

    @api.get("/sinks", response_model=SinkList, responses=errors(*AUTHED, 422))
    def listed(who: Auth) -> dict:
        return {"sinks": sinks.listed(who.session)}

    @api.get("/sinks/{name}", response_model=SinkView, responses=errors(*AUTHED, 404, 422))
    def shown(name: str, who: Auth) -> dict:
        return sinks.shown(who.session, name)

    @api.delete("/sinks/{name}", response_model=Removed, responses=errors(*AUTHED, 404, 422))
    def detach(name: str, who: Auth) -> dict:
        sinks.detach(who.session, name)
        return {"removed": name}

    return api
