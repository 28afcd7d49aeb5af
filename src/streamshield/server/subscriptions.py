"""Live subscriptions as server-sent events: a bounded queue per subscriber.

Delivery (SecFilter) calls a subscriber's ``push`` once per micro-batch from Spark's
callback thread with the rows that subscriber may receive; the queue hands them to the
event loop serving the SSE response. A subscriber that does not keep up is dropped
with a clear ``dropped`` event instead of letting its backlog grow without bound (C3):
one slow client must not hold server memory or slow the query for everyone else.

Events: ``rows`` (``{"batch": id, "rows": [...]}``, the SSE ``id`` is the batch id),
``gap`` (a resumed subscription asked for batches no longer stored: ``{"first",
"last"}``), ``replayed`` (a resumed subscription has had every stored batch: ``{"last":
id}``, live batches follow), ``closed``
(``{"reason": ...}``: access revoked, session ended, query stopped or removed) and
``dropped``.

Resuming (:class:`Resume`): a subscriber that lost its connection (or the server) comes
back with the last batch id it got (``?after=`` or the SSE ``Last-Event-ID`` header) and
gets every later batch once: the stored ones replayed from the query's result store, then
the live ones, each batch id at most once and in order.
"""

from __future__ import annotations

import asyncio
import json
import threading
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
    event: str = "rows"


@dataclass(frozen=True)
class _End:
    event: str
    reason: str
    discard: bool = False
    """Rows still queued are not sent (they were computed for a right now gone)."""


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

    async def put(self, batch: int, rows: list[dict[str, Any]]) -> None:
        """From the event loop, waiting for room: replayed batches are not a slow consumer."""
        if rows and not self.ended:
            await self._queue.put(_Rows(batch, rows))

    def notice(self, event: str, data: dict[str, Any]) -> None:
        """An event about the stream itself (``gap``, ``replayed``), in order with rows."""
        self._call(self._put, _Rows(-1, [data], event))

    def close(self, reason: str, event: str = "closed") -> None:
        """Ends the stream after what is queued (from any thread)."""
        self._call(self._finish, _End(event, reason))

    def revoke(self, reason: str) -> None:
        """Ends the stream at once: queued rows are dropped, not delivered."""
        self._call(self._finish, _End("closed", reason, discard=True))

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
            if self._ended is not None and (self._ends_now() or self._queue.empty()):
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
                if isinstance(item, _Rows) and not (self._ended is not None and self._ends_now()):
                    if item.event != "rows":
                        yield _event(item.event, item.rows[0])
                    else:
                        data = {"batch": item.batch, "rows": item.rows}
                        yield _event("rows", data, str(item.batch))

    def _ends_now(self) -> bool:
        assert self._ended is not None
        return self._ended.event == "dropped" or self._ended.discard


@dataclass(frozen=True, eq=False)
class Watched:
    """A live subscription as the server re-checks it: whose session, which output."""

    token: str
    output: str
    queue: SubscriberQueue


class LiveSubscriptions:
    """Every live subscription of the server, re-checked as a whole when rights change.

    Delivery checks a subscriber's right per batch, but a query may produce nothing for
    a long time: a revoked subscriber must be told within a second, and rows computed
    before the revocation but still queued must not reach her.
    """

    def __init__(self) -> None:
        self._live: dict[int, Watched] = {}
        self._lock = threading.Lock()

    def add(self, watched: Watched) -> None:
        with self._lock:
            self._live[id(watched)] = watched

    def remove(self, watched: Watched) -> None:
        with self._lock:
            self._live.pop(id(watched), None)

    def recheck(self, allowed: Callable[[str, str], bool]) -> int:
        """Ends (discarding their backlog) those ``allowed(token, output)`` refuses now;
        one check per distinct (session, output). Returns how many were ended."""
        with self._lock:
            live = list(self._live.values())
        verdicts: dict[tuple[str, str], bool] = {}
        ended = 0
        for watched in live:
            key = (watched.token, watched.output)
            if key not in verdicts:
                verdicts[key] = allowed(*key)
            if not verdicts[key]:
                watched.queue.revoke("access revoked or session ended")
                self.remove(watched)
                ended += 1
        return ended


class Resume:
    """Each batch id to one subscriber at most once, in order, across a resume.

    While the stored batches after ``after`` are replayed, live batches are held back
    (at most ``hold`` of them: beyond, the subscriber is dropped like a slow consumer);
    when the replay ends they follow, those already replayed left out. Without ``after``
    live batches go straight through.
    """

    def __init__(self, queue: SubscriberQueue, after: int | None, hold: int) -> None:
        self._queue, self._hold = queue, hold
        self._lock = threading.Lock()
        self.last = -1 if after is None else after
        """The newest batch id handed to the queue (or the one the subscriber had)."""
        self._replaying = after is not None
        self._held: list[tuple[int, list[dict[str, Any]]]] = []

    def live(self, rows: list[dict[str, Any]], batch: int | None = None) -> None:
        """A live batch (``batch`` None: numbered after the last one, for callers that
        hand rows over outside a micro-batch)."""
        with self._lock:
            batch = self.last + 1 if batch is None else batch
            if self._replaying:
                if len(self._held) >= self._hold:
                    self._queue.close("slow consumer: too many undelivered batches", "dropped")
                else:
                    self._held.append((batch, rows))
                return
            if batch <= self.last:
                return
            self.last = batch
        self._queue.push(batch, rows)

    async def replayed(self, batch: int, rows: list[dict[str, Any]]) -> None:
        """A stored batch (called in batch order, only while replaying)."""
        if batch > self.last:
            self.last = batch
            await self._queue.put(batch, rows)

    def done(self) -> None:
        """The replay is over: held live batches follow, without those replayed."""
        with self._lock:
            self._queue.notice("replayed", {"last": self.last})
            for batch, rows in sorted(self._held, key=lambda held: held[0]):
                if batch > self.last:
                    self.last = batch
                    self._queue.push(batch, rows)
            self._held, self._replaying = [], False


def _event(name: str, data: dict[str, Any], ident: str | None = None) -> ServerSentEvent:
    return ServerSentEvent(data=json.dumps(data, default=str), event=name, id=ident)
