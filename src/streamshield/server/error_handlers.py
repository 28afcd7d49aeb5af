"""The exception handlers that give every refusal the API's one error body.

What a refusal answers (status, code, message) is decided in :mod:`.errors`; this
module only hands the framework its handlers: the known refusals through
:func:`~.errors.to_response`, request validation errors by field and problem only
(FastAPI's default would echo the submitted values back), and FastAPI's own 404, 405
and undecodable bodies in the same body as every other error.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from streamshield.catalog.errors import SecurityError
from streamshield.catalog.store import CatalogError
from streamshield.engine.queries.streaming_queries import QueryFailed
from streamshield.landing import LandingUnavailable
from streamshield.lang.cql import CqlError
from streamshield.lang.query_check import QueryRejected
from streamshield.lang.wire import WireFormatError
from streamshield.policy.operator_limits import LimitExceeded
from streamshield.server import error_codes as codes
from streamshield.server.errors import ApiError, to_response

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
FRAMEWORK_CODES = {404: codes.NOT_FOUND, 405: codes.METHOD_NOT_ALLOWED}


def install(app: FastAPI) -> None:
    """Registers the handlers on ``app``. Known refusals are answered inside the app;
    ``Exception`` (a 500) too, and by the outer middleware for what escapes it."""
    for known in (*HANDLED, Exception):
        app.add_exception_handler(known, _refusal)
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _framework)  # type: ignore[arg-type]


async def _refusal(_: Request, err: Exception) -> JSONResponse:
    response = to_response(err)
    headers = {"Retry-After": str(response.retry_after)} if response.retry_after else None
    if response.status == 401:
        headers = {**(headers or {}), "WWW-Authenticate": "Bearer"}
    return JSONResponse(response.body(), status_code=response.status, headers=headers)


async def _invalid(_: Request, err: RequestValidationError) -> JSONResponse:
    problems = [
        {"field": ".".join(str(p) for p in e.get("loc", ())), "problem": e.get("msg", "")}
        for e in err.errors()[:10]
    ]
    body = {"error": codes.INVALID, "message": "invalid request body", "problems": problems}
    return JSONResponse(body, status_code=422)


async def _framework(_: Request, err: StarletteHTTPException) -> JSONResponse:
    # A body FastAPI cannot even decode (not UTF-8) is an invalid body: 422 like any
    # other, not an undocumented 400 with FastAPI's ``detail`` (found by the API fuzzer).
    if err.status_code == 400:
        body = {"error": codes.INVALID, "message": "the request body is not UTF-8 JSON"}
        return JSONResponse(body, status_code=422)
    code = FRAMEWORK_CODES.get(err.status_code, codes.HTTP_ERROR)
    body = {"error": code, "message": str(err.detail)}
    return JSONResponse(body, status_code=err.status_code, headers=err.headers)
