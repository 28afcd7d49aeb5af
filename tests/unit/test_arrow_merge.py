"""The driver's merge of partial aggregates equals Spark's merge (engine/sharing/arrow_merge.py).

An aggregate branch folded on the driver must give exactly the state Spark's
``groupBy(keys).agg(...)`` gives over the previous state and the batch's partials, nulls
and NaNs included. Here a Python oracle states Spark's semantics (``sum`` of all-null is
NULL; ``min``/``max``/``bit_and``/``bit_or`` skip nulls, NULL when nothing else is
seen; NaN orders above every double) and hypothesis draws states and partials with null
keys, null and NaN values; tests/spark/test_aggregate_branches.py compares with Spark
itself. Refusals: a floating-point key, an integer sum that could overflow, a type the
driver does not merge.
"""

from __future__ import annotations

import functools
import math
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamshield.engine.sharing.arrow_merge import NotMergeable, merge
from streamshield.lang.partial_aggregates import TOUCHED

MERGES = (
    ("_ss_p0", "sum"),  # a count
    ("_ss_p1", "sum"),  # a sum of longs
    ("_ss_p2", "sum"),  # a sum of doubles
    ("_ss_p3", "max"),
    ("_ss_p4", "min"),
    ("_ss_p5", "max"),  # doubles
    ("_ss_p6", "min"),  # doubles
    ("_ss_p7", "bit_and"),
    ("_ss_p8", "bit_or"),
    ("_ss_p9", "min"),  # strings
)
TYPES = (
    pa.int64(),
    pa.int64(),
    pa.float64(),
    pa.int64(),
    pa.int64(),
    pa.float64(),
    pa.float64(),
    pa.int64(),
    pa.int64(),
    pa.string(),
)
SCHEMA = pa.schema(
    [
        pa.field("_ss_k0", pa.string()),
        *(pa.field(c, t) for (c, _), t in zip(MERGES, TYPES, strict=True)),
    ]
)

longs = st.one_of(st.none(), st.integers(-(2**40), 2**40))
doubles = st.one_of(st.none(), st.just(math.nan), st.integers(-1000, 1000).map(float))
words = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1))
values = st.tuples(
    st.integers(0, 1000),
    longs,
    doubles,
    longs,
    longs,
    doubles,
    doubles,
    words,
    words,
    st.one_of(st.none(), st.text(max_size=3)),
)
partials = st.dictionaries(st.one_of(st.none(), st.sampled_from("abcd")), values, max_size=5)


def _table(rows: dict) -> pa.Table:
    keys = list(rows)
    columns = [pa.array(keys, pa.string())]
    columns += [pa.array([rows[k][i] for k in keys], t) for i, t in enumerate(TYPES)]
    return pa.Table.from_arrays(columns, schema=SCHEMA)


def _spark(how: str, seen: list) -> object:
    """One merge as Spark computes it over ``seen`` (the state's and the batch's)."""
    present = [v for v in seen if v is not None]
    if not present:
        return None
    if how == "sum":
        return sum(present)
    if how in ("bit_and", "bit_or"):
        op = (lambda a, b: a & b) if how == "bit_and" else (lambda a, b: a | b)
        return functools.reduce(op, present)
    numbers = [v for v in present if not (isinstance(v, float) and math.isnan(v))]
    if how == "max":
        return math.nan if len(numbers) < len(present) else max(numbers)
    return min(numbers) if numbers else math.nan


def _oracle(batches: list[dict]) -> dict:
    """Each group's merged values and the newest batch that touched it."""
    out: dict = {}
    for batch_id, rows in enumerate(batches):
        for key, row in rows.items():
            seen, _ = out.get(key, ([[] for _ in MERGES], None))
            for i, value in enumerate(row):
                seen[i].append(value)
            out[key] = (seen, batch_id)
    return {
        k: (*(_spark(how, seen[i]) for i, (_, how) in enumerate(MERGES)), at)
        for k, (seen, at) in out.items()
    }


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


@settings(max_examples=200, deadline=None)
@given(st.lists(partials, min_size=1, max_size=4))
def test_merging_batch_by_batch_equals_sparks_merge_over_everything(batches) -> None:
    state = None
    for batch_id, rows in enumerate(batches):
        state = merge(state, _table(rows), ["_ss_k0"], MERGES, batch_id)
    assert state is not None
    assert state.schema.names == [*SCHEMA.names, TOUCHED]
    assert [f.type for f in state.schema][:-1] == list(SCHEMA.types)
    got = {r["_ss_k0"]: tuple(r[n] for n in state.schema.names[1:]) for r in state.to_pylist()}
    expected = _oracle(batches)
    assert got.keys() == expected.keys()
    for key, row in expected.items():
        assert all(_same(a, b) for a, b in zip(got[key], row, strict=True)), (key, got[key], row)


def test_a_global_aggregate_is_one_group() -> None:
    one = pa.table({"_ss_p0": pa.array([3], pa.int64()), "_ss_p1": pa.array([None], pa.int64())})
    merges = [("_ss_p0", "sum"), ("_ss_p1", "max")]
    state = merge(merge(None, one, [], merges, 0), one, [], merges, 1)
    assert state.to_pylist() == [{"_ss_p0": 6, "_ss_p1": None, TOUCHED: 1}]


def test_groups_the_batch_did_not_touch_keep_their_batch() -> None:
    merges = [("_ss_p0", "sum")]
    first = pa.table({"_ss_k0": [1, 2], "_ss_p0": pa.array([1, 1], pa.int64())})
    second = pa.table({"_ss_k0": [2], "_ss_p0": pa.array([5], pa.int64())})
    state = merge(merge(None, first, ["_ss_k0"], merges, 0), second, ["_ss_k0"], merges, 1)
    assert sorted(state.to_pylist(), key=lambda r: r["_ss_k0"]) == [
        {"_ss_k0": 1, "_ss_p0": 1, TOUCHED: 0},
        {"_ss_k0": 2, "_ss_p0": 6, TOUCHED: 1},
    ]


def test_decimal_sums_keep_their_type_and_refuse_an_overflow() -> None:
    kind = pa.decimal128(5, 2)
    merges = [("_ss_p0", "sum")]
    part = pa.table({"_ss_k0": ["a"], "_ss_p0": pa.array([Decimal("500.00")], kind)})
    state = merge(None, part, ["_ss_k0"], merges, 0)
    assert state.schema.field("_ss_p0").type == kind
    with pytest.raises(NotMergeable):  # 1000.00 does not fit decimal(5, 2): Spark decides
        merge(state, part, ["_ss_k0"], merges, 1)


@pytest.mark.parametrize(
    ("partial", "keys", "merges"),
    [
        (pa.table({"k": [1.5], "p": pa.array([1], pa.int64())}), ["k"], [("p", "sum")]),
        (pa.table({"k": [1], "p": pa.array([2**62], pa.int64())}), ["k"], [("p", "sum")]),
        (pa.table({"k": [1], "p": pa.array([1.0], pa.float32())}), ["k"], [("p", "sum")]),
        (pa.table({"k": [1], "p": pa.array([b"x"], pa.binary())}), ["k"], [("p", "max")]),
        (pa.table({"k": [1], "p": pa.array([1.0])}), ["k"], [("p", "bit_or")]),
    ],
    ids=["float key", "sum overflow", "float sum", "binary max", "bit_or of double"],
)
def test_what_could_differ_from_spark_is_refused(partial, keys, merges) -> None:
    with pytest.raises(NotMergeable):
        merge(None, partial, keys, merges, 0)
