"""``POST /streams/{name}/elements``: a provider's tuples and sps, as JSON lines.

The body (at most 4 MiB, :mod:`..body_limit`) is decoded and split in a worker thread,
then checked line by line (:mod:`..element_gate`: WRITE for a tuple, INJECT SP for an
sp, the caller's own channels only) before anything lands. The answer counts the lines
accepted and lists each rejected one by line number and reason, never by value; with
``?assign=seq`` the server numbers the lines per channel (:mod:`..provider_assign`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated, Literal, Protocol

from fastapi import APIRouter, Query, Request

from streamshield.server.auth import Auth
from streamshield.server.element_gate import AppendReport
from streamshield.server.errors import Invalid
from streamshield.server.models import AppendAnswer
from streamshield.server.openapi import AUTHED, NDJSON_BODY, errors

if TYPE_CHECKING:
    from streamshield.catalog.security import Session

Assign = Annotated[
    Literal["seq"] | None,
    Query(
        description="seq: the server assigns seq per channel (and an sp's ts/sn, a "
        "tuple's policy, provider, stream and tid when omitted); lines must not "
        "carry their own seq"
    ),
]


class Appends(Protocol):
    """What the append route asks of the server
    (:class:`~streamshield.server.stream_service.StreamService`)."""

    def append(
        self, session: Session, stream: str, lines: Iterable[str], assign: bool = False
    ) -> AppendReport: ...


def router(streams: Appends) -> APIRouter:
    """The append route of one server."""
    api = APIRouter()

    @api.post(
        "/streams/{name}/elements",
        response_model=AppendAnswer,
        responses=errors(*AUTHED, 403, 404, 409, 422, 503),
        openapi_extra=NDJSON_BODY,
        response_model_exclude_none=True,
    )
    async def append(name: str, request: Request, who: Auth, assign: Assign = None) -> dict:
        body = await request.body()
        assigning = assign == "seq"
        report = await asyncio.to_thread(_append, streams, who.session, name, body, assigning)
        return report.as_dict()

    return api


def _append(
    streams: Appends, session: Session, stream: str, body: bytes, assign: bool
) -> AppendReport:
    """Decodes, splits and appends a body in a worker thread: decoding 4 MiB in the event
    loop would hold every other request (and /healthz) meanwhile."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise Invalid("the body must be UTF-8 JSON lines") from None
    return streams.append(session, stream, text.splitlines(), assign)
