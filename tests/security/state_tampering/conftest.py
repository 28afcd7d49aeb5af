"""The session's one SparkSession (the same ``spark`` fixture as tests/spark)."""

from tests.spark.conftest import spark  # noqa: F401
