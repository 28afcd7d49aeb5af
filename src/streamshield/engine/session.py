"""The SparkSession the engine uses: local by default, the master is configuration."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession


def spark_session(
    master: str | None = None,
    app_name: str = "streamshield",
    *,
    conf: Mapping[str, str] | None = None,
    ui: bool = False,
) -> SparkSession:
    """One session per process; small shuffles because micro-batches are small.

    ``ui``: Spark's web UI is off unless asked for: it has no authentication and shows
    every query's plan (view names, literals). ``conf`` comes last, so an operator's
    ``--conf`` wins over these defaults.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = master or os.environ.get("STREAMSHIELD_SPARK_MASTER", "local[2]")
    if master.startswith("local"):  # a cluster's driver must advertise a reachable address
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "true" if ui else "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.ansi.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"


def with_class_cache(conf: Mapping[str, str], directory: Path) -> dict[str, str]:
    """``conf`` plus JVM class-data sharing through an archive in ``directory``.

    Starting the driver JVM loads and verifies some 20,000 classes, most of the Spark
    session's start-up time. The first start writes them to an archive when the JVM
    exits (``-XX:ArchiveClassesAtExit``); later starts map it (``SharedArchiveFile``).
    An archive that does not match this JVM or class path is ignored by the JVM, which
    then starts as without it; the name carries the pyspark version so an upgrade
    writes a new one. Operator options in ``conf`` are kept, after ours.
    """
    import pyspark

    directory.mkdir(parents=True, exist_ok=True)
    archive = directory / f"classes-{pyspark.__version__}.jsa"
    if archive.exists() and archive.stat().st_size > 0:
        option = f"-XX:SharedArchiveFile={archive}"
    else:
        option = f"-XX:ArchiveClassesAtExit={archive}"
    out = dict(conf)
    out[DRIVER_JAVA_OPTIONS] = " ".join(filter(None, [option, out.get(DRIVER_JAVA_OPTIONS)]))
    return out
