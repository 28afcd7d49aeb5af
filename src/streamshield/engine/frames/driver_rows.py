"""A small frame's rows on the driver, computed by Spark's own expressions without a job.

On a landing's path the shared network writes its pass from the driver
(engine/store/small_writes.py): the pass's rows are then on the driver as an Arrow table, and
reading the files just written back with a Spark job (planning a file scan, a job, the
files decoded again) to collect what each subscriber gets would cost a job more. Over a frame
that is a ``LocalRelation`` (:func:`local_frame`), Spark's optimizer evaluates the
projections and filters above it on the driver (``ConvertToLocalRelation``), so the
delivery's plan (its SecFilter conditions and picks, unchanged Catalyst expressions,
interpreted rather than compiled) folds into a ``LocalTableScan`` whose rows are already
computed; :func:`driver_arrow` hands them over as Arrow, written by the JVM's own Arrow
converter, as a job's collect would (the same types, ``ArrowConverters``). A plan that
does not fold (an aggregate, an observation, a join) is not computed here: None, and the
caller runs its Spark job.

Measured at a landing of 1,000 rows through the server (``bench.landing_latency``, its
``jobs_per_round``): the network's micro-batch runs one Spark job instead of two (the
pass's collect and the delivery's collect of the pass read back). Interpreted evaluation
costs per row and grows with a projection's width, so a wide pass is delivered by a job
(``shared_network.DRIVER_WORK``).
"""

from __future__ import annotations

import logging
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import types as T

log = logging.getLogger("streamshield.engine")

_CONVERTERS = "org.apache.spark.sql.execution.arrow.ArrowConverters$"
_BIG = 1 << 62


def local_frame(like: DataFrame, table: pa.Table) -> DataFrame | None:
    """``table`` (``like``'s rows, as ``like.toArrow()`` gave them) as a frame over a
    ``LocalRelation`` with ``like``'s columns and types, every field nullable as a file
    read of the same rows is (so that no NULL check is optimized away on the strength of
    a nullability the rows were never checked against). None when Spark would not make
    it a local relation (past ``spark.sql.execution.arrow.localRelationThreshold``) or
    cannot take the table: read the rows another way."""
    try:
        schema = _nullable(like.schema)
        assert isinstance(schema, T.StructType)
        frame = like.sparkSession.createDataFrame(table, schema=schema)
        plan = frame._jdf.queryExecution().optimizedPlan()
        if plan.nodeName() != "LocalRelation":
            return None
        return frame
    except Exception as err:  # whatever it was, the rows are read another way
        log.debug("no local frame of %d rows (%s)", table.num_rows, type(err).__name__)
        return None


def is_local(frame: DataFrame) -> bool:
    """Whether every leaf of ``frame``'s plan is a local relation (its analysed plan: no
    planning, a few Py4J calls), so that :func:`driver_arrow` may be worth trying."""
    leaves = frame._jdf.queryExecution().analyzed().collectLeaves()
    size = leaves.size()
    return size > 0 and all(leaves.apply(i).nodeName() == "LocalRelation" for i in range(size))


def driver_arrow(frame: DataFrame) -> pa.Table | None:
    """``frame``'s rows as Arrow when its executed plan is a ``LocalTableScan`` (its rows
    computed on the driver while planning: no Spark job runs); None otherwise. Raises
    what planning raises (an expression failing on a row)."""
    plan = frame._jdf.queryExecution().executedPlan()
    if plan.nodeName() != "LocalTableScan":
        return None
    session = frame.sparkSession
    conf = session._jsparkSession.sessionState().conf()
    converters = getattr(getattr(session._jvm, _CONVERTERS), "MODULE$")
    zone, large = conf.sessionLocalTimeZone(), conf.arrowUseLargeVarTypes()
    schema = plan.schema()
    batches = converters.toBatchWithSchemaIterator(
        plan.rows().iterator(), schema, _BIG, _BIG, zone, True, large
    )
    tables: list[pa.Table] = []
    while batches.hasNext():
        tables.append(_read(batches.next()))
    if not tables:
        tables.append(_read(converters.createEmptyArrowBatch(schema, zone, True, large)))
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def _read(stream: Any) -> pa.Table:
    return pa.ipc.open_stream(bytes(stream)).read_all()


def _nullable(kind: T.DataType) -> T.DataType:
    if isinstance(kind, T.StructType):
        return T.StructType(
            [T.StructField(f.name, _nullable(f.dataType), True, f.metadata) for f in kind.fields]
        )
    if isinstance(kind, T.ArrayType):
        return T.ArrayType(_nullable(kind.elementType), True)
    if isinstance(kind, T.MapType):
        return T.MapType(kind.keyType, _nullable(kind.valueType), True)
    return kind
