"""A subscriber's queue: one encoding per batch and class, ``lagging`` before ``dropped``,
bounded by batches and by bytes (server/subscriptions.py)."""

from __future__ import annotations

import asyncio
import itertools
import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from streamshield.engine.delivery.shared_rows import SharedRows
from streamshield.server import subscriptions
from streamshield.server.subscriptions import SubscriberQueue


async def _drained(queue: SubscriberQueue) -> list[tuple[str, dict]]:
    await asyncio.sleep(0)  # the pushes' call_soon_threadsafe callbacks run
    return [(e.event, json.loads(e.data)) async for e in queue.events()]


def test_subscribers_of_one_class_are_queued_one_encoded_event(monkeypatch) -> None:
    """The same SharedRows to three queues: one json.dumps of the rows, one event object,
    the bytes sse-starlette writes the very same object."""
    dumps = json.dumps
    encoded: list[object] = []

    def counting(value, **kwargs):
        if isinstance(value, dict) and "rows" in value:
            encoded.append(value)
        return dumps(value, **kwargs)

    monkeypatch.setattr(subscriptions.json, "dumps", counting)

    async def run():
        loop = asyncio.get_running_loop()
        queues = [SubscriberQueue(loop, 8) for _ in range(3)]
        rows = SharedRows([{"id": 1, "v": "a"}, {"id": 2, "v": None}])
        for queue in queues:
            queue.push(7, rows)
        await asyncio.sleep(0)
        firsts = []
        for queue in queues:
            queue.close("done")
            firsts.append(await anext(queue.events()))
        return firsts

    firsts = asyncio.run(run())
    assert len(encoded) == 1
    assert all(event is firsts[0] for event in firsts)
    assert firsts[0].encode() is firsts[0].encode()


def test_the_wire_format_is_json_dumps_with_text_for_other_values() -> None:
    """Byte for byte what sse-starlette makes of ``json.dumps(data, default=json_value)``."""
    from datetime import datetime
    from decimal import Decimal

    from sse_starlette import ServerSentEvent

    rows = [{"t": datetime(2026, 1, 2, 3, 4, 5), "d": Decimal("1.50"), "_masked": ["x"]}]
    event = subscriptions.rows_event(3, SharedRows(rows))
    data = json.dumps({"batch": 3, "rows": rows}, default=subscriptions.json_value)
    assert event.encode() == ServerSentEvent(data, event="rows", id="3").encode()
    assert json.loads(event.data) == json.loads(data)
    assert json.loads(data)["rows"][0] == {
        "t": "2026-01-02T03:04:05Z",
        "d": "1.50",
        "_masked": ["x"],
    }


def test_past_half_the_bound_a_subscriber_is_told_once_then_dropped() -> None:
    async def run():
        queue = SubscriberQueue(asyncio.get_running_loop(), 4)
        for batch in range(5):  # nobody reads: the fifth does not fit
            queue.push(batch, [{"x": batch}])
        return await _drained(queue)

    events = asyncio.run(run())
    assert events == [
        ("lagging", {"behind": 3}),
        ("dropped", {"reason": "slow consumer: too many undelivered batches"}),
    ]


def test_lagging_comes_in_order_with_the_rows_and_again_after_catching_up() -> None:
    async def run():
        queue = SubscriberQueue(asyncio.get_running_loop(), 4)
        seen = []
        events = queue.events()
        for batch in range(3):
            queue.push(batch, [{"x": batch}])
        await asyncio.sleep(0)
        for _ in range(4):  # three batches and the notice: caught up
            seen.append((await asyncio.wait_for(anext(events), 10)).event)
        for batch in range(3, 6):
            queue.push(batch, [{"x": batch}])
        queue.close("done")
        await asyncio.sleep(0)
        seen += [e.event async for e in events]
        return seen

    assert asyncio.run(run()) == [
        *("rows", "rows", "rows", "lagging"),
        *("rows", "rows", "rows", "lagging", "closed"),
    ]


