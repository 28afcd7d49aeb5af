"""A delivery job's rows, collected as Arrow columns; a class's rows made dicts once.

Delivery hands each subscriber a list of dicts. Collected the classic way, every row
comes over as a pickled ``Row`` with one struct per recipient class, each unpickled,
converted field by field (``StructType.fromInternal``) and made a dict again
(``Row.asDict``): at 64 listening users that Python was ~90% of a delivery's time and
the Spark job ~10% (py-spy, ``bench.sharing_users``). Collected as Arrow record batches,
the JVM writes the columns, and a class's rows become dicts in one C++ pass over its
own column (``to_pylist``), only for the rows it gets, once for every subscriber and
every output with that column.

Making 10k dicts (and a ``_masked`` list each) triggers Python's cyclic collector every
700 allocations, and now and then a full collection over a heap that holds every
subscriber's queued batches (0.1 s at a time in ``bench.sharing_users``): the collector
is held off while a column is made (:mod:`~streamshield.engine.gc_pause`; the rows hold
no cycles).

Values are what ``Row`` gave, with one difference by design: a timestamp is the naive
wall-clock time of the Spark session's time zone (UTC: engine/session.py), whereas
``Row`` used the Python process's local zone. Maps become dicts, as in ``Row.asDict``.
A frame Arrow cannot carry (a type without an Arrow form, a zoned timestamp inside a
map) is collected the classic way. (An interval, which classic rows cannot carry at all,
is handed over as Arrow's ``MonthDayNano``.)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import types as T
from pyspark.sql.classic.dataframe import DataFrame as ClassicFrame

from streamshield.engine.delivery.observed_collect import collect_observed
from streamshield.engine.delivery.shared_rows import SharedRows
from streamshield.engine.frames.driver_rows import driver_arrow, is_local
from streamshield.engine.gc_pause import gc_paused

audit = logging.getLogger("streamshield.audit")


class CollectedRows:
    """One job's rows: a column per recipient class, each made a list of dicts once
    (subscribers of one class, and equal classes of several outputs, share it and what
    is derived from it: :class:`~streamshield.engine.delivery.shared_rows.SharedRows`)."""

    def __init__(self, table: pa.Table | None = None, rows: list[Row] | None = None) -> None:
        self._table, self._rows = table, rows
        self._dicts: dict[int, SharedRows] = {}

    def dicts(self, position: int) -> SharedRows:
        """The non-NULL structs of column ``position``, in row order."""
        if position not in self._dicts:
            with gc_paused():  # a dict and a list a row: no cycles, but collections
                self._dicts[position] = SharedRows(self._made(position))
        return self._dicts[position]

    def _made(self, position: int) -> list[dict[str, Any]]:
        if self._table is not None:
            column = pc.drop_null(self._table.column(position))
            if not column.chunks:
                return []
            naive = pa.chunked_array([_naive(chunk) for chunk in column.chunks])
            if _has_map(naive.type):  # 20x slower a row: only where there is a map
                return naive.to_pylist(maps_as_pydicts="lossy")
            return naive.to_pylist()
        rows = self._rows or []
        return [row[position].asDict(recursive=True) for row in rows if row[position] is not None]


def collect_rows(
    frame: DataFrame, metrics: list[Column], then: Callable[[DataFrame], DataFrame]
) -> tuple[CollectedRows, dict[str, Any] | None]:
    """``then(frame)``'s rows and ``metrics`` over every row of ``frame`` in one job
    (:func:`~streamshield.engine.delivery.observed_collect.collect_observed`), as Arrow columns
    when every type in them gives the value classic rows give; classic rows otherwise."""
    if arrow_as_classic(then(frame)):
        try:
            table, counts = collect_observed(frame, metrics, then, arrow_table)
            return CollectedRows(table=table), counts
        except Exception as err:  # whatever it was, the classic collect runs the job again
            audit.warning("rows collected without Arrow (%s)", type(err).__name__)
    rows: list[Row]
    rows, counts = collect_observed(frame, metrics, then)
    return CollectedRows(rows=rows), counts


Drops = tuple[str, str, Column, Column]
"""What a class did not get, counted on the driver: the names of its count and of its
policy ids, and per row whether she missed it and, if so, its policy id (a string)."""


def drop_flags(drops: Sequence[Drops]) -> list[Column]:
    """Per drop count, its two per-row columns (missed, policy id), in order."""
    return [c for _, _, missed, policy in drops for c in (missed, policy)]


def collect_on_driver(
    frame: DataFrame, picks: Sequence[Column], drops: Sequence[Drops]
) -> tuple[CollectedRows, dict[str, Any]] | None:
    """``picks`` over every row of ``frame`` and the counts of ``drops``, with no Spark
    job, when ``frame`` is a local relation the picks fold into
    (:func:`~streamshield.engine.frames.driver_rows.driver_arrow`): the rows each pick is not
    NULL on are its rows, as :func:`collect_rows` of ``frame`` filtered by any pick's
    condition gives them (:func:`picked_rows`). None when it cannot (not local, a type
    Arrow gives otherwise than classic rows, or anything failing): the caller collects
    with its Spark job, which fails or delivers as it always did."""
    if not picks and not drops:
        return None
    try:
        if not is_local(frame):
            return None
        picked = frame.select(*picks, *drop_flags(drops))
        if not arrow_as_classic(picked):
            return None
        table = driver_arrow(picked)
    except Exception as err:  # the Spark job runs the same plan and reports it
        audit.debug("rows not computed on the driver (%s)", type(err).__name__)
        return None
    if table is None:
        return None
    return picked_rows(table, 0, len(picks), drops)


def picked_rows(
    table: pa.Table, first: int, picks: int, drops: Sequence[Drops]
) -> tuple[CollectedRows, dict[str, Any]]:
    """The rows of ``picks`` pick columns from column ``first`` of ``table`` (collected
    over every row: a pick is NULL on the rows that are not its own), and the counts of
    ``drops`` from their flags after them (:func:`drop_flags`): a count is the rows whose
    flag is true (``count_if``), the policy ids the distinct non-NULL ones
    (``collect_set``)."""
    counts: dict[str, Any] = {}
    for index, (count, policies, _, _) in enumerate(drops):
        at = first + picks + 2 * index
        counts[count] = int(pc.sum(table.column(at)).as_py() or 0)
        counts[policies] = pc.unique(pc.drop_null(table.column(at + 1))).to_pylist()
    return CollectedRows(table=table.select(list(range(first, first + picks)))), counts


def arrow_as_classic(frame: DataFrame) -> bool:
    """Whether Arrow gives every column of ``frame`` as classic rows do."""
    return all(_as_classic(field.dataType) for field in frame.schema.fields)


def arrow_table(frame: DataFrame) -> pa.Table:
    """Every row of ``frame``, its schema kept when it has none. Not
    ``DataFrame.toArrow``: it casts to a schema whose nested fields are not nullable and
    so fails on a NULL struct of non-nullable fields (a class's column on a row that is
    not its own)."""
    classic = cast(ClassicFrame, frame)  # the engine's frames are classic (no Spark Connect)
    return pa.Table.from_batches(classic._collect_as_arrow(empty_list_if_zero_records=False))


def _naive(array: pa.Array) -> pa.Array:
    """``array`` with every zoned timestamp in it, at any depth, as its naive wall time."""
    kind = array.type
    if not _zoned(kind):
        return array
    if pa.types.is_timestamp(kind):
        return pc.local_timestamp(array)
    mask = array.is_null() if array.null_count else None
    if pa.types.is_struct(kind):
        children = [_naive(child) for child in array.flatten()]
        names = [kind.field(i).name for i in range(kind.num_fields)]
        return pa.StructArray.from_arrays(children, names=names, mask=mask)
    assert pa.types.is_list(kind)  # _as_classic let nothing else through
    return pa.ListArray.from_arrays(array.offsets, _naive(array.values), mask=mask)


def _has_map(kind: pa.DataType) -> bool:
    if pa.types.is_map(kind):
        return True
    if pa.types.is_struct(kind):
        return any(_has_map(kind.field(i).type) for i in range(kind.num_fields))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _has_map(kind.value_type)
    return False


def _zoned(kind: pa.DataType) -> bool:
    """Whether ``kind`` holds a timestamp with a time zone anywhere."""
    if pa.types.is_timestamp(kind):
        return kind.tz is not None
    if pa.types.is_struct(kind):
        return any(_zoned(kind.field(i).type) for i in range(kind.num_fields))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _zoned(kind.value_type)
    if pa.types.is_map(kind):
        return _zoned(kind.key_type) or _zoned(kind.item_type)
    return False


_PLAIN = (
    T.NullType,
    T.BooleanType,
    T.ByteType,
    T.ShortType,
    T.IntegerType,
    T.LongType,
    T.FloatType,
    T.DoubleType,
    T.DecimalType,
    T.StringType,
    T.DateType,
    T.TimestampType,
    T.TimestampNTZType,
    T.CalendarIntervalType,  # classic rows cannot carry it at all
)


def _as_classic(kind: T.DataType, in_map: bool = False) -> bool:
    """Whether Arrow gives ``kind``'s values as classic rows do (after :func:`_naive`):
    plain types, and arrays, structs and maps of them, but not a zoned timestamp in a
    map (left alone by :func:`_naive`), nor a variant (Arrow gives its bytes), nor
    binary (``bytes``, not ``bytearray``)."""
    if isinstance(kind, T.ArrayType):
        return _as_classic(kind.elementType, in_map)
    if isinstance(kind, T.StructType):
        return all(_as_classic(f.dataType, in_map) for f in kind.fields)
    if isinstance(kind, T.MapType):
        return _as_classic(kind.keyType, True) and _as_classic(kind.valueType, True)
    if isinstance(kind, T.TimestampType):
        return not in_map
    return isinstance(kind, _PLAIN)
