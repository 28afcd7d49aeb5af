"""The session's one SparkSession for every threat package (the fixture of tests/spark)."""

import pytest

from tests.spark.conftest import spark  # noqa: F401


@pytest.fixture(scope="session")
def labelled_ward(spark, tmp_path_factory):  # noqa: F811
    """The labelled ward of tests/security/ward.py, shared by the threat packages."""
    from tests.security.ward import Ward

    return Ward(spark, tmp_path_factory.mktemp("ward"))
