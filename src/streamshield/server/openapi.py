"""Pieces of the OpenAPI contract the routes share: error responses, the ndjson body, SSE.

FastAPI documents its own ``HTTPValidationError`` for 422 by default; our 422s (and
every other error) have the body of :class:`~streamshield.server.models.ErrorBody`, so
each route declares its real error codes with :func:`errors` and
:func:`without_fastapi_validation_schema` removes the unused default schemas;
:func:`serve_document` has an app serve the document so corrected.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from streamshield.server.models import ErrorBody

_WHY = {
    401: "No, expired, logged-out or forged bearer token (or failed login)",
    403: "The object is visible but the permission is missing",
    404: "No such object, or one the caller may not see (indistinguishable)",
    409: "The name is taken, or a quota is reached",
    413: "The request body is over the size limit (the limit is named)",
    422: "Invalid request: body validation (with problems by field) or a refused query "
    "(names the column, clause or function; never a value)",
    429: "Too many failed logins; retry after Retry-After seconds",
    503: "The storage cannot be written (read-only, gone: storage_unavailable), or "
    "secure ingest is too far behind (ingest_backlog): nothing was accepted; retry after "
    "Retry-After seconds",
}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` entries for these status codes, all with the ErrorBody schema."""
    return {code: {"model": ErrorBody, "description": _WHY[code]} for code in codes}


LOGIN_BUSY: dict[int | str, dict[str, Any]] = {
    503: {
        "model": ErrorBody,
        "description": "Too many logins are being checked (login_busy): nothing was "
        "checked; retry after Retry-After seconds",
    }
}


def _ref(method: str, path: str) -> str:
    """A JSON pointer to an operation of this document (``~1`` escapes ``/``)."""
    return "#/paths/" + path.replace("~", "~0").replace("/", "~1") + "/" + method.lower()


def links(
    status: int, description: str, *uses: tuple[str, str, str]
) -> dict[int | str, dict[str, Any]]:
    """``responses=`` entry declaring OpenAPI links from a created object to its uses.

    Each use is (method, path, target): a path parameter name, or ``body.<key>`` for a
    field of the request body. The object's ``name`` in the response fills it, so that
    a client (and the API fuzzer's stateful mode) can chain create, use and remove.
    """
    declared: dict[str, Any] = {}
    for method, path, target in uses:
        link: dict[str, Any] = {"operationRef": _ref(method, path)}
        if target.startswith("body."):
            link["requestBody"] = {target.removeprefix("body."): "$response.body#/name"}
        else:
            link["parameters"] = {target: "$response.body#/name"}
        words = path.replace("{", "").replace("}", "").strip("/").replace("/", "_")
        declared[f"{method.lower()}_{words}"] = link
    return {status: {"description": description, "links": declared}}


AUTHED = (401, 413)
"""What every authenticated route can answer (413: any body over the limit)."""

NDJSON_EXAMPLE = (
    '{"type": "sp", "stream": "prices", "provider": "ed", "seq": 1, "ts": 100, "sn": 1, '
    '"ddp": {"streams": "prices", "tuples": "*", "attributes": "*"}, '
    '"srp": {"roles": "{CUSTOMER1}", "grant_option": false}, "sign": "+", "immutable": false}\n'
    '{"type": "tuple", "stream": "prices", "provider": "ed", "seq": 2, "tid": 7, '
    '"policy": {"ts": 100, "csn": 1}, "values": {"id": 7, "symbol": "ACME", "price": 12.5}}\n'
)

NDJSON_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "Wire-format elements, one JSON object per line (JSON Lines). "
        "Each line is a tuple or a security punctuation; the JSON Schema of one line is "
        "served at GET /schema/wire. At most 4 MiB per request: send more in several.",
        "content": {
            "application/x-ndjson": {
                "schema": {"type": "string", "format": "ndjson"},
                "example": NDJSON_EXAMPLE,
            }
        },
    }
}

SSE_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Server-sent events: `rows` events ({batch, rows}, the event id is the "
        "batch id) with the rows the subscriber may read (a row's `_masked` lists its columns "
        "hidden from the subscriber); with `after` or Last-Event-ID the stored later batches "
        "come first, then `replayed` ({last}), or `gap` ({first, last}) when some are no "
        "longer stored; `closed`, `dropped` or `error` events end the stream; comments keep "
        "it alive.",
        "content": {
            "text/event-stream": {
                "schema": {"type": "string"},
                "example": 'event: rows\ndata: {"batch": 3, "rows": [{"symbol": "ACME", '
                '"price": 12.5, "_masked": []}]}\n\n',
            }
        },
    }
}


UNIVERSAL = {
    413: "The request body is over the size limit (the limit is named)",
    422: "Invalid request: an unknown query parameter (the route's own are named)",
}
"""Answers any route can give, whatever it declares: the body limit applies before
routing and unknown query parameters are refused on every route."""


def with_universal_errors(schema: dict[str, Any]) -> dict[str, Any]:
    """The document with :data:`UNIVERSAL` declared on every operation that lacks it
    (found by the API fuzzer: a 413 or 422 where the operation documented none)."""
    reference = {"$ref": "#/components/schemas/ErrorBody"}
    for path in schema.get("paths", {}).values():
        for operation in path.values():
            responses = operation.setdefault("responses", {})
            for code, why in UNIVERSAL.items():
                responses.setdefault(
                    str(code),
                    {"description": why, "content": {"application/json": {"schema": reference}}},
                )
    return schema


def without_fastapi_validation_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The document without FastAPI's ``HTTPValidationError``/``ValidationError`` (unused:
    every 422 is declared with ErrorBody) and with ``application/json`` dropped from the
    SSE response, where FastAPI adds it by default."""
    components = schema.get("components", {}).get("schemas", {})
    referenced = str(schema.get("paths", {}))
    for name in ("HTTPValidationError", "ValidationError"):
        if name in components and f"/{name}'" not in referenced:
            del components[name]
    for path in schema.get("paths", {}).values():
        for operation in path.values():
            content = operation.get("responses", {}).get("200", {}).get("content", {})
            if "text/event-stream" in content:
                content.pop("application/json", None)
    return schema


def serve_document(app: FastAPI) -> None:
    """Has ``app`` answer ``/openapi.json`` with its document corrected as above (built
    once, at the first request, when every router is included)."""

    def document() -> dict[str, Any]:
        if app.openapi_schema is None:
            built = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            app.openapi_schema = with_universal_errors(without_fastapi_validation_schema(built))
        return app.openapi_schema

    app.openapi = document  # type: ignore[method-assign]
