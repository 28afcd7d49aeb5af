"""A small frame's Parquet files written from the driver, without Spark's write job.

A landing of a few hundred rows crosses two Parquet writes before its subscriber has
it: secure ingest writes the labelled batch, then the stream's shared network writes its
pass. Spark's write of 1,000 rows costs ~0.2 s here, most of it not the rows: planning
the write, a job with its task and job commit through the Hadoop committer (temporary
directories and renames), the ``_SUCCESS`` marker. Collected as Arrow (one job, the
JVM writing the columns) and written by pyarrow (C++, no per-row Python), the same rows
cost ~0.09 s (``bench.landing_latency``, bench/results/landing-latency.json).

Only frames known to be small take this path: the caller decides from the files it
reads (:func:`total_bytes`; a micro-batch's files are in its checkpoint's source log,
engine/ingest/source_log.py), so a large batch never comes through the driver's memory. The
files are what Spark's writer makes of the same rows: one ``part-*.parquet`` file
(snappy), the schema's types as Spark reads them back (the Arrow types of Spark's own
``toArrow``), statistics and page index for the scan summaries' skipping; an empty
frame gives one file with the schema, as Spark's does. A frame Arrow cannot carry falls
back to Spark's write (the frame is then computed again: an observed metric is reported
by whichever action completes). A frame over a local relation whose plan folds into it is
computed on the driver, with no job at all (engine/frames/driver_rows.py); the rows written are
returned, so that the caller can go on over them rather than read the files back.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame

from streamshield.engine.frames.driver_rows import driver_arrow, is_local

log = logging.getLogger("streamshield.engine")

SMALL_BYTES = 1 << 20
"""Input bytes up to which a frame is written from the driver (a landing of ~10k
tuples; its Arrow form is a few MB even at 500 roles' label words)."""


def total_bytes(files: Iterable[str | Path], limit: int = SMALL_BYTES) -> int:
    """The bytes of ``files`` (paths or ``file:`` URIs), counted up to just past
    ``limit``; past it when a file cannot be read (unknown counts as large)."""
    total = 0
    for file in files:
        name = str(file)
        try:
            total += os.path.getsize(unquote(urlparse(name).path) if ":" in name else name)
        except OSError:
            return limit + 1
        if total > limit:
            break
    return total


def read_written(like: DataFrame, files: Sequence[str]) -> DataFrame:
    """The Parquet ``files`` just written from ``like``'s rows, read with ``like``'s
    schema as the JVM already holds it. Why not ``spark.read.schema(like.schema)``:
    PySpark's reader looks up the active session and sends a ``StructType`` to the JVM
    as JSON to be parsed again, several Py4J round trips that were half of planning the
    network's read of its pass back in a landing's micro-batch (a py-spy profile of
    ``bench.landing_latency``); the rows and the plan read are the same."""
    from pyspark.sql.classic.column import _to_seq
    from pyspark.sql.classic.dataframe import DataFrame as ClassicFrame

    session = like.sparkSession
    reader = session._jsparkSession.read().schema(like._jdf.schema())
    return ClassicFrame(reader.parquet(_to_seq(session.sparkContext, list(files))), session)


def write_parquet(
    frame: DataFrame,
    directory: Path,
    *,
    small: bool,
    sorted_by: str | None = None,
    **options: str,
) -> pa.Table | None:
    """``frame``'s rows as Parquet files in ``directory`` (replaced if it exists); from
    the driver when ``small``, by Spark's writer with ``options`` otherwise.
    ``sorted_by``: the column ``frame`` is sorted by within each partition, so each of
    Spark's files is; the driver's one file of every partition is sorted by it too.
    The rows written from the driver, as written (None: Spark wrote them)."""
    if small:
        try:
            table = _arrow(frame)
        except Exception as err:  # a type Arrow cannot carry: Spark writes it
            log.debug("driver write of %s fell back to Spark: %s", directory, err)
        else:
            if sorted_by is not None and sorted_by in table.column_names:
                table = table.sort_by(sorted_by)
            write_table(table, directory)
            return table
    writer = frame.write.mode("overwrite")
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.parquet(str(directory))
    return None


def write_table(table: pa.Table, directory: Path) -> None:
    """``table`` as the one Parquet file Spark's writer would make of its rows, in
    ``directory`` (replaced if it exists)."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    pq.write_table(table, directory / name, compression="snappy", write_page_index=True)


def _arrow(frame: DataFrame) -> pa.Table:
    """``frame.toArrow()``, computed on the driver without a Spark job when ``frame`` is
    a local relation its plan folds into (engine/frames/driver_rows.py); by Spark's job
    otherwise, or if the driver could not (which then fails as it always did)."""
    if is_local(frame):
        try:
            table = driver_arrow(frame)
        except Exception as err:  # the job computes it, or fails as it always did
            log.debug("rows not computed on the driver (%s)", type(err).__name__)
            table = None
        if table is not None:
            return table.cast(spark_arrow_schema(frame))
    return frame.toArrow()


def spark_arrow_schema(frame: DataFrame) -> pa.Schema:
    """The schema ``DataFrame.toArrow`` casts its rows to."""
    from pyspark.sql.pandas.types import to_arrow_schema

    conf = frame.sparkSession._jsparkSession.sessionState().conf()
    return to_arrow_schema(
        frame.schema,
        error_on_duplicated_field_names_in_struct=True,
        timezone="UTC",
        prefers_large_types=bool(conf.arrowUseLargeVarTypes()),
    )
