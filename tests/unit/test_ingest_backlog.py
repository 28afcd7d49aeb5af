"""Admission control on the ingest backlog (server/ingest_backlog.py), without Spark:
appends are refused with 503 ingest_backlog and a bounded Retry-After while more than
the bound wait for ingest or the backlog exceeds the latency budget (measured or
predicted), admitted again once ingest's progress reports drain it, and every miscount
errs towards admitting (never a backlog below zero or counted twice)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamshield.server.errors import to_response
from streamshield.server.ingest_backlog import (
    MIN_RATE_ROWS,
    IngestBacklog,
    IngestBacklogged,
    refusal,
)


def _report(stamp: str, rows: int, rate: float = 100.0) -> dict:
    return {"timestamp": stamp, "numInputRows": rows, "processedRowsPerSecond": rate}


def test_refused_over_the_bound_and_admitted_when_drained() -> None:
    backlog = IngestBacklog(limit=10)
    backlog.landed(10)
    backlog.admit()  # at the bound: still admitted
    backlog.landed(5)
    with pytest.raises(IngestBacklogged) as refused:
        backlog.admit()
    answer = to_response(refused.value)
    assert (answer.status, answer.code) == (503, "ingest_backlog")
    assert answer.retry_after is not None and 1 <= answer.retry_after <= 60
    assert "15" in answer.message and "10" in answer.message  # counts, never data
    backlog.read([_report("2026-11-24T20:00:01.000Z", 8)])
    assert backlog.pending == 7
    backlog.admit()


def test_each_progress_report_is_counted_once() -> None:
    backlog = IngestBacklog(limit=100)
    backlog.landed(50)
    reports = [_report("2026-11-24T20:00:01.000Z", 10), _report("2026-11-24T20:00:02.000Z", 0)]
    backlog.read(reports)
    backlog.read(reports)  # the same 100 recent reports are read every second
    assert backlog.pending == 40
    backlog.read([*reports, _report("2026-11-24T20:00:03.000Z", 15)])
    assert backlog.pending == 25


def test_a_previous_runs_backlog_never_makes_it_negative() -> None:
    """Ingest reads what an earlier run landed: more rows than counted here."""
    backlog = IngestBacklog(limit=10)
    backlog.landed(3)
    backlog.read([_report("2026-11-24T20:00:01.000Z", 500)])
    assert backlog.pending == 0
    backlog.landed(11)
    with pytest.raises(IngestBacklogged):
        backlog.admit()


def test_retry_after_follows_the_drain_rate_within_bounds() -> None:
    backlog = IngestBacklog(limit=100)
    backlog.landed(1000)
    backlog.read([_report("2026-11-24T20:00:01.000Z", 100, rate=50.0)])  # 900 left
    with pytest.raises(IngestBacklogged) as slow:
        backlog.admit()
    assert slow.value.retry_after == 16  # (900 - 100) / 50 s
    backlog.read([_report("2026-11-24T20:00:02.000Z", 0, rate=0.0)])  # idle: rate kept
    with pytest.raises(IngestBacklogged) as same:
        backlog.admit()
    assert same.value.retry_after == 16
    backlog.landed(10**6)
    with pytest.raises(IngestBacklogged) as capped:
        backlog.admit()
    assert capped.value.retry_after == 60


@pytest.mark.parametrize("limit", [None, 0])
def test_no_bound_admits_everything(limit) -> None:
    backlog = IngestBacklog(limit=limit)
    backlog.landed(10**9)
    backlog.admit()


def test_a_dead_query_is_read_as_nothing() -> None:
    class Gone:
        @property
        def recentProgress(self):  # pyspark's name
            raise RuntimeError("the JVM side is gone")

    backlog = IngestBacklog(limit=1)
    backlog.landed(5)
    backlog.read_query(Gone())
    backlog.read_query(None)
    assert backlog.pending == 5


def test_a_query_is_read_only_when_it_reported_something_new() -> None:
    class Query:
        def __init__(self) -> None:
            self.reports: list[dict] = []
            self.fetched = 0

        @property
        def lastProgress(self):  # pyspark's names
            return self.reports[-1] if self.reports else None

        @property
        def recentProgress(self):
            self.fetched += 1
            return list(self.reports)

    query, backlog = Query(), IngestBacklog(limit=10)
    backlog.landed(30)
    backlog.read_query(query)
    query.reports = [
        _report("2026-11-24T20:00:01.000Z", 12),
        _report("2026-11-24T20:00:02.000Z", 8),
    ]
    backlog.read_query(query)
    backlog.read_query(query)
    assert (backlog.pending, query.fetched) == (10, 1)


# -- the latency budget --------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_refused_once_the_oldest_element_waited_longer_than_the_budget() -> None:
    """A stalled ingest: no element bound is near, but what landed waits too long."""
    clock = Clock()
    backlog = IngestBacklog(limit=10**6, clock=clock, budget=2.0)
    backlog.landed(5)
    clock.now += 1.5
    backlog.landed(5)
    backlog.admit()  # the oldest waited 1.5 s: within the budget
    clock.now += 1.0
    with pytest.raises(IngestBacklogged) as refused:
        backlog.admit()
    answer = to_response(refused.value)
    assert (answer.status, answer.code) == (503, "ingest_backlog")
    assert answer.retry_after == 5  # no throughput known yet
    backlog.read([_report("2026-11-24T20:00:01.000Z", 5)])  # the first append is read
    assert backlog.oldest_age() == pytest.approx(1.0)
    backlog.admit()
    backlog.read([_report("2026-11-24T20:00:02.000Z", 5)])
    assert (backlog.pending, backlog.oldest_age()) == (0, None)
    clock.now += 100
    backlog.admit()


def test_refused_when_the_backlog_would_take_longer_than_the_budget_to_drain() -> None:
    """Predicted: 30,000 waiting at a measured 10,000 rows/s is 3 s, over a 2 s budget,
    before any element has waited that long."""
    clock = Clock()
    backlog = IngestBacklog(limit=10**6, clock=clock, budget=2.0)
    backlog.landed(MIN_RATE_ROWS)
    backlog.read([_report("2026-11-24T20:00:01.000Z", MIN_RATE_ROWS, rate=10_000.0)])
    backlog.landed(15_000)
    backlog.admit()  # 1.5 s of work
    backlog.landed(15_000)
    with pytest.raises(IngestBacklogged) as refused:
        backlog.admit()
    assert refused.value.retry_after == 1  # 3 s - 2 s
    backlog.read([_report("2026-11-24T20:00:02.000Z", 20_000, rate=10_000.0)])
    backlog.admit()


def test_a_small_batchs_rate_predicts_nothing() -> None:
    """Ten rows in a second say nothing of what a large batch takes: no refusal by a
    prediction from it (an idle server's first big post must not be refused)."""
    backlog = IngestBacklog(limit=None, clock=Clock(), budget=1.0)
    backlog.landed(10)
    backlog.read([_report("2026-11-24T20:00:01.000Z", 10, rate=10.0)])
    backlog.landed(20_000)
    backlog.admit()


@given(
    pending=st.integers(-5, 10**7),
    age=st.one_of(st.none(), st.floats(0, 10**4)),
    rate=st.floats(0, 10**6),
    capacity=st.floats(0, 10**6),
    limit=st.one_of(st.none(), st.integers(0, 10**6)),
    budget=st.one_of(st.none(), st.floats(0, 3600)),
)
def test_refusal_follows_its_bounds(pending, age, rate, capacity, limit, budget) -> None:
    wait = refusal(pending, age, rate, capacity, limit, budget)
    over_limit = bool(limit) and pending > limit
    over_budget = bool(budget) and (
        (capacity > 0 and pending / capacity > budget) or (age is not None and age > budget)
    )
    assert (wait is not None) == (pending > 0 and (over_limit or over_budget))
    if wait is not None:
        assert wait >= 0
        # more waiting, or more of it, is never admitted where less was refused
        assert refusal(pending + 1, age, rate, capacity, limit, budget) is not None
        older = None if age is None else age + 1
        assert refusal(pending, older, rate, capacity, limit, budget) is not None


@given(st.integers(0, 10**7), st.floats(0, 10**4))
def test_no_budget_and_no_bound_admit_everything(pending: int, age: float) -> None:
    assert refusal(pending, age, 0.0, 0.0, None, None) is None
    assert refusal(pending, age, 1.0, 1.0, 0, 0.0) is None
