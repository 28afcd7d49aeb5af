"""An aggregate branch's partials merged into its state by pyarrow on the driver.

Why: folding a batch into an aggregate branch's state with Spark (engine/sharing/aggregate_fold.py)
read the state back, unioned, shuffled, wrote and read it again, two jobs and more per
branch per batch, for a state of a few groups: it measured slower than the query's own
streaming aggregation (docs/query-sharing.md). The partials are one row per group, and
so is the state; merging them is a hash aggregation of a few rows, which pyarrow's
vectorised kernels do in microseconds on the driver (no per-row Python).

The merge must equal Spark's ``groupBy(keys).agg(<merge>(c).cast(<partial's type>))``
over the state and the partials (``FoldedAggregate.output``'s Spark path), nulls
included: ``sum`` of all-null is NULL (pyarrow's ``min_count=1``), ``min``/``max`` skip
nulls and give NULL for all-null, ``bit_and``/``bit_or`` (no pyarrow hash kernel) skip
nulls too, computed with numpy over each group's rows. Where the two could differ the
merge refuses (:class:`NotMergeable`) and the caller folds with Spark: a floating-point
key (Spark normalises NaN and -0.0 in grouping keys), a type not listed in ``_TYPES``,
an integer sum that could overflow (Spark's ANSI mode raises, pyarrow wraps), a decimal
sum that does not fit its type. Spark orders NaN above every double, so a ``max`` over a
NaN is NaN and a ``min`` is NaN only when nothing but NaN was seen; pyarrow skips NaN, so
doubles are merged with the NaNs counted apart.

Pure pyarrow and numpy: no Spark (tests/unit/test_arrow_merge.py property-tests it
against a plain Python oracle of Spark's semantics; tests/spark/test_aggregate_branches.py
against Spark's own merge).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamshield.lang.partial_aggregates import TOUCHED

_INDEX = "_ss_row"
_ONE = "_ss_one"
_NAN = "_ss_nan_"
_CLEAN = "_ss_clean_"
_INT64_SAFE = 1 << 62


class NotMergeable(Exception):
    """The merge could differ from Spark's here: fold with Spark instead."""


def _integer(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) and pa.types.is_signed_integer(t)


