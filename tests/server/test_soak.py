"""Bounded soak, short mode of ``bench/soak.py`` (the documented mode is
``python -m bench.soak --seconds 600``: 3 providers, 16 queries, 50 subscribers): a real
server under load from providers, queries and subscribers for a fixed time, with a
revocation probe, stops by itself and reports throughput, latencies and resources."""

from __future__ import annotations

import pytest
from bench.soak import Shape, run

pytestmark = pytest.mark.spark


def test_a_short_soak_runs_and_measures() -> None:
    shape = Shape(
        providers=2,
        queries=4,
        subscribers=4,
        seconds=15,
        tuples_per_post=10,
        revoke_every=5,
        sample_every=1,
        owners=2,
    )
    report = run(shape)
    print({k: v for k, v in report.items() if k != "samples"})
    assert report["errors"] == []
    assert report["tuples_acknowledged"] > 0 and report["rows_delivered"] > 0
    assert report["latency_seconds"]["n"] > 0
    assert 0 < report["latency_seconds"]["p50"] <= report["latency_seconds"]["p99"]
    assert report["revocation_seconds"]["count"] >= 1
    assert report["revocation_seconds"]["max"] < 10  # the server's re-check is every second
    assert len(report["samples"]) >= 5
    assert all(
        s["rss_mb"] > 0 and s["open_files"] > 0 and s["threads"] > 0 for s in report["samples"]
    )
