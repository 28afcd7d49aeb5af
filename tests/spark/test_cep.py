"""Event patterns on Spark find exactly the oracle's matches over the events the
watermark admits (docs/cep.md, "Watermark and late events").

Speed: one case runs every pattern of ``PATTERNS`` in one streaming query (a union) over
the same file sources and feeds it its batches of data and 1 or 2 that only move the
watermark (plus the batches without data Spark runs after each that moves the
watermark, unless a case turns them off). Many independent random event sequences
("runs") ride in one case, told apart by the partition key ``run``.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from streamshield.cep import oracle
from streamshield.cep.event_files import comparable, write_batch
from streamshield.cep.oracle import Event
from streamshield.cep.pattern import compile_pattern
from streamshield.cep.spark import compile_pattern as compile_spark
from tests.spark.cep_runs import run_patterns

pytestmark = pytest.mark.spark

ATTRS = {"id": "long", "run": "long", "k": "long", "v": "long", "ts": "timestamp"}
SCHEMAS = {name: ATTRS for name in ("A", "B", "C")}
DDL = "id bigint, run bigint, k bigint, v bigint, ts timestamp"
START = datetime(2026, 1, 1, tzinfo=UTC)
DELAY = timedelta(seconds=4.25)  # never equal to a gap between event times (all x.5 s)
KEY = "run"
# The batch that only moves the watermark far ahead: after it Spark runs a batch without
# data (as after every batch that moves the watermark), which evicts and emits the rest,
# and ``processAllAvailable`` waits for that batch too.
FLUSH = (1000,)
FIRST_RANDOM = 5  # runs 0..4 are fixed_case's

PATTERNS = {
    "seq_not": "PATTERN SEQ(A a, NOT C s, B b, C c) WHERE a.k = b.k AND s.k = a.k "
    "AND c.v > a.v WITHIN 10 SECONDS RETURN a.id, b.id, c.id",
    "seq_end": "PATTERN SEQ(A a, B b, NOT C s) WHERE a.k = b.k AND s.k = b.k "
    "WITHIN 6 SECONDS RETURN a.id, b.id",
    "and": "PATTERN AND(A a, B b) WHERE a.k = b.k OR b.v > 5 WITHIN 6 SECONDS RETURN a.id, b.id",
    "or_rows": "PATTERN OR(A a, B b) WHERE a.v > 5 OR b.k = 0 WITHIN 1 SECOND RETURN a.id, b.id",
    "or_agg": "PATTERN OR(A a, C c) WHERE a.v > 3 OR c.k = 1 WITHIN 10 SECONDS "
    "RETURN count(*), sum(a.v) AS sv, min(c.v) AS mc",
    "seq_agg": "PATTERN SEQ(B b, A a) WHERE b.k = a.k WITHIN 8 SECONDS "
    "RETURN b.k, count(*), avg(a.v) AS av, max(a.v) GROUP BY b.k",
}


def _event(type_: str, serial: int, run: int, second: float, k: int, v: int) -> Event:
    values = {"id": serial, "run": run, "k": k, "v": v, "ts": START + timedelta(seconds=second)}
    return Event(type_, values, serial)


def _write(root: Path, number: int, events: list[Event]) -> None:
    write_batch(root, number, events, SCHEMAS)


_plain = comparable


def run_case(
    spark, root: Path, batches: list[list[Event]], *, settled: bool = True
) -> dict[str, tuple[Counter, Counter]]:
    """(Spark's rows, the oracle's rows) per pattern, for rows of runs >= 0.

    Every pattern runs in one streaming query (a union of their outputs, as JSON rows
    tagged with the pattern's name), so that a micro-batch is paid once for all; the
    query's watermark is then the minimum over all three sources, which the oracle is
    told. One shuffle partition: micro-batches are tiny and each partition of each
    stateful operator costs a task. ``settled``: with Spark's micro-batches without data
    (see ``run_patterns``); without them the watermark moves ahead in one batch of data
    and evicts in the next, hence a second flush.
    """
    shutil.rmtree(root, ignore_errors=True)
    for type_ in SCHEMAS:
        (root / type_).mkdir(parents=True)
    sources = {t: spark.readStream.schema(DDL).json(str(root / t)) for t in SCHEMAS}
    flush = FLUSH if settled else (*FLUSH, 2 * FLUSH[-1])
    flushes = [[_event(t, -1, -1, s, 0, 0) for t in SCHEMAS] for s in flush]
    every = [*batches, *flushes]
    compiled = {name: compile_pattern(text, SCHEMAS) for name, text in PATTERNS.items()}
    frames = {
        name: compile_spark(pattern, sources, delay=DELAY, key=KEY)
        for name, pattern in compiled.items()
    }
    got = run_patterns(
        spark,
        frames,
        root / "checkpoint",
        every,
        lambda n, b: _write(root, n, b),
        settled=settled,
    )
    return {
        name: (
            _rows(got[name]),
            _rows(_expected(pattern, every, drops=oracle.stateful(pattern), settled=settled)),
        )
        for name, pattern in compiled.items()
    }


def _expected(
    pattern, batches: list[list[Event]], *, drops: bool = True, settled: bool = True
) -> list[tuple]:
    kept = oracle.admitted(batches, SCHEMAS, DELAY, key=KEY, drops=drops, settled=settled)
    return oracle.results(pattern, oracle.matches(pattern, kept, KEY), KEY)


def _rows(rows: list[tuple]) -> Counter:
    return Counter(tuple(map(_plain, r)) for r in rows if r[0] >= 0)


def _late_matters(batches: list[list[Event]]) -> bool:
    """Whether dropping late events changes the oracle's answer for some pattern."""
    for text in PATTERNS.values():
        pattern = compile_pattern(text, SCHEMAS)
        if _rows(_expected(pattern, batches)) != _rows(_expected(pattern, batches, drops=False)):
            return True
    return False


def fixed_case() -> list[list[Event]]:
    """Hand-made: a match completed by an out-of-order event within the watermark, one
    whose completing event arrives behind the watermark (dropped), a NOT whose
    interrupting event arrives late but within the watermark, and two events behind the
    watermark that reach only a join further down the plan (whose own watermark is
    lower by the window): a negated one that must not break its match, a third event of
    a SEQ that must not complete one."""
    n = iter(range(1, 100))
    batch0 = [
        _event("A", next(n), 0, 1.5, 1, 2),
        _event("B", next(n), 0, 12.5, 1, 9),
        _event("C", next(n), 0, 14.5, 1, 7),  # the watermark after this batch: 12.5 - 4.25 = 8.25
        _event("A", next(n), 1, 20.5, 2, 1),
        _event("C", next(n), 1, 24.5, 0, 8),
    ]
    batch1 = [
        _event("B", next(n), 0, 3.5, 1, 6),  # behind the watermark (8.25): dropped, no A-B match
        _event("B", next(n), 1, 22.5, 2, 7),  # out of order, within the watermark: matched
        _event("A", next(n), 1, 30.5, 2, 4),
        _event("B", next(n), 1, 33.5, 2, 2),
        _event("C", next(n), 1, 35.5, 0, 9),
        _event("A", next(n), 3, 17.5, 1, 0),
        _event("B", next(n), 3, 22.5, 1, 0),
        _event("C", next(n), 3, 23.5, 2, 5),  # completes seq_not: A@17.5 B@22.5 C@23.5
        _event("A", next(n), 4, 18.5, 2, 0),
        _event("B", next(n), 4, 21.5, 2, 0),
    ]  # the watermark after this batch: min(30.5, 33.5, 35.5) - 4.25 = 26.25
    batch2 = [
        _event("C", next(n), 1, 32.5, 2, 0),  # late but kept: breaks A@30.5 B@33.5 (NOT)
        _event("A", next(n), 2, 40.5, 0, 9),
        _event("B", next(n), 2, 41.5, 0, 1),
        _event("C", next(n), 2, 42.5, 0, 3),
        _event("C", next(n), 3, 20.5, 1, 0),  # dropped (26.25): must not break run 3's match
        _event("C", next(n), 4, 24.5, 0, 9),  # dropped: must not complete A@18.5 B@21.5
    ]
    return [batch0, batch1, batch2]


@st.composite
def runs(draw) -> list[list[Event]]:
    """Random events of a few independent runs over three micro-batches; batch b's event
    times centre on 15*b seconds, so later batches hold events behind the watermark."""
    serial = iter(range(1, 10_000))
    batches: list[list[Event]] = [[], [], []]
    for run in range(FIRST_RANDOM, FIRST_RANDOM + draw(st.integers(3, 6))):
        for _ in range(draw(st.integers(2, 14))):
            number = draw(st.integers(0, 2))
            second = 15 * number + draw(st.integers(-8, 12)) + 0.5
            type_ = draw(st.sampled_from(sorted(SCHEMAS)))
            k, v = draw(st.integers(0, 2)), draw(st.integers(0, 9))
            batches[number].append(_event(type_, next(serial), run, max(second, 0.5), k, v))
    # Every source sees data in the first batch, as in fixed_case (the watermark is the
    # minimum over sources that have seen data).
    batches[0].extend(_event(t, next(serial), 99, 0.5, 0, 0) for t in sorted(SCHEMAS))
    return batches


NO_SHRINKING = (Phase.explicit, Phase.reuse, Phase.generate)
"""A case costs a streaming query: shrinking a failure would take many minutes."""


@settings(
    max_examples=int(os.environ.get("STREAMSHIELD_CEP_EXAMPLES", "1")),
    deadline=None,
    phases=NO_SHRINKING,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(random=runs())
def test_spark_finds_exactly_the_oracles_matches(spark, tmp_path, random) -> None:
    """Random runs (ids 5..) ride with the hand-made late-event runs of ``fixed_case``
    (ids 0..4) in one case: one query, four batches of data."""
    fixed = fixed_case()
    assert _late_matters(fixed)  # the hand-made runs exercise the watermark
    batches = [f + r for f, r in zip(fixed, random, strict=True)]
    outcome = run_case(spark, tmp_path / "case", batches)
    for name, (got, expected) in outcome.items():
        assert got == expected, name
    assert all(outcome[name][1] for name in PATTERNS)  # every pattern has matches to find


LATENESS = (0, 0, 0, 0, 2, 5, 9, 13, 17, 21, 25)
"""Seconds an event's time lies behind its arrival's clock: most none, some beyond the
delay (4.25 s), some beyond the delay and a window (up to 10 s) as well."""


@st.composite
def split_runs(draw) -> tuple[list[list[Event]], bool]:
    """Random runs in one arrival order, cut at random points into 2 to 5 micro-batches,
    and whether Spark runs its micro-batches without data between them. Each event's
    time is the clock of its arrival (one second a step) less a random lateness, so that
    events reach every operator of the plan both within and behind their watermark."""
    serial = iter(range(1, 10_000))
    count = draw(st.integers(6, 40))
    arrivals = []
    for position in range(count):
        run = draw(st.integers(FIRST_RANDOM, FIRST_RANDOM + 3))
        second = max(position + 0.5 - draw(st.sampled_from(LATENESS)), 0.5)
        type_ = draw(st.sampled_from(sorted(SCHEMAS)))
        k, v = draw(st.integers(0, 2)), draw(st.integers(0, 9))
        arrivals.append(_event(type_, next(serial), run, second, k, v))
    cuts = sorted(draw(st.sets(st.integers(1, count - 1), min_size=1, max_size=4)))
    batches = [arrivals[i:j] for i, j in zip((0, *cuts), (*cuts, count), strict=True)]
    # Spark's watermark stays at 0 until every source has seen data (the oracle: until
    # one has): every source sees data in the first batch.
    batches[0].extend(_event(t, next(serial), 99, 0.5, 0, 0) for t in sorted(SCHEMAS))
    return batches, draw(st.booleans())


@pytest.mark.parametrize(
    "examples",
    [
        pytest.param(int(os.environ.get("STREAMSHIELD_CEP_SPLITS", "1")), id="suite"),
        pytest.param(40, id="long", marks=pytest.mark.long),
    ],
)
def test_any_split_into_micro_batches(spark, tmp_path, examples: int) -> None:
    """Spark's rows are the oracle's over ``oracle.admitted`` for random event sequences
    cut into micro-batches at random points, with and without Spark's micro-batches
    without data: every input of every pattern (negated events, the third event of a
    SEQ) dropped by the same rule, and the events of one match in different batches
    matched when they are admitted."""

    @settings(max_examples=examples, deadline=None, database=None, phases=NO_SHRINKING)
    @given(case=split_runs())
    def check(case: tuple[list[list[Event]], bool]) -> None:
        batches, settled = case
        root = tmp_path / f"split-{next(number)}"
        outcome = run_case(spark, root, batches, settled=settled)
        for name, (got, expected) in outcome.items():
            assert got == expected, (name, settled)

    number = iter(range(1_000_000))
    check()
