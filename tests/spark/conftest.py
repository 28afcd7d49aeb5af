"""One SparkSession for the whole test session (a JVM start costs seconds)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from streamshield.engine.session import DRIVER_JAVA_OPTIONS, spark_session

QUICK_JIT = "-XX:TieredStopAtLevel=1"
"""The tests' JVM compiles with C1 only. A test run is minutes of ever new small plans
on two busy cores: C2 spent about half a core re-compiling Spark's planner and
generated classes for code that ran a few more times before the next test, and a test
file ran about a fifth faster without it (tests/spark/test_driven_scan.py, interleaved
runs). A server runs for days and keeps the JVM's default."""


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = spark_session("local[2]", "streamshield-tests", conf={DRIVER_JAVA_OPTIONS: QUICK_JIT})
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