def test_a_backlog_beyond_the_byte_bound_drops_the_subscriber() -> None:
    """Few batches but big ones: the bytes bound, not the count, ends it; a single batch
    bigger than the bound still goes to a subscriber that has nothing queued."""
    big = [{"v": "x" * 4000}]

    async def run(batches: int):
        queue = SubscriberQueue(asyncio.get_running_loop(), 64, max_bytes=10_000)
        for batch in range(batches):
            queue.push(batch, big)
        queue.close("done")
        return [event for event, _ in await _drained(queue)]

    assert asyncio.run(run(2)) == ["rows", "rows", "lagging", "closed"]
    assert asyncio.run(run(3)) == ["lagging", "dropped"]

    async def huge():
        queue = SubscriberQueue(asyncio.get_running_loop(), 64, max_bytes=1_000)
        queue.push(0, big)
        queue.close("done")
        return [event for event, _ in await _drained(queue)]

    assert asyncio.run(huge()) == ["rows", "lagging", "closed"]


@pytest.mark.parametrize("end", ["revoke", "drop"])
def test_a_dropped_or_revoked_subscriber_holds_no_rows(end: str) -> None:
    """The rows queued for it are released at once, not when its socket frees up."""

    async def run():
        queue = SubscriberQueue(asyncio.get_running_loop(), 2)
        for batch in range(2 if end == "revoke" else 3):
            queue.push(batch, [{"x": "y" * 1000}])
        if end == "revoke":
            queue.revoke("gone")
        await asyncio.sleep(0)
        return queue._batches, queue._bytes, [e.event for e in queue._items]

    batches, size, items = asyncio.run(run())
    assert (batches, size) == (0, 0)
    assert items == ([] if end == "revoke" else ["lagging"])


@settings(max_examples=60, deadline=None)
@example(steps=[1, 0, 0, 1, 1], maxsize=1, max_bytes=500)  # lag told, read, lag, drop
@given(
    steps=st.lists(st.one_of(st.integers(1, 3000), st.just(0)), max_size=60),
    maxsize=st.integers(1, 6),
    max_bytes=st.integers(500, 8000),
)
def test_whatever_the_pace_the_queue_stays_within_its_bounds(steps, maxsize, max_bytes) -> None:
    """Pushes (a batch of n bytes of payload) and reads (0) in any order: the backlog
    never passes either bound (but for one batch alone), batches come in order, each
    lag episode is told once before any drop, and after a drop nothing but the end."""

    async def run():
        queue = SubscriberQueue(asyncio.get_running_loop(), maxsize, max_bytes)
        events, seen, batch = queue.events(), [], 0
        for step in steps:
            if step:
                batch += 1
                queue.push(batch, [{"v": "x" * step}])
            elif queue._items or (queue.ended and not (seen and seen[-1].event == "dropped")):
                seen.append(await asyncio.wait_for(anext(events), 10))
            await asyncio.sleep(0)
            assert queue._batches <= maxsize
            assert queue._bytes <= max_bytes or queue._batches == 1
        queue.close("done")
        await asyncio.sleep(0)
        if not (seen and seen[-1].event == "dropped"):
            seen += [e async for e in events]
        return seen

    seen = asyncio.run(run())
    names = [e.event for e in seen]
    assert names[-1] in ("closed", "dropped") and names.count(names[-1]) == 1
    ids = [json.loads(e.data)["batch"] for e in seen if e.event == "rows"]
    assert ids == sorted(set(ids))
    for before, after in itertools.pairwise(names):
        assert not (before == "lagging" and after == "lagging")
    if names[-1] == "dropped":
        assert "lagging" in names


def test_timestamps_in_rows_are_written_with_their_zone() -> None:
    """Spark hands over the UTC wall time as a naive datetime: written as it was, it read
    as any reader's local time."""
    from datetime import UTC, date, datetime, timedelta, timezone

    naive = datetime(2026, 12, 1, 19, 35)
    elsewhere = datetime(2026, 12, 1, 20, 35, 0, 250, tzinfo=timezone(timedelta(hours=1)))
    event = subscriptions.rows_event(3, [{"at": naive, "on": date(2026, 12, 1), "n": 1}])
    assert json.loads(event.data)["rows"] == [
        {"at": "2026-12-01T19:35:00Z", "on": "2026-12-01", "n": 1}
    ]
    assert subscriptions.json_value(elsewhere) == "2026-12-01T19:35:00.000250Z"
    assert subscriptions.json_value(naive.replace(tzinfo=UTC)) == "2026-12-01T19:35:00Z"
