"""Requests still running when the server stops get an answer, not a traceback.

On SIGTERM the API stops taking connections and gives the requests in progress
``timeout_graceful_shutdown`` seconds (:mod:`.runner`); uvicorn then cancels the tasks
still running, and each cancelled request would leave as an "Exception in ASGI
application" with an ``asyncio.CancelledError`` traceback on stderr and a cut
connection for its client (seen in the crash harness's logs: a query registration in
Spark's hands at the moment of the stop). This outermost ASGI wrapper turns that
cancellation into an answer: 503 ``server_stopping`` with ``Retry-After`` when nothing
was sent yet, the end of the body when a response (an event stream) had started.
The work a cancelled synchronous route had handed to a thread still finishes there
(a thread cannot be cancelled); only its answer is replaced.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import suppress

from streamshield.server import error_codes as codes
from streamshield.server.body_limit import App, Message, Receive, Scope, Send

RETRY_AFTER = 30  # seconds: about a server start
_BODY = json.dumps(
    {"error": codes.SERVER_STOPPING, "message": "the server is stopping; try again later"}
).encode()


class StopAnswers:
    """Wraps an ASGI app: a request cancelled by the server's stop is answered cleanly."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = {"started": False, "done": False}

        async def tracked(message: Message) -> None:
            if message["type"] == "http.response.start":
                sent["started"] = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                sent["done"] = True
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except asyncio.CancelledError:
            # Only the server cancels a request's task (a client leaving is an
            # ``http.disconnect`` message, not a cancellation): answer, then end quietly.
            if not sent["done"]:
                with suppress(Exception):
                    await _answer(send, started=sent["started"])


async def _answer(send: Send, *, started: bool) -> None:
    if not started:
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(_BODY)).encode()),
            (b"retry-after", str(RETRY_AFTER).encode()),
            (b"connection", b"close"),
        ]
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": _BODY, "more_body": False})
    else:
        await send({"type": "http.response.body", "body": b"", "more_body": False})
