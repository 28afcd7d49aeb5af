"""Pieces of the OpenAPI contract the routes share: error responses, the ndjson body, SSE.

FastAPI documents its own ``HTTPValidationError`` for 422 by default; our 422s (and
every other error) have the body of :class:`~streamshield.server.models.ErrorBody`, so
each route declares its real error codes with :func:`errors` and
:func:`without_fastapi_validation_schema` removes the unused default schemas.
"""

from __future__ import annotations

from typing import Any

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
}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` entries for these status codes, all with the ErrorBody schema."""
    return {code: {"model": ErrorBody, "description": _WHY[code]} for code in codes}


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
        "description": "Server-sent events: `rows` events ({batch, rows}) with the rows the "
        "subscriber may read (a row's `_masked` lists its columns hidden from the subscriber); "
        "`closed`, `dropped` or `error` events end the stream; comments keep it alive.",
        "content": {
            "text/event-stream": {
                "schema": {"type": "string"},
                "example": 'event: rows\ndata: {"batch": 3, "rows": [{"symbol": "ACME", '
                '"price": 12.5, "_masked": []}]}\n\n',
            }
        },
    }
}


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
