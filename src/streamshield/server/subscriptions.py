"""Live subscriptions as server-sent events: a bounded queue per subscriber.

Delivery (SecFilter) calls a subscriber's ``push`` once per micro-batch from Spark's
callback thread with the rows that subscriber may receive; the queue hands them to the
event loop serving the SSE response. A subscriber that does not keep up is dropped
with a clear ``dropped`` event instead of letting its backlog grow without bound (C3):
one slow client must not hold server memory or slow the query for everyone else.

Events: ``rows`` (``{"batch": id, "rows": [...]}``), ``closed`` (``{"reason": ...}``:
access revoked, session ended, query stopped or removed) and ``dropped``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from sse_starlette import ServerSentEvent

DEFAULT_QUEUE = 64  # micro-batches a subscriber may lag behind before it is dropped


@dataclass(frozen=True)
class _Rows:
    batch: int
    rows: list[dict[str, Any]]


@dataclass(frozen=True)
class _End:
    event: str
    reason: str


class SubscriberQueue:
    """Thread-safe producer side (``push``/``close``), async consumer side (``events``)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, maxsize: int = DEFAULT_QUEUE) -> None:
        self._loop = loop
        self._queue: asyncio.Queue[_Rows | _End] = asyncio.Queue(maxsize)
        self._ended: _End | None = None
        self._ended_event = asyncio.Event()
        self.on_end: Callable[[], None] | None = None

    @property
    def ended(self) -> bool:
        return self._ended is not None

    def push(self, batch: int, rows: list[dict[str, Any]]) -> None:
        """Called from any thread with one batch's delivered rows."""
        if rows and not self.ended:
            self._call(self._put, _Rows(batch, rows))

    def close(self, reason: str, event: str = "closed") -> None:
        """Ends the stream after what is queued (from any thread)."""
        self._call(self._finish, _End(event, reason))

    def _call(self, fn: Callable[[Any], None], arg: Any) -> None:
        # A closed loop means the client left: there is nothing to deliver to.
        with suppress(RuntimeError):
            self._loop.call_soon_threadsafe(fn, arg)

    def _put(self, item: _Rows) -> None:
        if self.ended:
            return
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:
            self._finish(_End("dropped", "slow consumer: too many undelivered batches"))

    def _finish(self, end: _End) -> None:
        if self.ended:
            return
        self._ended = end
        self._ended_event.set()
        if self.on_end is not None:
            self.on_end()

    async def events(self) -> AsyncIterator[ServerSentEvent]:
        """Rows as they come; a drop ends the stream at once, a close after the backlog."""
        while True:
            if self._ended is not None and (self._ended.event == "dropped" or self._queue.empty()):
                yield _event(self._ended.event, {"reason": self._ended.reason})
                return
            getter = asyncio.ensure_future(self._queue.get())
            ended = asyncio.ensure_future(self._ended_event.wait())
            try:
                await asyncio.wait({getter, ended}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                ended.cancel()
                if not getter.done():
                    getter.cancel()
            if getter.done() and not getter.cancelled():
                item = getter.result()
                if isinstance(item, _Rows) and not (
                    self._ended is not None and self._ended.event == "dropped"
                ):
                    yield _event("rows", {"batch": item.batch, "rows": item.rows})


def _event(name: str, data: dict[str, Any]) -> ServerSentEvent:
    return ServerSentEvent(data=json.dumps(data, default=str), event=name)
