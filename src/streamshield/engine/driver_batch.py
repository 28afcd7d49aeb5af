"""A small ingest batch's elements as a frame on the driver, parsed by Spark's own JSON
parser, so that its labelling folds into the relation and no Spark job runs.

Ingest's streaming file source reads a landing's JSON lines in a Spark job; for a landing
of a few hundred elements that job (and the write's collect over it) was most of ingest's
micro-batch (``bench.landing_latency``). Here the batch's files (its checkpoint's
source log) are read as bytes on the driver, cut into lines as Hadoop's line reader cuts
them (``\\n``, ``\\r`` or ``\\r\\n``: what ``bytes.splitlines`` does), and put as one string
column into a ``LocalRelation``; :func:`elements` parses them with ``from_json`` and the
file reader's schema and (default) options, the same Jackson parser in the same
PERMISSIVE mode (a malformed line, a wrong type, a huge number: the same NULLs, the same
partial rows). No line is parsed in Python.

Where ``from_json`` and the file reader are known to differ, the batch is not read here
(None: the streaming query's own frame is labelled, as before), never read differently:

* a byte outside printable ASCII, tab, CR and LF: the file reader lets Jackson detect the
  encoding from the raw bytes (a BOM, UTF-16, invalid UTF-8 make a NULL row), while
  ``from_json`` decodes UTF-8 with replacement; the server lands ASCII (``json.dumps``);
* a line whose JSON starts with ``[``: the file reader makes a row of each element of a
  top-level array, ``from_json`` one NULL row;
* a file that cannot be read (missing, a directory): Spark's read fails or reads it.

Blank lines (spaces and tabs only) make no row in the file reader and are left out.
``tests/spark/test_driver_batch.py`` runs hostile files through both and compares every
labelled column, the shield state and the counts.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamshield.engine.driver_rows import local_path
from streamshield.engine.ingest import ELEMENT_SCHEMA

log = logging.getLogger("streamshield.engine")

_ALLOWED = bytes(range(0x20, 0x7F)) + b"\t\n\r"
"""The bytes a landing file read here may hold (anything else: Spark reads it)."""


def lines(files: Sequence[str]) -> pa.Array | None:
    """The non-blank lines of ``files`` in order, as the file source would read them, or
    None when one of them is outside what is read here (see the module's docstring)."""
    cut: list[bytes] = []
    for uri in files:
        try:
            data = Path(local_path(uri)).read_bytes()
        except OSError:
            return None
        if data.translate(None, _ALLOWED):
            return None  # a byte Jackson's encoding detection would read otherwise
        cut.extend(data.splitlines())
    text = pa.array(cut, pa.binary()).cast(pa.string())
    start = pc.utf8_ltrim(text, characters=" \t")
    if pc.any(pc.starts_with(start, "[")).as_py():
        return None  # a top-level array: rows per element in the file reader
    return text.filter(pc.not_equal(start, ""))


def elements(spark: SparkSession, files: Sequence[str]) -> tuple[DataFrame, int] | None:
    """The batch's elements with :data:`ELEMENT_SCHEMA`'s columns, over a local relation
    of the lines of ``files``, and their number (None: not read here, or Spark would not
    make it local)."""
    text = lines(files)
    if text is None:
        return None
    try:
        frame = spark.createDataFrame(pa.table({"value": text}))
        if frame._jdf.queryExecution().optimizedPlan().nodeName() != "LocalRelation":
            return None
        parsed = F.from_json(F.col("value"), ELEMENT_SCHEMA).alias("_ss_element")
        return frame.select(parsed).select("_ss_element.*"), len(text)
    except Exception as err:  # whatever it was, the streaming query's frame is read
        log.debug("batch not read on the driver (%s)", type(err).__name__)
        return None


def count_read(spark: SparkSession, rows: int) -> bool:
    """Adds ``rows`` to the rows the running micro-batch's file scan read (its
    ``numOutputRows`` metric, on the driver), so that the query's progress reports the
    batch's ``numInputRows`` as if the scan had run: the ingest backlog
    (server/ingest_backlog.py) subtracts them, and the rates on /metrics and GET /queries
    come from them. Only from the micro-batch's own thread (its query id is a local
    property there); False when the scan is not found (the progress then says 0)."""
    try:
        query = spark.sparkContext.getLocalProperty("sql.streaming.queryId")
        if query is None:
            return False
        running = spark._jsparkSession.streams().get(query)
        leaves = running.streamingQuery().lastExecution().executedPlan().collectLeaves()
        found = [leaves.apply(i).metrics().get("numOutputRows") for i in range(leaves.size())]
        metrics = [m.get() for m in found if m.isDefined()]
        if len(metrics) != 1:
            return False
        metrics[0].add(rows)
        return True
    except Exception as err:  # the progress says 0; the batch itself is not affected
        log.debug("rows read on the driver not counted (%s)", type(err).__name__)
        return False
