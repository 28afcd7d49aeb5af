"""A resumed subscription gets each batch id once and in order: stored batches first,
live ones held back meanwhile and sent after, those already replayed left out."""

from __future__ import annotations

import asyncio
import json

from streamshield.server.subscriptions import Resume, SubscriberQueue


async def _events(queue: SubscriberQueue) -> list[tuple[str, str | None, dict]]:
    queue.close("done")
    await asyncio.sleep(0)
    return [(e.event, e.id, json.loads(e.data)) async for e in queue.events()]


def _batches(events) -> list[int]:
    return [data["batch"] for name, _, data in events if name == "rows"]


def test_live_batches_during_the_replay_follow_it_once_and_in_order() -> None:
    async def run():
        queue = SubscriberQueue(asyncio.get_running_loop(), 16)
        resume = Resume(queue, after=3, hold=16)
        resume.live([{"x": 6}], 6)  # live batches arrive while the store is replayed
        resume.live([{"x": 5}], 5)
        for batch in (4, 5):  # 5 was stored before it was live: once only
            await resume.replayed(batch, [{"x": batch}])
        resume.done()
        resume.live([{"x": 6}], 6)  # a repeat of a live batch: dropped
        resume.live([{"x": 7}], 7)
        await asyncio.sleep(0)
        return await _events(queue)

    events = asyncio.run(run())
    assert _batches(events) == [4, 5, 6, 7]
    assert [name for name, _, _ in events] == ["rows", "rows", "replayed", "rows", "rows", "closed"]
    assert [ident for name, ident, _ in events if name == "rows"] == ["4", "5", "6", "7"]


def test_batches_at_or_before_the_resume_point_are_not_sent_again() -> None:
    async def run():
        queue = SubscriberQueue(asyncio.get_running_loop(), 16)
        resume = Resume(queue, after=5, hold=16)
        await resume.replayed(5, [{"x": 5}])
        resume.done()
        resume.live([{"x": 4}], 4)
        resume.live([{"x": 6}], 6)
        await asyncio.sleep(0)
        return await _events(queue)

    assert _batches(asyncio.run(run())) == [6]


def test_too_many_held_batches_drop_the_subscriber() -> None:
    async def run():
        queue = SubscriberQueue(asyncio.get_running_loop(), 16)
        resume = Resume(queue, after=0, hold=2)
        for batch in (10, 11, 12):
            resume.live([{"x": batch}], batch)
        await asyncio.sleep(0)
        return [e.event async for e in queue.events()]

    assert asyncio.run(run()) == ["dropped"]  # the replay never ended: no "replayed"


def test_without_a_resume_point_live_batches_go_straight_through() -> None:
    async def run():
        queue = SubscriberQueue(asyncio.get_running_loop(), 16)
        resume = Resume(queue, after=None, hold=16)
        resume.live([{"x": 0}], 0)
        resume.live([{"x": 1}])  # handed over outside a micro-batch: numbered next
        await asyncio.sleep(0)
        return await _events(queue)

    assert _batches(asyncio.run(run())) == [0, 1]
