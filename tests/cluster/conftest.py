"""The test process's own local SparkSession (a cluster test's trusted ingest): the one
session-scoped fixture of tests/spark, so running both directories starts one JVM."""

from tests.spark.conftest import spark  # noqa: F401
