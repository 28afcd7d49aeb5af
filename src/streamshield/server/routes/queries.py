"""A continuous query's life: register, start, stop, remove, and subscribe to its rows.

``POST /queries`` takes a query text (or an ``INSERT SP`` script, answered as the sps
injected); the SQL gate, the query shape and Spark's analysis all check it before
anything runs (docs/api.md). Starting and stopping need SET QUERY STATUS on it;
removing it, being its owner or an administrator. ``GET /queries/{name}/subscribe``
streams the rows its subscriber may read as server-sent events, re-checking her right
to subscribe at every batch (:mod:`..sse_rows`). Listing and showing queries, with
their status and progress, is :mod:`.operations`'.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from fastapi import APIRouter, Request
from sse_starlette import EventSourceResponse

from streamshield.server.auth import Auth
from streamshield.server.models import (
    QueryBody,
    QueryRegistered,
    QueryStatus,
    Removed,
    SpsInjected,
)
from streamshield.server.openapi import AUTHED, SSE_RESPONSE, errors, links
from streamshield.server.sse_rows import ResumeAfter, RowStreams, last_event_id

if TYPE_CHECKING:
    from streamshield.catalog.security import Session
    from streamshield.server.queries import LiveQuery


class QueryApi(Protocol):
    """What the query routes ask of the server
    (:class:`~streamshield.server.query_requests.QueryRequests`)."""

    def register_request(
        self, session: Session, name: str, text: str, output: str | None
    ) -> dict: ...

    def set_query_status(self, session: Session, name: str, running: bool) -> LiveQuery: ...

    def remove_query(self, session: Session, name: str) -> None: ...

    def subscribable(self, session: Session, name: str) -> LiveQuery: ...

    def may_still_subscribe(self, token: str, output: str) -> bool: ...


def router(service: QueryApi, rows: RowStreams) -> APIRouter:
    """The query routes of one server; ``rows`` serves the subscriptions."""
    api = APIRouter()

    @api.post(
        "/queries",
        status_code=201,
        response_model=QueryRegistered | SpsInjected,
        responses={
            **errors(*AUTHED, 403, 404, 409, 422),
            **links(
                201,
                "The query, registered (or the sps, injected)",
                ("GET", "/queries/{name}", "name"),
                ("GET", "/me/queries/{name}", "name"),
                ("GET", "/queries/{name}/explain", "name"),
                ("POST", "/queries/{name}/start", "name"),
                ("POST", "/queries/{name}/stop", "name"),
                ("DELETE", "/queries/{name}", "name"),
            ),
        },
    )
    def register(body: QueryBody, who: Auth) -> dict:
        return service.register_request(who.session, body.name, body.text, body.output)

    @api.post(
        "/queries/{name}/start",
        response_model=QueryStatus,
        responses=errors(*AUTHED, 403, 404, 409, 422, 503),
    )
    def start(name: str, who: Auth) -> dict:
        query = service.set_query_status(who.session, name, running=True)
        return {"name": query.name, "status": query.status()}

    @api.post(
        "/queries/{name}/stop", response_model=QueryStatus, responses=errors(*AUTHED, 403, 404, 422)
    )
    def stop(name: str, who: Auth) -> dict:
        query = service.set_query_status(who.session, name, running=False)
        return {"name": query.name, "status": query.status()}

    @api.delete("/queries/{name}", response_model=Removed, responses=errors(*AUTHED, 403, 404, 422))
    def remove(name: str, who: Auth) -> dict:
        service.remove_query(who.session, name)
        return {"removed": name}

    @api.get(
        "/queries/{name}/subscribe",
        response_class=EventSourceResponse,
        responses={**SSE_RESPONSE, **errors(*AUTHED, 403, 404, 422)},
    )
    async def subscribe(
        name: str, who: Auth, request: Request, after: ResumeAfter = None
    ) -> EventSourceResponse:
        if after is None:
            after = last_event_id(request)
        query = service.subscribable(who.session, name)
        return rows.serve(
            query,
            str(who.session.user),
            who.token,
            after,
            lambda token: service.may_still_subscribe(token, query.output),
        )

    return api
