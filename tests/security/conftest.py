"""The session's one SparkSession for every threat package (the fixture of tests/spark)."""

from tests.spark.conftest import spark  # noqa: F401
