"""CatalogView on its own: a fake catalog (one value and its version) and a fake clock.

What it must never do is answer from before a change it should know of: a change made
here (``written``) is known at once, one made elsewhere once the poll period passed,
and an answer computed while the view moved is not kept.
"""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamshield.catalog.view import CatalogView

POLL = 0.25  # exact in binary: halves add up to it


class Catalog:
    """One value and its version; ``reads`` counts what the view asked of it."""

    def __init__(self) -> None:
        self.value = 0
        self.version = 0
        self.version_reads = 0
        self.value_reads = 0
        self.broken = False

    def read_version(self) -> int:
        self.version_reads += 1
        if self.broken:
            raise OSError("unreachable")
        return self.version

    def read_value(self) -> int:
        self.value_reads += 1
        if self.broken:
            raise OSError("unreachable")
        return self.value

    def change(self) -> None:
        self.value += 1
        self.version += 1


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def catalog() -> Catalog:
    return Catalog()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def view(catalog: Catalog, clock: Clock) -> CatalogView:
    return CatalogView(catalog.read_version, poll_seconds=POLL, clock=clock)


def test_answers_are_kept_and_the_version_read_once_per_period(view, catalog, clock) -> None:
    for _ in range(5):
        assert view.lookup("k", catalog.read_value) == 0
    assert (catalog.value_reads, catalog.version_reads) == (1, 1)
    clock.now += POLL
    assert view.lookup("k", catalog.read_value) == 0
    assert (catalog.value_reads, catalog.version_reads) == (1, 2)


def test_a_change_elsewhere_is_seen_when_the_period_passed(view, catalog, clock) -> None:
    assert view.lookup("k", catalog.read_value) == 0
    catalog.change()
    clock.now += POLL / 2
    assert view.lookup("k", catalog.read_value) == 0  # within the period: kept
    clock.now += POLL / 2
    assert view.lookup("k", catalog.read_value) == 1


def test_a_change_here_is_seen_at_once(view, catalog) -> None:
    assert view.lookup("k", catalog.read_value) == 0
    catalog.change()
    view.written()
    assert view.lookup("k", catalog.read_value) == 1


def test_a_write_that_changed_no_version_keeps_the_answers(view, catalog) -> None:
    """An audit entry, say: the version is read again, nothing is dropped."""
    assert view.lookup("k", catalog.read_value) == 0
    generation = view.generation
    view.written()
    assert view.lookup("k", catalog.read_value) == 0
    assert catalog.value_reads == 1 and view.generation == generation


def test_an_answer_computed_while_the_view_moved_is_not_kept(view, catalog) -> None:
    """The revocation commits after the lookup read the old value: that value is
    returned (it was true when read) but the next lookup reads again."""

    def racing() -> int:
        old = catalog.read_value()
        catalog.change()
        view.written()
        view.lookup("other", catalog.read_value)  # someone notices meanwhile
        return old

    assert view.lookup("k", racing) == 0
    assert view.lookup("k", catalog.read_value) == 1


def test_an_unreadable_version_keeps_nothing(view, catalog) -> None:
    assert view.lookup("k", catalog.read_value) == 0
    catalog.broken = True
    view.written()
    with pytest.raises(OSError):  # read afresh: the failure is the caller's denial
        view.lookup("k", catalog.read_value)
    catalog.broken = False
    catalog.value = 7  # changed while the version could not be read
    assert view.lookup("k", catalog.read_value) == 7


def test_failures_are_not_kept(view, catalog) -> None:
    calls = []

    def failing() -> int:
        calls.append(1)
        raise LookupError("unknown token")

    for _ in range(3):
        with pytest.raises(LookupError):
            view.lookup("k", failing)
    assert len(calls) == 3


def test_too_many_answers_start_afresh(catalog, clock) -> None:
    view = CatalogView(catalog.read_version, poll_seconds=POLL, max_entries=3, clock=clock)
    generation = view.generation
    for key in range(3):
        view.lookup(("k", key), catalog.read_value)
    assert len(view.kept("k")) == 3
    view.lookup(("k", 3), catalog.read_value)
    assert view.generation > generation and view.kept("k") == []
    assert view.lookup(("k", 0), catalog.read_value) == 0


def test_kept_lists_one_kind(view, catalog) -> None:
    view.lookup(("session", "a"), lambda: "A")
    view.lookup(("check", "a"), lambda: True)
    assert view.kept("session") == ["A"]
    view.forget(("session", "a"))
    assert view.kept("session") == []


def test_lookups_from_many_threads_agree_after_a_change(view, catalog) -> None:
    seen: list[int] = []
    start = threading.Barrier(8)

    def worker() -> None:
        start.wait()
        for _ in range(200):
            view.lookup("k", catalog.read_value)
        seen.append(view.lookup("k", catalog.read_value))

    catalog.change()
    view.written()
    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen == [1] * 8


@given(
    st.lists(
        st.sampled_from(["local", "remote", "tick", "half", "lookup", "race"]),
        max_size=60,
    )
)
def test_no_answer_is_older_than_what_the_view_must_know(steps: list[str]) -> None:
    """Whatever the interleaving: a lookup answers with a value at least as new as the
    last change made here and the last change made elsewhere a whole period ago."""
    catalog, clock = Catalog(), Clock()
    view = CatalogView(catalog.read_version, poll_seconds=POLL, clock=clock)
    must_know = 0  # the oldest value a lookup may still answer with
    remote: list[tuple[float, int]] = []  # (when, value) of changes made elsewhere
    for step in steps:
        if step == "local":
            catalog.change()
            view.written()
            must_know = catalog.value
        elif step == "remote":
            catalog.change()
            remote.append((clock.now, catalog.value))
        elif step == "tick":
            clock.now += POLL
        elif step == "half":
            clock.now += POLL / 2
        elif step == "race":
            # a lookup whose value is read just before a local change commits (when
            # the lookup computes at all: a kept answer makes no change)
            def racing() -> int:
                old = catalog.read_value()
                catalog.change()
                view.written()
                return old

            before = catalog.version
            view.lookup("k", racing)
            if catalog.version != before:
                must_know = catalog.value
        else:
            for when, value in remote:
                if clock.now - when >= POLL:
                    must_know = max(must_know, value)
            assert view.lookup("k", catalog.read_value) >= must_know
