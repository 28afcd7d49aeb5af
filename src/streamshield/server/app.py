"""The HTTP API (FastAPI): a thin layer from requests to :class:`ServerService` calls.

Every endpoint except ``POST /login`` needs a bearer token; every failure leaves
through :mod:`streamshield.server.errors`, and request validation errors are reported
by field and problem only (FastAPI's default would echo the submitted values back).
Bodies are size-limited by :class:`~streamshield.server.body_limit.BodyLimit` before
any parsing. The OpenAPI description is at ``/openapi.json``, the docs at ``/docs``.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sse_starlette import EventSourceResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from streamshield import __version__
from streamshield.catalog.errors import SecurityError
from streamshield.catalog.store import CatalogError
from streamshield.engine.streaming_queries import QueryFailed
from streamshield.landing import LandingUnavailable
from streamshield.lang.cql import CqlError
from streamshield.lang.query_check import QueryRejected
from streamshield.lang.wire import WireFormatError
from streamshield.policy.operator_limits import LimitExceeded
from streamshield.server import wire_schema
from streamshield.server.auth import Auth, Caller  # noqa: F401  (Caller: kept importable here)
from streamshield.server.body_limit import BodyLimit
from streamshield.server.element_gate import AppendReport
from streamshield.server.errors import ApiError, Invalid, to_response
from streamshield.server.login_gate import DEFAULT_WAITING, LoginGate
from streamshield.server.models import (
    AppendAnswer,
    CatalogView,
    GrantAnswer,
    GrantBody,
    LoginAnswer,
    LoginBody,
    LogoutAnswer,
    NamedItem,
    QueryBody,
    QueryRegistered,
    QueryRemoved,
    QueryStatus,
    RevokeAnswer,
    SchemaBody,
    SettingsBody,
    SettingsView,
    SpsInjected,
    StreamBody,
    StreamDefinitionOut,
    StreamInfo,
)
from streamshield.server.openapi import (
    AUTHED,
    LOGIN_BUSY,
    NDJSON_BODY,
    SSE_RESPONSE,
    errors,
    links,
    with_universal_errors,
    without_fastapi_validation_schema,
)
from streamshield.server.routes import (
    administration,
    console,
    front_pages,
    levels,
    me,
    networks,
    operations,
    patterns,
    stream_ingest,
)
from streamshield.server.schemas import SchemaDef
from streamshield.server.service import ServerService
from streamshield.server.sse_rows import ResumeAfter, last_event_id, stream_rows
from streamshield.server.stop_answers import StopAnswers
from streamshield.server.strict_query import known_query_only
from streamshield.server.subscriptions import DEFAULT_QUEUE, DEFAULT_QUEUE_BYTES

HANDLED: tuple[type[Exception], ...] = (
    ApiError,
    LandingUnavailable,  # an OSError: without this, the 500 handler would take it
    SecurityError,
    QueryRejected,
    QueryFailed,
    LimitExceeded,
    CatalogError,
    WireFormatError,
    CqlError,
)
_FRAMEWORK_CODES = {404: "not_found", 405: "method_not_allowed"}


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
    app.state.service = service
    app.include_router(administration.router())
    app.include_router(levels.router())

    def _openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            from fastapi.openapi.utils import get_openapi

            document = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            app.openapi_schema = with_universal_errors(without_fastapi_validation_schema(document))
        return app.openapi_schema

    app.openapi = _openapi  # type: ignore[method-assign]
    app.include_router(operations.router(service, metrics_token))
    app.include_router(networks.router(service))
    app.include_router(patterns.router(service, queue_size, queue_bytes))
    app.include_router(me.router(service))
    app.include_router(stream_ingest.router(service))
    app.include_router(console.router())
    app.include_router(front_pages.router())

    async def _any(_: Request, err: Exception) -> JSONResponse:
        response = to_response(err)
        headers = {"Retry-After": str(response.retry_after)} if response.retry_after else None
        if response.status == 401:
            headers = {**(headers or {}), "WWW-Authenticate": "Bearer"}
        return JSONResponse(response.body(), status_code=response.status, headers=headers)

    # Known refusals are handled inside the app; Exception (500s) by the outer middleware.
    for known in (*HANDLED, Exception):
        app.add_exception_handler(known, _any)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, err: RequestValidationError) -> JSONResponse:
        problems = [
            {"field": ".".join(str(p) for p in e.get("loc", ())), "problem": e.get("msg", "")}
            for e in err.errors()[:10]
        ]
        body = {"error": "invalid", "message": "invalid request body", "problems": problems}
        return JSONResponse(body, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _framework(_: Request, err: StarletteHTTPException) -> JSONResponse:
        # FastAPI's own refusals, in the API's one error body. A body it cannot even
        # decode (not UTF-8) is an invalid body: 422 like any other, not an
        # undocumented 400 with FastAPI's ``detail`` (found by the API fuzzer).
        if err.status_code == 400:
            body = {"error": "invalid", "message": "the request body is not UTF-8 JSON"}
            return JSONResponse(body, status_code=422)
        code = _FRAMEWORK_CODES.get(err.status_code, "http_error")
        body = {"error": code, "message": str(err.detail)}
        return JSONResponse(body, status_code=err.status_code, headers=err.headers)

    app.include_router(wire_schema.router)

    gate = LoginGate(login_workers, login_waiting)
    app.state.login_gate = gate

    def _log_in(body: LoginBody, client: str) -> tuple[Any, str | None]:
        session = service.login(body.user, body.password, body.roles, client)
        return session, levels.activate_at_login(service.security, session, body.level)

    @app.post(
        "/login",
        response_model=LoginAnswer,
        responses={**errors(401, 403, 409, 413, 422, 429), **LOGIN_BUSY},
    )
    async def login(body: LoginBody, request: Request) -> dict:
        # The argon2id check runs in the login gate's few threads, never in the shared
        # pool or on the event loop; beyond its queue: 503 login_busy + Retry-After.
        client = request.client.host if request.client else "unknown"
        session, level = await gate.run(_log_in, body, client)
        return {
            "token": session.token,
            "user": session.user,
            "roles": sorted(session.roles),
            "expires_at": _iso(session.expires_at),
            "level": level,
        }

    @app.post("/logout", response_model=LogoutAnswer, responses=errors(*AUTHED))
    def logout(who: Auth) -> dict:
        service.logout(who.token)
        return {"ok": True}

    @app.get("/catalog", response_model=CatalogView, responses=errors(*AUTHED))
    def catalog(who: Auth) -> dict:
        return service.catalog_view(who.session)

    @app.get("/streams/{name}", response_model=StreamInfo, responses=errors(*AUTHED, 404, 422))
    def stream(name: str, who: Auth) -> dict:
        return service.stream(who.session, name)

    @app.post(
        "/schemas",
        status_code=201,
        response_model=NamedItem,
        responses={
            **errors(*AUTHED, 403, 404, 409, 422),
            **links(201, "The schema, created", ("POST", "/streams", "body.schema")),
        },
    )
    def add_schema(body: SchemaBody, who: Auth) -> dict:
        attributes = tuple((n, t) for n, t in body.attributes)
        schema = SchemaDef(body.name, attributes, body.tid, body.event_time)
        return service.add_schema(who.session, schema)

    @app.post(
        "/streams",
        status_code=201,
        response_model=StreamDefinitionOut,
        responses={
            **errors(*AUTHED, 403, 404, 409, 422),
            **links(
                201,
                "The stream, created",
                ("GET", "/streams/{name}", "name"),
                ("GET", "/streams/{name}/ingest", "name"),
                ("POST", "/streams/{name}/elements", "name"),
                ("GET", "/levels/streams/{name}", "name"),
                ("PUT", "/levels/streams/{name}", "name"),
                ("POST", "/grants", "body.object"),
            ),
        },
    )
    def add_stream(body: StreamBody, who: Auth) -> dict:
        return service.add_stream(who.session, body.name, body.schema_name)

    @app.post(
        "/streams/{name}/elements",
        response_model=AppendAnswer,
        responses=errors(*AUTHED, 403, 404, 409, 422, 503),
        openapi_extra=NDJSON_BODY,
        response_model_exclude_none=True,
    )
    async def append(
        name: str,
        request: Request,
        who: Auth,
        assign: Annotated[
            Literal["seq"] | None,
            Query(
                description="seq: the server assigns seq per channel (and an sp's ts/sn, a "
                "tuple's policy, provider, stream and tid when omitted); lines must not "
                "carry their own seq"
            ),
        ] = None,
    ) -> dict:
        body = await request.body()
        assigning = assign == "seq"
        report = await asyncio.to_thread(_append, service, who.session, name, body, assigning)
        return report.as_dict()

    @app.post(
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

    @app.post(
        "/queries/{name}/start",
        response_model=QueryStatus,
        responses=errors(*AUTHED, 403, 404, 409, 422, 503),
    )
    def start(name: str, who: Auth) -> dict:
        query = service.set_query_status(who.session, name, running=True)
        return {"name": query.name, "status": query.status()}

    @app.post(
        "/queries/{name}/stop", response_model=QueryStatus, responses=errors(*AUTHED, 403, 404, 422)
    )
    def stop(name: str, who: Auth) -> dict:
        query = service.set_query_status(who.session, name, running=False)
        return {"name": query.name, "status": query.status()}

    @app.delete(
        "/queries/{name}", response_model=QueryRemoved, responses=errors(*AUTHED, 403, 404, 422)
    )
    def remove(name: str, who: Auth) -> dict:
        service.remove_query(who.session, name)
        return {"removed": name}

    @app.post("/grants", response_model=GrantAnswer, responses=errors(*AUTHED, 403, 404, 422))
    def grant(body: GrantBody, who: Auth) -> dict:
        service.grant(who.session, body.model_dump())
        return {"granted": True}

    @app.delete("/grants", response_model=RevokeAnswer, responses=errors(*AUTHED, 403, 404, 422))
    def revoke(body: GrantBody, who: Auth) -> dict:
        service.grant(who.session, body.model_dump(), revoke=True)
        return {"revoked": True}

    @app.get("/system/settings", response_model=SettingsView, responses=errors(*AUTHED, 403))
    def settings(who: Auth) -> dict:
        return service.settings(who.session)

    @app.put("/system/settings", response_model=SettingsView, responses=errors(*AUTHED, 403, 422))
    def set_settings(body: SettingsBody, who: Auth) -> dict:
        return service.set_settings(who.session, body.values)

    @app.get(
        "/queries/{name}/subscribe",
        response_class=EventSourceResponse,
        responses={**SSE_RESPONSE, **errors(*AUTHED, 403, 404, 422)},
    )
    async def subscribe(
        name: str,
        who: Auth,
        request: Request,
        after: ResumeAfter = None,
    ) -> EventSourceResponse:
        if after is None:
            after = last_event_id(request)
        query = service.subscribable(who.session, name)
        return stream_rows(
            service,
            query,
            _user(who.session),
            who.token,
            after,
            queue_size,
            lambda token: service.may_still_subscribe(token, query.output),
            queue_bytes,
        )

    return StopAnswers(BodyLimit(app))


def _append(
    service: ServerService, session: Any, stream: str, body: bytes, assign: bool
) -> AppendReport:
    """Decodes, splits and appends a body in a worker thread: decoding 4 MiB in the event
    loop would hold every other request (and /healthz) meanwhile."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise Invalid("the body must be UTF-8 JSON lines") from None
    return service.append(session, stream, text.splitlines(), assign)


def _iso(epoch: float) -> str:
    """An API time: ISO-8601 UTC with a Z."""
    from datetime import UTC, datetime

    return datetime.fromtimestamp(float(epoch), UTC).isoformat().replace("+00:00", "Z")


def _user(session: Any) -> str:
    return str(session.user)
