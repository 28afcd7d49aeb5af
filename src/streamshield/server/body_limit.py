"""Request bodies are size-limited before any handler (or JSON parser) sees them.

A pure ASGI middleware: a declared ``Content-Length`` over the limit is refused at
once; a body without one (chunked) is read up to the limit and refused as soon as it
goes over, so an endless body costs at most ``limit`` bytes of memory (paper 5, C3:
"sending too much information").

Before a 413 the rest of a moderately oversized body is read and discarded (at most
:data:`DRAIN_LIMIT` bytes, none kept): a server that answers and closes while the
client is still sending makes the client see a reset connection (over TLS an
``EOF occurred in violation of protocol``) instead of the 413 naming the limit. Found
by the API fuzzer with a 120 KB query text. Bodies longer than that are cut off.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from streamshield.server import error_codes as codes

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

DEFAULT_LIMIT = 64 * 1024
ELEMENTS_LIMIT = 4 * 1024 * 1024
DRAIN_LIMIT = 1024 * 1024
_ELEMENTS = re.compile(r"/streams/[^/]+/elements\Z")


class BodyTooLarge(Exception):
    pass


class BodyLimit:
    """Wraps an ASGI app; ``limit_for(path)`` gives the byte limit of a request's body."""

    def __init__(self, app: App, default: int = DEFAULT_LIMIT, elements: int = ELEMENTS_LIMIT):
        self.app, self.default, self.elements = app, default, elements

    def limit_for(self, path: str) -> int:
        return self.elements if _ELEMENTS.search(path) else self.default

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope.get("path", ""))
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            if declared <= limit + DRAIN_LIMIT:
                await _drain(receive, declared)
            await _refuse(send, limit)
            return
        try:
            body = await _read(receive, limit)
        except BodyTooLarge:
            await _drain(receive, DRAIN_LIMIT)
            await _refuse(send, limit)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # http.disconnect, for streaming responses

        await self.app(scope, replay, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _read(receive: Receive, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _drain(receive: Receive, budget: int) -> None:
    """Reads and drops the rest of a body, at most ``budget`` bytes."""
    read = 0
    while read <= budget:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        read += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


async def _refuse(send: Send, limit: int) -> None:
    body = json.dumps(
        {"error": codes.TOO_LARGE, "message": f"request body is larger than {limit} bytes"}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
