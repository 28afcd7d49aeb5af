"""The server's counters as the JSON routes read them: per-stream totals, recent lag."""

from __future__ import annotations

from streamshield.server.metrics import RateWindow, ServerMetrics


def test_stream_counts_and_recent_lag_follow_what_was_counted() -> None:
    metrics = ServerMetrics(lambda: [], lambda: None)
    metrics.appended("s", accepted=5, rejected=2)
    metrics.labelled("s", accepted=3, denied=1)
    metrics.labelled("t", accepted=7, denied=0)
    counts = metrics.stream_counts("s")
    assert {k: counts[k] for k in counts if k != "rows_per_second"} == {
        "elements_accepted": 5,
        "elements_rejected": 2,
        "tuples_accepted": 3,
        "tuples_denied": 1,
    }
    assert counts["rows_per_second"] > 0
    assert metrics.stream_counts("nothing")["tuples_denied"] == 0
    assert metrics.recent_lag("q") is None
    metrics.handed_over("q", 0.2)
    metrics.handed_over("q", 0.05)
    assert metrics.recent_lag("q") == 0.2
    text = metrics.exposition().decode()
    assert 'streamshield_query_recent_delivery_lag_seconds{query="q"} 0.2' in text
    assert 'streamshield_shield_tuples_total{decision="denied",stream="s"} 1.0' in text


def test_peaks_forget_what_left_the_window() -> None:
    now = [0.0]
    window = RateWindow(10.0, clock=lambda: now[0])
    window.add("q", 3.0)
    now[0] = 5.0
    window.add("q", 1.0)
    assert window.peaks() == {"q": 3.0}
    now[0] = 12.0
    assert window.peaks() == {"q": 1.0}
    now[0] = 30.0
    assert window.peaks() == {}


def test_the_backlog_is_exposed_and_no_jvm_means_no_heap_figures() -> None:
    state = {"pending": 12, "limit": 50, "rate": 3.0}
    text = ServerMetrics(lambda: [], lambda: None, backlog=lambda: state).exposition().decode()
    assert "streamshield_ingest_backlog_elements 12.0" in text
    assert "streamshield_ingest_backlog_limit_elements 50.0" in text
    assert "streamshield_jvm_heap_bytes" not in text
