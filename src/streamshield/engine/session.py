"""The SparkSession the engine uses: local by default, the master is configuration."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


def spark_session(master: str | None = None, app_name: str = "streamshield") -> SparkSession:
    """One session per process; small shuffles because micro-batches are small."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = master or os.environ.get("STREAMSHIELD_SPARK_MASTER", "local[2]")
    if master.startswith("local"):  # a cluster's driver must advertise a reachable address
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.ansi.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
