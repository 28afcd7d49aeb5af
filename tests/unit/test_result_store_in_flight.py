"""Batches are delivered before they are stored: a resuming subscriber still gets each
batch once. The replay waits for the batches in flight (delivered, not yet stored), so a
batch delivered just before she subscribed is in the store when she lists it.

No Spark here: frames are stand-ins recording what was done to them, and the store's
Parquet write is replaced by creating the batch's directory (what ``batches`` lists).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from streamshield.engine.store.result_store import ResultStore, StoringSink


class Frame:
    """What StoringSink does to a micro-batch's frame, in order."""

    def __init__(self, log: list[str], name: str = "batch") -> None:
        self.log, self.name = log, name

    def persist(self) -> Frame:
        self.log.append("persist")
        return Frame(self.log, "cached")

    def unpersist(self) -> None:
        self.log.append(f"unpersist {self.name}")


def _store(tmp_path: Path, log: list[str]) -> ResultStore:
    store = ResultStore(tmp_path / "results")

    def put(frame: Frame, batch_id: int) -> None:
        log.append(f"put {frame.name} {batch_id}")
        (store.root / f"batch={batch_id}").mkdir(parents=True, exist_ok=True)

    store.put = put  # type: ignore[method-assign]
    return store


def test_a_listened_batch_is_delivered_from_its_cache_then_stored_from_it(tmp_path) -> None:
    log: list[str] = []
    store = _store(tmp_path, log)

    def deliver(frame: Frame, batch_id: int) -> None:
        log.append(f"deliver {frame.name} {batch_id}")

    StoringSink(store, deliver)(Frame(log), 4)
    assert log == ["persist", "deliver cached 4", "put cached 4", "unpersist cached"]
    assert store.batches() == [4]


def test_a_batch_nobody_listens_to_is_stored_without_a_cache(tmp_path) -> None:
    log: list[str] = []
    store = _store(tmp_path, log)
    StoringSink(store, lambda *_: log.append("deliver"), wanted=lambda: False)(Frame(log), 2)
    assert log == ["put batch 2"]


def test_a_failing_delivery_stores_nothing_and_leaves_no_batch_in_flight(tmp_path) -> None:
    log: list[str] = []
    store = _store(tmp_path, log)

    def deliver(frame: Frame, batch_id: int) -> None:
        raise RuntimeError("the batch's job failed")

    with pytest.raises(RuntimeError):
        StoringSink(store, deliver)(Frame(log), 3)
    assert log == ["persist", "unpersist cached"]  # Spark replays it: stored then
    assert store.batches() == [] and store.settle(lambda: True)


def test_a_replay_waits_for_a_batch_delivered_before_the_subscriber_came(tmp_path) -> None:
    """The window: the batch's subscribers were read (she was not among them), its rows
    are out, it is not stored yet. She subscribes and lists the store: without the
    wait she would miss the batch (neither live nor stored)."""
    log: list[str] = []
    store = _store(tmp_path, log)
    delivered, release, waiting = threading.Event(), threading.Event(), threading.Event()

    def deliver(frame: Frame, batch_id: int) -> None:
        log.append(f"deliver {batch_id}")  # to the subscribers of now: not her
        delivered.set()
        assert release.wait(10)

    sink = threading.Thread(target=StoringSink(store, deliver), args=(Frame(log), 7))
    sink.start()
    assert delivered.wait(10)
    listed: list[list[int]] = []

    def resume() -> None:
        def give_up() -> bool:
            waiting.set()  # called in the wait loop: the replay is waiting now
            return False

        assert store.settle(give_up)
        listed.append(store.batches())
        log.append("listed")

    replay = threading.Thread(target=resume)
    replay.start()
    assert waiting.wait(10)
    assert listed == []  # still waiting: batch 7 is in flight
    release.set()
    sink.join(10)
    replay.join(10)
    assert listed == [[7]]
    assert log.index("put cached 7") < log.index("listed")


def test_a_replay_gives_up_waiting_when_its_subscriber_has_left(tmp_path) -> None:
    store = ResultStore(tmp_path / "results")
    with store.in_flight(9):
        assert store.settle(lambda: True) is False
    assert store.settle(lambda: True) is True  # nothing in flight: no wait at all


def test_a_batch_in_flight_twice_is_in_flight_until_both_end(tmp_path) -> None:
    """A catch-up and a micro-batch may carry one id: one ending is not the batch stored."""
    store = ResultStore(tmp_path / "results")
    with store.in_flight(5):
        with store.in_flight(5):
            pass
        assert store.settle(lambda: True) is False
    assert store.settle(lambda: True) is True
