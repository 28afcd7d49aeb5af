"""Every aggregate branch's partials of a batch collected to the driver in one Spark job.

Why: an aggregate branch folded on the driver (engine/sharing/aggregate_fold.py) needs only its
partials (one row per group the batch touched), and a job of its own per branch cost
each its scheduling, its stages and its collect; the fused selections of a network are
computed in one pass for the same reason (engine/sharing/fused_branches.py). Here the branches'
partial frames, each still planned over its own secured (or statistics) view, become
one union: a tag column naming the branch and one struct column per branch holding its
row (NULL in the others' rows), so that frames of different schemas travel as one
Arrow result. One ``toArrow`` runs the union's one job; the rows are split by tag on
the driver (pyarrow, vectorised). Security is unchanged: each branch's rows are its own
plan's, and only its own struct is handed to it.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.classic.dataframe import DataFrame as ClassicFrame
from pyspark.sql.types import StructField, StructType

_TAG = "_ss_tag"


def collect_together(
    frames: Mapping[str, DataFrame], schemas: Mapping[str, StructType] | None = None
) -> dict[str, pa.Table]:
    """Each of ``frames`` (name -> a small frame) as an Arrow table, all computed by one
    Spark job; a frame's columns keep their names and Spark's Arrow types. ``schemas``:
    the frames' schemas where the caller knows them (else each is asked of Spark)."""
    if not frames:
        return {}
    if len(frames) == 1:
        ((name, frame),) = frames.items()
        return {name: frame.toArrow()}
    slots = {name: f"_ss_t{i}" for i, name in enumerate(frames)}
    schema = dict(schemas or {})
    for name, frame in frames.items():
        if name not in schema:  # asked of Spark only where not known (a Py4J call)
            schema[name] = frame.schema
    key = tuple((n, schema[n].json()) for n in frames)
    if key not in _layouts:
        _layouts[key] = _layout(frames, schema, slots)
        while len(_layouts) > _LAYOUTS:
            _layouts.popitem(last=False)
    _layouts.move_to_end(key)
    selects = _layouts[key]
    parts: list[DataFrame] = [
        ClassicFrame(frame._jdf.select(select), frame.sparkSession)
        for frame, select in zip(frames.values(), selects, strict=True)
    ]
    table = functools.reduce(DataFrame.unionAll, parts).toArrow()
    out = {}
    for i, name in enumerate(frames):
        packed = table.filter(pc.equal(table[_TAG], i))[slots[name]].combine_chunks()
        if isinstance(packed, pa.ChunkedArray):  # no chunks at all
            packed = pa.array([], packed.type)
        fields = [packed.type.field(j).name for j in range(packed.type.num_fields)]
        out[name] = pa.Table.from_arrays(packed.flatten(), names=fields)
    return out


_LAYOUTS = 8
"""Layouts kept: one per set of frames collected together (it rarely changes)."""
_layouts: OrderedDict[tuple, tuple[Any, ...]] = OrderedDict()


def _layout(
    frames: Mapping[str, DataFrame], schema: Mapping[str, StructType], slots: Mapping[str, str]
) -> tuple[Any, ...]:
    """Per frame, its select as a Java column list: the tag, its own row packed in its
    slot, a typed NULL in every other's. Built once per set of frames and schemas: a
    few hundred Py4J calls (each column, cast and list element one), once rather than
    per batch."""
    from pyspark.sql.classic.column import _to_java_column, _to_seq

    # every field nullable: Arrow's view of a struct with non-null fields in a column
    # that is NULL in the other branches' rows does not convert
    types = {
        name: StructType([StructField(f.name, f.dataType, True) for f in s.fields])
        for name, s in schema.items()
    }
    selects = []
    for i, (name, frame) in enumerate(frames.items()):
        columns = [F.lit(i).alias(_TAG)]
        columns += [
            _packed(schema[name]).cast(types[name]).alias(slots[other])
            if other == name
            else F.lit(None).cast(types[other]).alias(slots[other])
            for other in frames
        ]
        selects.append(_to_seq(frame.sparkSession.sparkContext, columns, _to_java_column))
    return tuple(selects)


def _packed(schema: StructType) -> F.Column:
    return F.struct(*(F.col(f"`{f.name}`") for f in schema.fields))