def _orderable(t: pa.DataType) -> bool:
    return (
        _integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_decimal(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_boolean(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
    )


_TYPES = {
    "sum": lambda t: t == pa.int64() or t == pa.float64() or pa.types.is_decimal(t),
    "min": _orderable,
    "max": _orderable,
    "bit_and": _integer,
    "bit_or": _integer,
}
"""The partial types each merge takes on the driver."""


def _key_type(t: pa.DataType) -> bool:
    return not pa.types.is_floating(t) and not pa.types.is_nested(t)


def mergeable(schema: pa.Schema, keys: Sequence[str], merges: Sequence[tuple[str, str]]) -> bool:
    """Whether partials of ``schema`` merge on the driver (types only; an overflow is
    found when merging)."""
    return all(_key_type(schema.field(k).type) for k in keys) and all(
        how in _TYPES and _TYPES[how](schema.field(c).type) for c, how in merges
    )


def merge(
    state: pa.Table | None,
    partial: pa.Table,
    keys: Sequence[str],
    merges: Sequence[tuple[str, str]],
    batch_id: int,
) -> pa.Table:
    """The new state: ``state`` (the partial columns and ``TOUCHED``, or None) and the
    batch's ``partial`` rows (the keys and partial columns) grouped by ``keys``, each
    partial merged by its aggregate, ``TOUCHED`` the newest batch that updated a group
    (``batch_id`` for the groups in ``partial``). Columns in ``partial``'s order and
    types, then ``TOUCHED``. Raises NotMergeable where Spark's merge could differ."""
    if not mergeable(partial.schema, keys, merges):
        raise NotMergeable("a key or partial type the driver does not merge")
    names = [*keys, *(c for c, _ in merges)]
    partial = partial.select(names)
    rows = partial.append_column(TOUCHED, pa.array(np.full(partial.num_rows, batch_id, np.int64)))
    if state is not None and state.num_rows:
        target = rows.schema
        rows = pa.concat_tables([state.select([*names, TOUCHED]).cast(target), rows])
    rows = rows.combine_chunks()
    group = list(keys) or [_ONE]
    rows = rows.append_column(_INDEX, pa.array(np.arange(rows.num_rows, dtype=np.int64)))
    if not keys:
        rows = rows.append_column(_ONE, pa.array(np.zeros(rows.num_rows, np.int8)))
    wanted: list[tuple[str, str] | tuple[str, str, pc.FunctionOptions]] = [
        (_INDEX, "list"),
        (TOUCHED, "max"),
    ]
    for column, how in merges:
        values = rows[column]
        if how == "sum":
            if pa.types.is_integer(values.type):
                peak = pc.max(pc.abs(values)).as_py() or 0
                if peak * max(rows.num_rows, 1) >= _INT64_SAFE:
                    raise NotMergeable(f"{column}: its sum could overflow")
            wanted.append((column, "sum", pc.ScalarAggregateOptions(min_count=1)))
        elif how in ("min", "max") and pa.types.is_floating(values.type):
            nan = pc.fill_null(pc.is_nan(values), False)
            rows = rows.append_column(_NAN + column, pc.cast(nan, pa.int64()))
            rows = rows.append_column(
                _CLEAN + column, pc.if_else(nan, pa.scalar(None, values.type), values)
            )
            wanted += [(_NAN + column, "sum"), (_CLEAN + column, how)]
        elif how in ("min", "max"):
            wanted.append((column, how))
    grouped = rows.group_by(group, use_threads=False).aggregate(wanted)
    columns: dict[str, pa.Array | pa.ChunkedArray] = {k: grouped[k] for k in keys}
    lists = grouped[f"{_INDEX}_list"].combine_chunks()
    order = lists.flatten()
    starts = lists.offsets.to_numpy()[:-1]
    for column, how in merges:
        kind = rows.schema.field(column).type
        if how == "sum":
            merged = grouped[f"{column}_sum"]
        elif how in ("min", "max") and pa.types.is_floating(kind):
            merged = _spark_float(grouped, column, how)
        elif how in ("min", "max"):
            merged = grouped[f"{column}_{how}"]
        else:
            merged = _bitwise(rows[column].take(order), starts, how)
        try:
            columns[column] = pc.cast(merged, kind)
        except pa.ArrowInvalid as err:  # a decimal sum past its type: Spark decides
            raise NotMergeable(f"{column}: {err}") from None
    columns[TOUCHED] = grouped[f"{TOUCHED}_max"]
    schema = pa.schema([*(partial.schema.field(n) for n in names), pa.field(TOUCHED, pa.int64())])
    return pa.table([columns[n] for n in schema.names], schema=schema)


def _spark_float(grouped: pa.Table, column: str, how: str) -> pa.ChunkedArray:
    """A double's min or max as Spark orders doubles: NaN above every number."""
    nans = pc.greater(grouped[f"{_NAN}{column}_sum"], 0)
    clean = grouped[f"{_CLEAN}{column}_{how}"]
    nan = pa.scalar(float("nan"), clean.type)
    if how == "max":
        return pc.if_else(nans, nan, clean)
    return pc.if_else(pc.and_(nans, pc.is_null(clean)), nan, clean)


def _bitwise(values: pa.ChunkedArray, starts: np.ndarray, how: str) -> pa.Array:
    """``bit_and``/``bit_or`` of each group's rows (``values`` grouped, each group
    beginning at ``starts``): nulls skipped, NULL for a group of nulls only."""
    array = values.combine_chunks()
    dtype = array.type.to_pandas_dtype()
    identity = -1 if how == "bit_and" else 0
    filled = pc.fill_null(array, identity).to_numpy(zero_copy_only=False).astype(dtype)
    ufunc = np.bitwise_and if how == "bit_and" else np.bitwise_or
    if not len(starts):
        return pa.array([], array.type)
    reduced = ufunc.reduceat(filled, starts)
    valid = array.is_valid().to_numpy(zero_copy_only=False).astype(np.int64)
    present = np.add.reduceat(valid, starts)
    return pa.array(reduced, array.type, mask=present == 0)
