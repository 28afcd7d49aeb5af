"""Every aggregate branch's partials of a batch collected to the driver in one Spark job.

Why: an aggregate branch folded on the driver (engine/aggregate_fold.py) needs only its
partials (one row per group the batch touched), and a job of its own per branch cost
each its scheduling, its stages and its collect; the fused selections of a network are
computed in one pass for the same reason (engine/fused_branches.py). Here the branches'
partial frames, each still planned over its own secured (or statistics) view, become
one union: a tag column naming the branch and one struct column per branch holding its
row (NULL in the others' rows), so that frames of different schemas travel as one
Arrow result. One ``toArrow`` runs the union's one job; the rows are split by tag on
the driver (pyarrow, vectorised). Security is unchanged: each branch's rows are its own
plan's, and only its own struct is handed to it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

_TAG = "_ss_tag"


def collect_together(frames: Mapping[str, DataFrame]) -> dict[str, pa.Table]:
    """Each of ``frames`` (name -> a small frame) as an Arrow table, all computed by one
    Spark job; a frame's columns keep their names and Spark's Arrow types."""
    if not frames:
        return {}
    if len(frames) == 1:
        ((name, frame),) = frames.items()
        return {name: frame.toArrow()}
    slots = {name: f"_ss_t{i}" for i, name in enumerate(frames)}
    # every field nullable: Arrow's view of a struct with non-null fields in a column
    # that is NULL in the other branches' rows does not convert
    types = {
        name: StructType([StructField(f.name, f.dataType, True) for f in frame.schema.fields])
        for name, frame in frames.items()
    }
    parts = []
    for i, (name, frame) in enumerate(frames.items()):
        columns = [
            _packed(frame).cast(types[name]).alias(slots[other])
            if other == name
            else F.lit(None).cast(types[other]).alias(slots[other])
            for other in frames
        ]
        parts.append(frame.select(F.lit(i).alias(_TAG), *columns))
    table = functools.reduce(DataFrame.unionAll, parts).toArrow()
    out = {}
    for i, name in enumerate(frames):
        packed = table.filter(pc.equal(table[_TAG], i))[slots[name]].combine_chunks()
        if isinstance(packed, pa.ChunkedArray):  # no chunks at all
            packed = pa.array([], packed.type)
        fields = [packed.type.field(j).name for j in range(packed.type.num_fields)]
        out[name] = pa.Table.from_arrays(packed.flatten(), names=fields)
    return out


def _packed(frame: DataFrame) -> F.Column:
    return F.struct(*(F.col(f"`{c}`") for c in frame.columns))
