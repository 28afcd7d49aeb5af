"""The HTTP API (FastAPI): the routers of :mod:`.routes`, assembled around one service.

Every endpoint except ``POST /login`` needs a bearer token (:mod:`.auth`); every failure
leaves through :mod:`.errors` and :mod:`.error_handlers`, in one error body. Bodies are
size-limited by :class:`~streamshield.server.body_limit.BodyLimit` before any parsing,
and a request still running when the server stops is answered by :mod:`.stop_answers`.
The OpenAPI description is at ``/openapi.json``, the docs at ``/docs``.
"""

from __future__ import annotations

from fastapi import Depends, FastAPI

from streamshield import __version__
from streamshield.server import error_handlers, wire_schema
from streamshield.server.body_limit import BodyLimit
from streamshield.server.login_gate import DEFAULT_WAITING, LoginGate
from streamshield.server.openapi import serve_document
from streamshield.server.routes import (
    administration,
    catalog,
    connectors,
    console,
    elements,
    front_pages,
    levels,
    me,
    networks,
    operations,
    patterns,
    queries,
    sessions,
    sinks,
    stream_ingest,
    system_settings,
)
from streamshield.server.service import ServerService
from streamshield.server.sse_rows import RowStreams
from streamshield.server.stop_answers import StopAnswers
from streamshield.server.strict_query import known_query_only
from streamshield.server.subscriptions import DEFAULT_QUEUE, DEFAULT_QUEUE_BYTES


def create_app(
    service: ServerService,
    *,
    queue_size: int = DEFAULT_QUEUE,
    queue_bytes: int = DEFAULT_QUEUE_BYTES,
    metrics_token: str | None = None,
    login_workers: int | None = None,
    login_waiting: int = DEFAULT_WAITING,
) -> StopAnswers:
    """The ASGI application: the FastAPI app in the body-size limit, in the stop's
    answers (:mod:`.stop_answers`).

    ``login_workers`` password checks at once (default: one per core, at most 4), at
    most ``login_waiting`` more queued (:mod:`.login_gate`). A subscriber lagging more
    than ``queue_size`` batches or ``queue_bytes`` bytes is dropped (:mod:`.subscriptions`)."""
    app = FastAPI(
        title="streamshield",
        version=__version__,
        description="Secure multi-tenant stream processing: catalog, ingest, queries, "
        "subscriptions. Every endpoint but /login needs `Authorization: Bearer <token>`.",
        dependencies=[Depends(known_query_only)],
        docs_url=None,  # routes.front_pages serves it from the package, not from a CDN
        redoc_url=None,
    )
    app.state.service = service  # what the Auth dependency reads
    serve_document(app)
    error_handlers.install(app)
    rows = RowStreams(service.live, service.spark, queue_size, queue_bytes)
    for router in (
        administration.router(service),
        levels.router(service),
        operations.router(service, metrics_token),
        networks.router(service.switches),
        patterns.router(service.patterns, rows),
        me.router(service.security),
        stream_ingest.router(service),
        console.router(),
        front_pages.router(),
        wire_schema.router,
        sessions.router(
            service.administration, service.security, LoginGate(login_workers, login_waiting)
        ),
        catalog.router(service.streams, service.administration),
        elements.router(service.streams),
        queries.router(service.query_requests, rows),
        system_settings.router(service.administration),
        connectors.router(service.connectors),
        sinks.router(service.sinks),
    ):
        app.include_router(router)
    return StopAnswers(BodyLimit(app))
