"""Crash at any point on a PostgreSQL catalog, short mode of ``bench/crash.py``: the
real server is SIGKILLed while landing, restarted, and the whole history checked (what
test_crash.py checks on SQLite)."""

from __future__ import annotations

import pytest
from bench.crash import run

from tests.db.conftest import pg_url  # noqa: F401  (the session's PostgreSQL)
from tests.server.test_crash import assert_survived

pytestmark = pytest.mark.spark


def test_a_kill_while_landing_on_postgresql(pg_url) -> None:  # noqa: F811
    points = ["landing.before_seq"]
    report = run(len(points), "postgresql", points=points, pg_url=pg_url, log=print)
    print(report)
    assert_survived(report, points)
