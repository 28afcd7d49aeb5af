"""Live subscriptions as server-sent events: a bounded queue per subscriber.

Delivery (SecFilter) calls a subscriber's ``push`` once per micro-batch from Spark's
callback thread with the rows that subscriber may receive; the queue hands them to the
event loop serving the SSE response. That thread only encodes and enqueues: the rows of
one recipient class are one :class:`~streamshield.engine.delivery.shared_rows.SharedRows` list,
so their ``rows`` event is encoded once per batch (JSON and SSE framing, the bytes
sent as they are) and the same event object is queued to every subscriber of the class;
the event loop only writes bytes. Socket writes never run in Spark's thread.

A subscriber that does not keep up is told, then dropped, instead of letting its
backlog grow without bound (C3): one slow client must not hold server memory or slow
the query for anyone else. Its queue is bounded by batches (``maxsize``) and by the
bytes of their encoded events (``max_bytes``; a single batch larger than that is still
sent when nothing else is queued). Past half of either bound it gets one ``lagging``
event, in order with its rows (again only once it has caught up); past the bound its
queued rows are discarded and it gets ``dropped``, always after a ``lagging`` (also when
one big batch leapt from under half the bound to past it).

Events: ``rows`` (``{"batch": id, "rows": [...]}``, the SSE ``id`` is the batch id),
``gap`` (a resumed subscription asked for batches no longer stored: ``{"first",
"last"}``), ``replayed`` (a resumed subscription has had every stored batch: ``{"last":
id}``, live batches follow), ``lagging`` (``{"behind": n}``: n batches are queued for it,
past half its bound in batches or bytes), ``closed`` (``{"reason": ...}``: access revoked, session
ended, query stopped or removed) and ``dropped`` (``{"reason": ...}``: too many
undelivered batches or bytes).

Resuming (:class:`Resume`): a subscriber that lost its connection (or the server) comes
back with the last batch id it got (``?after=`` or the SSE ``Last-Event-ID`` header) and
gets every later batch once: the stored ones replayed from the query's result store, then
the live ones, each batch id at most once and in order. Replayed batches are encoded per
subscriber, off the event loop.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from sse_starlette import ServerSentEvent

from streamshield.engine.delivery.shared_rows import SharedRows

DEFAULT_QUEUE = 64  # micro-batches a subscriber may lag behind before it is dropped
DEFAULT_QUEUE_BYTES = 16 * 1024 * 1024
"""Bytes of encoded events a subscriber may lag behind before it is dropped."""


class Encoded(ServerSentEvent):
    """An SSE event encoded once: :meth:`encode` gives the same bytes object to every
    response it is queued for (sse-starlette writes bytes as they are)."""

    def __init__(self, event: str, data: str, ident: str | None = None) -> None:
        # Not ServerSentEvent.__init__: the event is kept as its bytes only.
        self.event, self.id, self.retry, self.comment = event, ident, None, None
        self.frame = ServerSentEvent(data, event=event, id=ident).encode()

    @property
    def data(self) -> str:  # type: ignore[override]
        """The event's data line (for readers of the object; the wire has the frame)."""
        line = next(x for x in self.frame.split(b"\r\n") if x.startswith(b"data: "))
        return line[len(b"data: ") :].decode()

    @property
    def size(self) -> int:
        return len(self.frame)

    def encode(self) -> bytes:
        return self.frame


def json_value(value: object) -> object:
    """A row's value that JSON has no form for, as every answer writes it: a timestamp
    in ISO-8601 with its zone (UTC, ending in ``Z``), anything else as text.

    Spark hands a timestamp over as a naive datetime, the wall-clock time of the
    session's zone, which is UTC (engine/session.py, engine/delivery/collected_rows.py): written
    as it was (a space, no zone) it read as anyone's local time."""
    if isinstance(value, datetime):
        zoned = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return zoned.isoformat().replace("+00:00", "Z")
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


def rows_event(batch: int, rows: list[dict[str, Any]]) -> Encoded:
    """The ``rows`` event of ``batch``: made once for every subscriber of a class (whose
    rows are one :class:`SharedRows`). ``json.dumps`` with ``default=json_value`` is the
    wire format (its C encoder is the fastest one installed; the default is called only
    for values JSON has no form for)."""
    if isinstance(rows, SharedRows):
        return rows.once(("sse rows", batch), lambda: encode_rows(batch, rows))
    return encode_rows(batch, rows)


def encode_rows(batch: int, rows: list[dict[str, Any]]) -> Encoded:
    rows_json = json.dumps({"batch": batch, "rows": rows}, default=json_value)
    return Encoded("rows", rows_json, str(batch))


def notice_event(event: str, data: dict[str, Any]) -> Encoded:
    return Encoded(event, json.dumps(data, default=json_value))


@dataclass(frozen=True)
class _End:
    event: str
    reason: str
    discard: bool = False
    """Rows still queued are not sent (they were computed for a right now gone)."""


