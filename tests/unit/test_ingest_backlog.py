"""Admission control on the ingest backlog (server/ingest_backlog.py), without Spark:
appends are refused with 503 ingest_backlog and a bounded Retry-After while more than
the bound wait for ingest, admitted again once ingest's progress reports drain it, and
every miscount errs towards admitting (never a backlog below zero or counted twice)."""

from __future__ import annotations

import pytest

from streamshield.server.errors import to_response
from streamshield.server.ingest_backlog import IngestBacklog, IngestBacklogged


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
