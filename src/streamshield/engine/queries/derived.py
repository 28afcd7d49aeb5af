"""Derived streams: a query's output registered as a stream other users query.

The output is landed like any provider's (``SpGen`` or a label-keeping export write
through the landing zone), so the derived stream is labelled by the same secure
ingest and governed by the sps that travel with it. Its schema comes from the query's
output schema; only the types a landing zone can check are accepted.
"""

from __future__ import annotations

from pyspark.sql.types import (
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructType,
    TimestampType,
)

from streamshield.catalog.streams import StreamDefinition

_TYPES: tuple[tuple[type[DataType], str], ...] = (
    (LongType, "bigint"),
    (IntegerType, "int"),
    (DoubleType, "double"),
    (StringType, "string"),
    (BooleanType, "boolean"),
    (TimestampType, "timestamp"),
)


class NotDerivable(ValueError):
    """The query's output cannot be a stream (a type or name the catalog cannot hold)."""


def derived_definition(
    name: str, schema: StructType, tid: str, event_time: str | None = None
) -> StreamDefinition:
    """The stream definition of a query output; label and origin columns are left out."""
    attributes = []
    for field in schema.fields:
        if field.name.startswith("_ss_"):
            continue
        spark_type = next((t for cls, t in _TYPES if isinstance(field.dataType, cls)), None)
        if spark_type is None:
            raise NotDerivable(
                f"output column {field.name!r} has type {field.dataType.simpleString()}, "
                "which a stream cannot hold"
            )
        attributes.append((field.name, spark_type))
    try:
        return StreamDefinition(name, tuple(attributes), tid, event_time)
    except ValueError as err:
        raise NotDerivable(str(err)) from None