class SubscriberQueue:
    """Thread-safe producer side (``push``/``close``), async consumer side (``events``).

    Everything but ``push``'s encoding runs on the event loop (``call_soon_threadsafe``),
    so the queue's state needs no lock."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        maxsize: int = DEFAULT_QUEUE,
        max_bytes: int = DEFAULT_QUEUE_BYTES,
    ) -> None:
        self._loop = loop
        self._maxsize, self._max_bytes = maxsize, max_bytes
        self._items: deque[Encoded] = deque()
        self._batches = 0
        self._bytes = 0
        """Batches (``rows`` events) queued, and the bytes of their events."""
        self._lagging = False
        """Told it is lagging since it last caught up (nothing queued)."""
        self._sent: str | None = None
        """The last event handed to the reader."""
        self._ready = asyncio.Event()  # something queued, or the end
        self._room = asyncio.Event()  # something left the queue, or the end
        self._ended: _End | None = None
        self.on_end: Callable[[], None] | None = None

    @property
    def ended(self) -> bool:
        return self._ended is not None

    def push(self, batch: int, rows: list[dict[str, Any]]) -> None:
        """Called from any thread with one batch's delivered rows; encodes them in the
        calling thread (once per class: :func:`rows_event`), queues on the loop."""
        if rows and not self.ended:
            self._call(self._put, rows_event(batch, rows))

    async def put(self, batch: int, rows: list[dict[str, Any]]) -> None:
        """From the event loop, waiting for room: replayed batches are not a slow consumer."""
        if not rows or self.ended:
            return
        event = await asyncio.to_thread(encode_rows, batch, rows)
        while not self.ended and self._full(event):
            self._room.clear()
            await self._room.wait()
        self._put(event, live=False)

    def notice(self, event: str, data: dict[str, Any]) -> None:
        """An event about the stream itself (``gap``, ``replayed``), in order with rows."""
        self._call(self._put, notice_event(event, data))

    def close(self, reason: str, event: str = "closed") -> None:
        """Ends the stream after what is queued (from any thread)."""
        self._call(self._finish, _End(event, reason))

    def revoke(self, reason: str) -> None:
        """Ends the stream at once: queued rows are dropped, not delivered."""
        self._call(self._finish, _End("closed", reason, discard=True))

    def _call(self, fn: Callable[..., None], arg: Any) -> None:
        # A closed loop means the client left: there is nothing to deliver to.
        with suppress(RuntimeError):
            self._loop.call_soon_threadsafe(fn, arg)

    def _full(self, event: Encoded) -> bool:
        """No room for ``event`` (a batch fits an empty queue whatever its size)."""
        return self._batches > 0 and (
            self._batches >= self._maxsize or self._bytes + event.size > self._max_bytes
        )

    def _put(self, event: Encoded, live: bool = True) -> None:
        if self.ended:
            return
        if event.event == "rows":
            if self._full(event):
                bound = "batches" if self._batches >= self._maxsize else "bytes"
                if not self._lagging:  # one batch leapt past half: told all the same
                    self._items.append(notice_event("lagging", {"behind": self._batches + 1}))
                self._finish(_End("dropped", f"slow consumer: too many undelivered {bound}"))
                return
            self._batches += 1
            self._bytes += event.size
        self._items.append(event)
        behind = self._batches > self._maxsize / 2 or self._bytes > self._max_bytes / 2
        if live and behind and not self._lagging:
            self._lagging = True
            self._items.append(notice_event("lagging", {"behind": self._batches}))
        self._ready.set()

    def _finish(self, end: _End) -> None:
        if self.ended:
            return
        self._ended = end
        if end.discard or end.event == "dropped":  # its rows are not sent: free them now
            kept: list[Encoded] = []
            previous = self._sent
            for event in () if end.discard else self._items:
                # without the rows between them, two notices of lag would follow each other
                if event.event != "rows" and not (event.event == previous == "lagging"):
                    kept.append(event)
                    previous = event.event
            self._items = deque(kept)
            self._batches = self._bytes = 0
        self._ready.set()
        self._room.set()
        if self.on_end is not None:
            self.on_end()

    async def events(self) -> AsyncIterator[ServerSentEvent]:
        """What is queued as it comes, then the end (a drop or revocation has discarded
        the rows still queued; a close sends them first)."""
        while True:
            if self._items:
                event = self._items.popleft()
                self._sent = event.event
                if event.event == "rows":
                    self._batches -= 1
                    self._bytes -= event.size
                if not self._items:  # caught up: the next lag is told again
                    self._lagging = False
                self._room.set()
                yield event
            elif self._ended is not None:
                yield notice_event(self._ended.event, {"reason": self._ended.reason})
                return
            else:
                self._ready.clear()
                await self._ready.wait()


@dataclass(frozen=True, eq=False)
class Watched:
    """A live subscription as the server re-checks it: whose session, which output,
    and the check its batches pass (``allowed(token)``)."""

    token: str
    output: str
    queue: SubscriberQueue
    allowed: Callable[[str], bool]


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

    def recheck(self) -> int:
        """Ends (discarding their backlog) those whose own check refuses their session
        now; one check per distinct (session, output). Returns how many were ended."""
        with self._lock:
            live = list(self._live.values())
        verdicts: dict[tuple[str, str], bool] = {}
        ended = 0
        for watched in live:
            key = (watched.token, watched.output)
            if key not in verdicts:
                verdicts[key] = watched.allowed(watched.token)
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
