"""The test process's own local SparkSession (a cluster test's trusted ingest).

The same session as tests/spark's (``getOrCreate``: one per process), so running both
directories together starts one JVM here.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from streamshield.engine.session import spark_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = spark_session("local[2]", "streamshield-tests")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
