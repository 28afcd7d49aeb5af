"""Crash at any point on SQLite, short mode of ``bench/crash.py`` (the documented mode is
``python -m bench.crash --kills 60 --db sqlite|postgresql``): the real server is SIGKILLed
at chosen crash points, restarted, and the whole history is checked after each kill:
every acknowledged tuple landed and labelled once under its policy, every output row
stored once, a subscriber resuming from its last batch got each row once, a recipient
the policy does not name got nothing, and the catalog agrees with the definitions.
PostgreSQL's kill is in test_crash_postgresql.py: a file each, so that the suite's two
workers (``--dist loadfile``) can run them side by side."""

from __future__ import annotations

import pytest
from bench.crash import run

pytestmark = pytest.mark.spark

SQLITE_POINTS = ["ingest.before_marker", "catalog.query", "result.after_rename", "result.delivered"]
"""A labelling batch before its commit marker, a catalog change, a query's output in
place before Spark committed it, a batch delivered and not yet stored (the replay found
its branch switched off and never stored it): the windows where a bug was found or is
likeliest. The first kill's point is one set-up never passes, so the set-up's server is
armed for it and kept (one server start fewer: ``bench.crash.Harness.set_up``)."""
SUITE_POINTS = [SQLITE_POINTS[3]]
"""The suite's share: one kill (each kill is a server restart, about a minute on the
shared machine), in delivery's window, which only this harness reaches (the set-up's
server is armed for it too: result points are not passed in set-up). Ingest's window
before its commit marker is crashed in-process by tests/spark/test_ingest_job.py and
test_driven_ingest.py, a landing's by test_crash_postgresql.py. Every point runs in
long mode, and ``python -m bench.crash`` kills at each many times."""


def assert_survived(report: dict, points: list[str]) -> None:
    assert report["violations"] == []
    assert report["kills"] == len(points) and report["survived"] == len(points)
    for point in points:  # each named point was really reached, not a fallback kill
        assert report["points"][point]["reached"] >= 1, report["points"]
    delivered = report["rows_delivered"]
    assert report["tuples_acknowledged"] > 0 and delivered["al:g"] > 0
    assert delivered["bob:g"] == delivered["bob:q"] == 0


@pytest.mark.parametrize(
    "points",
    [
        pytest.param(SUITE_POINTS, id="suite"),
        pytest.param(SQLITE_POINTS, id="every", marks=pytest.mark.long),
    ],
)
def test_kills_at_crash_points_on_sqlite(points: list[str]) -> None:
    report = run(len(points), "sqlite", points=points, log=print)
    print(report)
    assert_survived(report, points)
