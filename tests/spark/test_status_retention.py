"""Spark's status store keeps no more finished work than the session's bounds.

It lives in the driver's heap whether the web UI runs or not; by default it keeps 1000
SQL executions (plans and metrics), 1000 jobs and 1000 stages, which a server of
continuous queries fills within minutes and then holds for nobody (flat memory
under overload needs them bounded). The bounds are static (read when the JVM's context starts), so
this checks that the running context has them and holds no more than they allow; in
the suite, hundreds of executions ran in this session before it. A run of more
executions than the bound in a row (``STREAMSHIELD_RETENTION_RUN=1``) checks the
trimming itself: ~1 s per execution on this machine at load 20-30, too slow for the
suite.
"""

from __future__ import annotations

import contextlib
import os

import pytest

from streamshield.engine.session import STATUS_RETENTION
from tests.polling import poll

pytestmark = pytest.mark.spark


def _retained(spark) -> tuple[int, int]:
    """(SQL executions, jobs) the status store holds now."""
    executions = spark._jsparkSession.sharedState().statusStore().executionsCount()
    jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None).size()
    return int(executions), int(jobs)


def test_finished_executions_and_jobs_are_kept_within_the_bounds(spark) -> None:
    conf = spark.sparkContext.getConf()  # what the context started with
    for key, value in STATUS_RETENTION.items():
        assert conf.get(key) == value, key
    executions = int(STATUS_RETENTION["spark.sql.ui.retainedExecutions"])
    jobs = int(STATUS_RETENTION["spark.ui.retainedJobs"])
    if os.environ.get("STREAMSHIELD_RETENTION_RUN"):
        for i in range(executions + 10):  # each an SQL execution and a job
            spark.range(i + 1).collect()
    # The store trims in a background thread once a bound is passed: bounded wait.
    with contextlib.suppress(AssertionError):  # the assertion below says what was held
        poll(lambda: _retained(spark)[0] <= executions, 30.0, 0.2)
    held = _retained(spark)
    assert held[0] <= executions and held[1] <= jobs, held
