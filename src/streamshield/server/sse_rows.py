"""One SSE subscription to an output's rows, for queries and event patterns alike.

The output (a :class:`~streamshield.server.queries.LiveQuery` or a registered pattern)
has a :class:`~streamshield.engine.delivery.delivery.Delivery` (SecFilter per subscriber), a
:class:`~streamshield.engine.store.result_store.ResultStore` (what a resumed subscription
replays), an ``output`` stream name and ``closers`` (how its end reaches the stream).
Each delivered batch is first re-checked by ``allowed(token)``: a logout, an expired
session or a revoked right ends the stream; the server's re-check of
:class:`~streamshield.server.subscriptions.LiveSubscriptions` whenever the catalog
version moves (docs/security.md, "The catalog view") ends it even when no batch comes.
The check runs once per batch and session, not per subscription: the subscriptions of
one session are one recipient class, handed one shared list that remembers the verdict
(:class:`~streamshield.engine.delivery.shared_rows.SharedRows`).

Resume: ``after`` (or the ``Last-Event-ID`` header) replays every stored later batch
once, then the live ones (:class:`~streamshield.server.subscriptions.Resume`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Query, Request
from sse_starlette import EventSourceResponse

from streamshield.engine.delivery.shared_rows import SharedRows
from streamshield.faults import crash_point
from streamshield.server.errors import Invalid
from streamshield.server.subscriptions import (
    DEFAULT_QUEUE_BYTES,
    Resume,
    SubscriberQueue,
    Watched,
)

if TYPE_CHECKING:
    from streamshield.server.service import ServerService

PING_SECONDS = 15


ResumeAfter = Annotated[
    int | None,
    Query(
        ge=-1,
        description="Resume: the last batch id received; every stored later batch "
        "is replayed once before the live ones (default: the SSE Last-Event-ID "
        "header; neither: live batches only).",
    ),
]
"""The ``after`` parameter of every SSE route of rows (queries, patterns)."""


def last_event_id(request: Request) -> int | None:
    """The SSE ``Last-Event-ID`` header as a batch id (absent: None)."""
    value = request.headers.get("last-event-id")
    if value is None or not value.strip():
        return None
    message = "Last-Event-ID header: must be a batch id (an integer, at least -1)"
    try:
        batch = int(value)
    except ValueError:
        raise Invalid(message) from None
    if batch < -1:
        raise Invalid(message)
    return batch


def stream_rows(
    service: ServerService,
    target: Any,
    user: str,
    token: str,
    after: int | None,
    queue_size: int,
    allowed: Callable[[str], bool],
    queue_bytes: int = DEFAULT_QUEUE_BYTES,
) -> EventSourceResponse:
    """The SSE response serving ``target``'s rows to the caller (checked already); its
    queue holds at most ``queue_size`` batches and ``queue_bytes`` bytes of them."""
    queue = SubscriberQueue(asyncio.get_running_loop(), queue_size, queue_bytes)
    resume = Resume(queue, after, hold=queue_size)

    def still_allowed(rows: list[dict]) -> bool:
        """``allowed(token)`` now; once per batch for every subscription of this session
        to this output (they share the list: one class)."""
        if isinstance(rows, SharedRows):
            return rows.once(("allowed", id(target.delivery), token), lambda: allowed(token))
        return allowed(token)

    def deliver(rows: list[dict], batch_id: int | None = None) -> None:
        # Per batch, not per row.
        if not still_allowed(rows):
            queue.revoke("access revoked or session ended")
            return
        crash_point("subscriber.serving")
        resume.live(rows, batch_id)

    subscription = target.delivery.subscribe(user, deliver, token, batched=True)
    target.closers[subscription.id] = queue.close
    watched = Watched(token, target.output, queue)
    service.live.add(watched)
    queue.on_end = lambda: target.delivery.unsubscribe(subscription)

    async def replay(after: int) -> None:
        try:
            await service.replay(target, subscription, after, resume, queue)
        finally:
            resume.done()

    async def events() -> AsyncIterator[Any]:
        replaying = asyncio.ensure_future(replay(after)) if after is not None else None
        try:
            async for event in queue.events():
                yield event
        finally:
            if replaying is not None:
                replaying.cancel()
            target.delivery.unsubscribe(subscription)
            target.closers.pop(subscription.id, None)
            service.live.remove(watched)

    return EventSourceResponse(events(), ping=PING_SECONDS)
