"""Spark's status store keeps no more finished work than the session's bounds.

It lives in the driver's heap whether the web UI runs or not; by default it keeps 1000
SQL executions (plans and metrics), 1000 jobs and 1000 stages, which a server of
continuous queries fills within minutes and then holds for nobody (issue 17: flat
memory under overload). More executions than the bound in a row must leave at most the
bound behind.
"""

from __future__ import annotations

import time

import pytest

from streamshield.engine.session import STATUS_RETENTION

pytestmark = pytest.mark.spark


def _retained(spark) -> tuple[int, int]:
    """(SQL executions, jobs) the status store holds now."""
    executions = spark._jsparkSession.sharedState().statusStore().executionsCount()
    jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None).size()
    return int(executions), int(jobs)


def test_finished_executions_and_jobs_are_kept_within_the_bounds(spark) -> None:
    executions = int(spark.conf.get("spark.sql.ui.retainedExecutions"))
    jobs = int(spark.conf.get("spark.ui.retainedJobs"))
    assert executions == int(STATUS_RETENTION["spark.sql.ui.retainedExecutions"])
    assert jobs == int(STATUS_RETENTION["spark.ui.retainedJobs"])
    for i in range(executions + 10):  # each: one SQL execution and its job
        spark.range(i + 1).collect()
    # The store trims in a background thread once a bound is passed: bounded wait.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _retained(spark)[0] > executions:
        time.sleep(0.2)
    held = _retained(spark)
    assert held[0] <= executions, held
    assert held[1] <= jobs, held
