"""Smoke run of the served-load bench (``python -m bench.served_load --quick``): a real
``streamshield serve`` process with the hospital example, providers posting over HTTPS and
watchers on SSE. It asserts that the bench measures what it claims (every row the
watchers' selections must receive arrives, with a latency), nothing about speed: the
figures of the full run are the bench's, on a quiet machine."""

from __future__ import annotations

import pytest
from bench.served_load import main

pytestmark = pytest.mark.spark


def test_the_quick_served_load_delivers_every_selected_row() -> None:
    result = main(["--quick", "--no-write"])
    assert [s["watchers"] for s in result["steps"]] == [2]
    for step in result["steps"]:
        assert step["provider_errors"] == []
        assert step["acknowledged_per_s"] > 0 and step["delivered_rows_per_s"] > 0
        # every acknowledged row a selection takes arrives, once
        assert (step["rows_missing"], step["rows_beyond_expected"]) == (0, 0)
        assert step["delivered_share"] == 1.0
        latency = step["latency_s"]
        assert 0 < latency["p50"] <= latency["p95"] <= latency["p99"]
        assert step["caught_up_s"] is not None
        assert step["server_cores"] > 0 and step["server_rss_mb"][1] > 0
        assert step["events"] == {}  # no watcher was closed or dropped
    assert result["failure"] is None
