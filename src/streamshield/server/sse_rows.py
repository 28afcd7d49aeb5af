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
from dataclasses import replace
from typing import Annotated, Any

from fastapi import Query, Request
from pyspark.sql import SparkSession
from sse_starlette import EventSourceResponse

from streamshield.engine.delivery.delivery import Subscription
from streamshield.engine.delivery.shared_rows import SharedRows
from streamshield.faults import crash_point
from streamshield.server.errors import Invalid
from streamshield.server.subscriptions import (
    DEFAULT_QUEUE,
    DEFAULT_QUEUE_BYTES,
    LiveSubscriptions,
    Resume,
    SubscriberQueue,
    Watched,
)

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


class RowStreams:
    """The SSE responses of one server's outputs (queries and patterns): every live
    subscription is registered in ``live`` (re-checked when rights change) and each
    queue holds at most ``queue_size`` batches and ``queue_bytes`` bytes of them."""

    def __init__(
        self,
        live: LiveSubscriptions,
        spark: SparkSession,
        queue_size: int = DEFAULT_QUEUE,
        queue_bytes: int = DEFAULT_QUEUE_BYTES,
    ) -> None:
        self.live = live
        self.spark = spark
        self.queue_size = queue_size
        self.queue_bytes = queue_bytes

    def serve(
        self,
        target: Any,
        user: str,
        token: str,
        after: int | None,
        allowed: Callable[[str], bool],
    ) -> EventSourceResponse:
        """The SSE response serving ``target``'s rows to the caller (checked already).

        ``allowed(token)``: whether the session may still receive ``target``'s rows,
        the one check every path asks: each live batch, each replayed batch, and the
        server's re-check when rights change (an output that produces nothing for a
        long time still ends a revoked subscription)."""
        queue = SubscriberQueue(asyncio.get_running_loop(), self.queue_size, self.queue_bytes)
        resume = Resume(queue, after, hold=self.queue_size)

        def still_allowed(rows: list[dict]) -> bool:
            """``allowed(token)`` now; once per batch for every subscription of this
            session to this output (they share the list: one class)."""
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
        watched = Watched(token, target.output, queue, allowed)
        self.live.add(watched)
        queue.on_end = lambda: target.delivery.unsubscribe(subscription)

        async def replay(after: int) -> None:
            try:
                await self._replay(target, subscription, after, resume, queue, allowed)
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
                self.live.remove(watched)

        return EventSourceResponse(events(), ping=PING_SECONDS)

    async def _replay(
        self,
        target: Any,
        subscription: Subscription,
        after: int,
        resume: Resume,
        queue: SubscriberQueue,
        allowed: Callable[[str], bool],
    ) -> None:
        """The stored batches after ``after`` to a resuming subscriber, oldest first,
        each through SecFilter with her rights of now (as if it were live) and only
        while ``allowed`` still holds; batches no longer stored are announced as a
        ``gap`` (ids may skip: the store says what it pruned, ``ResultStore.since``).
        Batches are delivered before they are stored: the replay first waits for those
        in flight, which may have been delivered just before she subscribed
        (``ResultStore.settle``)."""
        store = target.store
        if not await asyncio.to_thread(store.settle, lambda: queue.ended):
            return
        gap, stored = store.since(after)
        if gap:
            queue.notice("gap", {"first": gap[0], "last": gap[1]})
        for batch in stored:
            if queue.ended:
                return
            if not await asyncio.to_thread(allowed, subscription.session):
                queue.revoke("access revoked or session ended")
                return
            if store.lost(batch):
                queue.notice("gap", {"first": batch, "last": batch})
                continue
            rows = await asyncio.to_thread(self._replayed_rows, target, subscription, batch)
            await resume.replayed(batch, rows)

    def _replayed_rows(self, target: Any, subscription: Subscription, batch: int) -> list:
        frame = target.store.stored(batch, self.spark)
        if frame is None:
            return []
        got: list[dict] = []
        collect = replace(subscription, deliver=lambda rows, _batch: got.extend(rows))
        target.delivery.replay(frame, batch, collect)
        return got
