"""The flat collect's declaration summaries equal the grouped collect's (engine/ingest/ingest).

After a batch with about one declaration per tuple, ``Ingest._collect`` brings one row
per tuple to the driver and aggregates there (``declaration_summaries``, pyarrow) instead
of Spark's ``groupBy``. Only the time may differ: every declaration (channel, declared ts
and csn, null keys included) must get the span of its own tuples' seqs, never a span that
mixes in another declaration's tuples, and no declaration may appear or vanish.
"""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from streamshield.engine.ingest.ingest import declaration_summaries

KEYS = ("stream", "provider", "p_ts", "p_csn")
ROWS = st.lists(
    st.tuples(
        st.sampled_from(["HeartRate", "Pulse"]),
        st.sampled_from(["a", "b", None]),
        st.sampled_from([1, 2, 3, None, -(2**63), 2**63 - 1]),
        st.sampled_from([1, 2, None]),
        st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
    ),
    max_size=60,
)


def _table(rows: list[tuple]) -> pa.Table:
    columns = list(zip(*rows, strict=True)) if rows else [()] * 5
    types = [pa.string(), pa.string(), pa.int64(), pa.int64(), pa.int64()]
    return pa.table(
        {n: pa.array(c, type=t) for n, c, t in zip([*KEYS, "seq"], columns, types, strict=True)}
    )


def _reference(rows: list[tuple]) -> dict[tuple, tuple]:
    """What ``groupBy(keys).agg(min(seq), max(seq))`` gives: nulls are keys like any value,
    null seqs are skipped and a group of only null seqs has no span."""
    seqs: dict[tuple, list[int]] = {}
    for *key, seq in rows:
        seqs.setdefault(tuple(key), [])
        if seq is not None:
            seqs[tuple(key)].append(seq)
    return {k: (min(v), max(v)) if v else (None, None) for k, v in seqs.items()}


@given(ROWS)
def test_each_declaration_gets_the_span_of_its_own_tuples(rows: list[tuple]) -> None:
    summaries = declaration_summaries(_table(rows))
    got = {tuple(s[k] for k in KEYS): (s["first"], s["last"]) for s in summaries}
    assert len(got) == len(summaries)  # one summary per declaration, none twice
    assert got == _reference(rows)
    assert all(set(s) == {*KEYS, "first", "last"} for s in summaries)


@given(ROWS, st.randoms(use_true_random=False))
def test_the_order_of_the_rows_changes_no_summary(rows: list[tuple], rng) -> None:
    shuffled = list(rows)
    rng.shuffle(shuffled)
    key = lambda s: tuple((v is None, v) for v in s.values())  # noqa: E731
    assert sorted(declaration_summaries(_table(rows)), key=key) == sorted(
        declaration_summaries(_table(shuffled)), key=key
    )


def test_declarations_differing_in_one_key_never_share_a_span() -> None:
    rows = [
        ("HeartRate", "a", 1, 1, 10),
        ("HeartRate", "b", 1, 1, 11),  # another provider
        ("HeartRate", "a", 2, 1, 12),  # another ts
        ("HeartRate", "a", 1, 2, 13),  # another csn
        ("HeartRate", "a", None, 1, 14),  # no ts (a NULL is its own key)
        ("Pulse", "a", 1, 1, 15),  # another stream
        ("HeartRate", "a", 1, 1, 16),
    ]
    got = {
        tuple(s[k] for k in KEYS): (s["first"], s["last"])
        for s in declaration_summaries(_table(rows))
    }
    assert got == {
        ("HeartRate", "a", 1, 1): (10, 16),
        ("HeartRate", "b", 1, 1): (11, 11),
        ("HeartRate", "a", 2, 1): (12, 12),
        ("HeartRate", "a", 1, 2): (13, 13),
        ("HeartRate", "a", None, 1): (14, 14),
        ("Pulse", "a", 1, 1): (15, 15),
    }


def test_no_tuples_no_declarations() -> None:
    assert declaration_summaries(_table([])) == []
