"""Small driver-side tables (decisions, compiled policies) as Spark DataFrames via Arrow.

``createDataFrame`` of a Python list pickles the rows into an RDD that Python workers
on the executors must unpickle; an Arrow table goes to the JVM as columnar batches, so
no Python runs on executors at all (the engine then needs nothing but a JVM there).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructType,
)

_SCALARS: dict[type, pa.DataType] = {
    StringType: pa.string(),
    LongType: pa.int64(),
    IntegerType: pa.int32(),
    DoubleType: pa.float64(),
    BooleanType: pa.bool_(),
}


def arrow_type(spark_type: DataType) -> pa.DataType:
    if isinstance(spark_type, ArrayType):
        return pa.list_(arrow_type(spark_type.elementType))
    if isinstance(spark_type, StructType):
        return pa.struct([(f.name, arrow_type(f.dataType)) for f in spark_type.fields])
    return _SCALARS[type(spark_type)]


def as_python(value: Any, spark_type: DataType) -> object:
    """Tuples of struct fields become dicts, which is how pyarrow reads structs (``value``:
    whatever Spark gives for ``spark_type``)."""
    if value is None:
        return None
    if isinstance(spark_type, ArrayType):
        if not isinstance(spark_type.elementType, ArrayType | StructType):
            return list(value)  # scalars as they are: label words are hundreds per row
        return [as_python(v, spark_type.elementType) for v in value]
    if isinstance(spark_type, StructType):
        return {
            f.name: as_python(v, f.dataType) for f, v in zip(spark_type.fields, value, strict=True)
        }
    return value


def local_frame(
    spark: SparkSession, rows: Sequence[Sequence[object]], schema: StructType
) -> DataFrame:
    """A DataFrame of ``rows`` (tuples in schema order), built without Python workers."""
    return spark.createDataFrame(local_table(rows, schema))


def local_table(rows: Sequence[Sequence[object]], schema: StructType) -> pa.Table:
    """``rows`` (tuples in ``schema`` order) as the Arrow table :func:`local_frame` sends."""
    columns = {
        field.name: pa.array(
            [row[i] for row in rows]
            if type(field.dataType) in _SCALARS  # as they are: pyarrow reads them directly
            else [as_python(row[i], field.dataType) for row in rows],
            type=arrow_type(field.dataType),
        )
        for i, field in enumerate(schema.fields)
    }
    return pa.table(
        columns, schema=pa.schema([(f.name, arrow_type(f.dataType)) for f in schema.fields])
    )
