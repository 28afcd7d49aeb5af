"""The event pattern language and its oracle (pure; the Spark side is tests/spark/test_cep.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from streamshield.cep import oracle
from streamshield.cep.oracle import Event
from streamshield.cep.pattern import (
    Aggregate,
    Attr,
    Combinator,
    Function,
    PatternError,
    compile_pattern,
)

SCHEMAS = {
    "Temperature": {"ts": "timestamp", "room": "string", "celsius": "double"},
    "Smoke": {"ts": "timestamp", "room": "string", "level": "long"},
    "Alarm": {"ts": "timestamp", "room": "string", "on": "boolean"},
}
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_sequence_joined_by_room_within_minutes_parses() -> None:
    pattern = compile_pattern(
        "PATTERN SEQ(Temperature a, Smoke b) WHERE a.room = b.room AND a.celsius > 50 "
        "WITHIN 5 MINUTES RETURN a.room, b.ts",
        SCHEMAS,
    )
    assert pattern.combinator is Combinator.SEQ
    assert [(i.type, i.var) for i in pattern.items] == [("Temperature", "a"), ("Smoke", "b")]
    assert pattern.within == timedelta(minutes=5)
    assert [o.name for o in pattern.outputs] == ["a_room", "b_ts"]
    assert len(pattern.conjuncts()) == 2


def test_aggregates_with_group_by() -> None:
    pattern = compile_pattern(
        "pattern and(Temperature a, Smoke b) within 10 seconds "
        "return count(*), avg(a.celsius) as mean, a.room group by a.room",
        SCHEMAS,
    )
    assert pattern.aggregated
    assert pattern.outputs[0].value == Aggregate(Function.COUNT, None)
    assert pattern.outputs[1].name == "mean"
    assert pattern.group_by == (Attr("a", "room"),)


@pytest.mark.parametrize(
    ("text", "line", "column", "problem"),
    [
        ("PATTERN SEQ(Temperature a) WITHIN 1 SECOND RETURN a.room", 1, 13, "2 to 4 events"),
        (
            "PATTERN SEQ(Temperature a, Smoke b, Smoke c, Smoke d, Smoke e) WITHIN 1 SECOND "
            "RETURN a.room",
            1,
            13,
            "2 to 4 events",
        ),
        ("PATTERN SEQ(Temperature a, Smoke b)\nWITHIN 0 SECONDS RETURN a.room", 2, 8, "positive"),
        ("PATTERN SEQ(Temperature a, Smoke b)\nWITHIN -5 SECONDS RETURN a.room", 2, 8, "positive"),
        (
            "PATTERN SEQ(Temperature a, Smoke b)\n  WHERE a.room = 'top secret' secret\n"
            "WITHIN 1 SECOND RETURN a.room",
            2,
            31,
            "syntax error",
        ),
        ("PATTERN SEQ(Temperature a, Smoke a) WITHIN 1 SECOND RETURN a.room", 1, 28, "twice"),
        (
            "PATTERN SEQ(NOT Smoke s, Temperature a, Smoke b) WITHIN 1 SECOND RETURN a.room",
            1,
            17,
            "must follow an event",
        ),
        (
            "PATTERN AND(Temperature a, NOT Smoke s, Smoke b) WITHIN 1 SECOND RETURN a.room",
            1,
            32,
            "inside SEQ only",
        ),
        (
            "PATTERN SEQ(Temperature a, NOT Smoke s, Smoke b) WHERE s.level > 1 OR a.celsius > 1 "
            "WITHIN 1 SECOND RETURN a.room",
            1,
            56,
            "negated event (s)",
        ),
        (
            "PATTERN SEQ(Temperature a, NOT Smoke s, Smoke b) WITHIN 1 SECOND RETURN s.room",
            1,
            73,
            "negated event",
        ),
        (
            "PATTERN SEQ(Temperature a, Smoke b) WITHIN 1 SECOND RETURN a.room GROUP BY a.room",
            1,
            76,
            "GROUP BY needs an aggregate",
        ),
        (
            "PATTERN SEQ(Temperature a, Smoke b) WITHIN 1 SECOND RETURN a.room, count(*)",
            1,
            60,
            "must be in GROUP BY",
        ),
        (
            "PATTERN SEQ(Temperature a, Smoke b) WITHIN 1 SECOND RETURN c.room",
            1,
            60,
            "unknown variable c",
        ),
        (
            "PATTERN SEQ(Temperature a, Smoke b) WITHIN 1 SECOND RETURN a.room, b.room AS a_room",
            1,
            68,
            "used twice",
        ),
    ],
)
def test_malformed_patterns_say_where_and_never_echo_values(text, line, column, problem):
    with pytest.raises(PatternError) as caught:
        compile_pattern(text, SCHEMAS)
    assert (caught.value.line, caught.value.column) == (line, column)
    assert problem in caught.value.problem
    assert "secret" not in str(caught.value)


@pytest.mark.parametrize(
    ("where", "within", "problem"),
    [
        ("", "77777777777777 HOURS", "WITHIN may span at most 2147483647 seconds"),
        ("", "1" + "7" * 30 + " HOURS", "WITHIN may span at most"),
        ("", "7" * 5000 + " SECONDS", "WITHIN may span at most"),
        ("", "2147483648 SECONDS", "WITHIN may span at most"),
        ("", "596524 HOURS", "WITHIN may span at most"),
        ("WHERE a.celsius > " + "7" * 30, "1 SECOND", "must lie within"),
        ("WHERE a.celsius > 9223372036854775808", "1 SECOND", "(64 bits)"),
        ("WHERE a.celsius > -9223372036854775809", "1 SECOND", "(64 bits)"),
        ("WHERE a.celsius > " + "7" * 5000, "1 SECOND", "must lie within"),
        ("WHERE a.celsius > " + "7" * 400 + ".5", "1 SECOND", "finite double"),
    ],
)
def test_every_number_has_a_bound_and_a_clear_error(where, within, problem) -> None:
    text = f"PATTERN SEQ(Temperature a, Smoke b) {where} WITHIN {within} RETURN a.room"
    with pytest.raises(PatternError) as caught:
        compile_pattern(text, SCHEMAS)
    assert problem in caught.value.problem
    assert caught.value.line == 1 and caught.value.column is not None
    assert "777" not in str(caught.value)


@pytest.mark.parametrize(
    ("where", "within"),
    [
        ("WHERE a.celsius > 9223372036854775807", "2147483647 SECONDS"),
        ("WHERE a.celsius > -9223372036854775808", "596523 HOURS"),
        ("WHERE a.celsius > 1.5", "2147483648 MILLISECONDS"),
    ],
)
def test_numbers_at_their_bounds_are_accepted(where, within) -> None:
    text = f"PATTERN SEQ(Temperature a, Smoke b) {where} WITHIN {within} RETURN a.room"
    assert compile_pattern(text, SCHEMAS).within > timedelta(0)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("PATTERN SEQ(Temperature a, Fire b) WITHIN 1 SECOND RETURN a.room", "unknown event type"),
        ("PATTERN SEQ(Temperature a, Smoke b) WITHIN 1 SECOND RETURN a.kelvin", "no attribute"),
        (
            "PATTERN SEQ(Temperature a, Smoke b) WHERE a.room > 3 WITHIN 1 SECOND RETURN a.room",
            "cannot compare a string with a long",
        ),
        (
            "PATTERN SEQ(Temperature a, Smoke b) WITHIN 1 SECOND RETURN sum(a.room)",
            "sum needs a numeric attribute",
        ),
    ],
)
def test_names_and_kinds_are_checked_against_the_event_types(text, problem) -> None:
    with pytest.raises(PatternError, match=problem) as caught:
        compile_pattern(text, SCHEMAS)
    assert caught.value.line == 1


def _e(type_: str, serial: int, second: float, **values) -> Event:
    return Event(type_, {"ts": T0 + timedelta(seconds=second), **values}, serial)


EVENTS = [
    _e("Temperature", 1, 0, room="L1", celsius=60.0),
    _e("Smoke", 2, 1, room="L1", level=3),
    _e("Temperature", 3, 2, room="L2", celsius=70.0),
    _e("Smoke", 4, 4, room="L2", level=1),
    _e("Smoke", 5, 9, room="L1", level=2),
    _e("Alarm", 6, 5, room="L2", on=True),
]


def _ids(text: str, events=EVENTS) -> list[tuple]:
    pattern = compile_pattern(text, SCHEMAS)
    return sorted(oracle.results(pattern, oracle.matches(pattern, events)), key=repr)


def test_seq_is_strictly_ordered_and_bounded_by_the_window() -> None:
    text = (
        "PATTERN SEQ(Temperature a, Smoke b) WHERE a.room = b.room WITHIN 4 SECONDS "
        "RETURN a.celsius, b.level"
    )
    # T1@0-S2@1 (L1), T3@2-S4@4 (L2); S5@9 is 9 s after T1: outside the window.
    assert _ids(text) == [(60.0, 3), (70.0, 1)]
    same_time = [_e("Temperature", 1, 0, room="L1", celsius=1.0), _e("Smoke", 2, 0, room="L1")]
    assert _ids(text, same_time) == []
    edge = [_e("Temperature", 1, 0, room="L1", celsius=1.0), _e("Smoke", 2, 4, room="L1", level=1)]
    assert _ids(text, edge) == [(1.0, 1)]  # exactly WITHIN apart: inside


def test_not_excludes_matches_with_the_event_in_their_gap() -> None:
    text = (
        "PATTERN SEQ(Temperature a, NOT Smoke s, Alarm c) WHERE s.room = a.room "
        "WITHIN 10 SECONDS RETURN a.room, c.room"
    )
    # T1(L1)@0 .. A6@5: Smoke L1 @1 in between -> excluded; T3(L2)@2 .. A6@5: Smoke L2 @4.
    assert _ids(text) == []
    assert _ids(text, [e for e in EVENTS if e.serial != 4]) == [("L2", "L2")]


def test_a_trailing_not_reaches_to_the_end_of_the_window() -> None:
    text = (
        "PATTERN SEQ(Temperature a, Smoke b, NOT Alarm c) WHERE b.room = c.room "
        "WITHIN 5 SECONDS RETURN a.room, b.room"
    )
    # Alarm L2 @5: after S4(L2)@4 and within 5 s of T1@0 (inclusive) and of T3@2.
    rows = _ids(text)
    assert ("L1", "L2") not in rows and ("L2", "L2") not in rows
    assert rows == [("L1", "L1")]  # T1-S2; S5@9 is out of every window
    without = [e for e in EVENTS if e.serial != 6]
    assert sorted(_ids(text, without)) == [("L1", "L1"), ("L1", "L2"), ("L2", "L2")]


def test_and_takes_any_order_and_or_uses_sql_logic() -> None:
    both = "PATTERN AND(Alarm c, Temperature a) WITHIN 3 SECONDS RETURN c.room, a.room"
    assert _ids(both) == [("L2", "L2")]  # T3@2 is 3 s before A6@5: any order
    either = (
        "PATTERN OR(Temperature a, Smoke b) WHERE a.celsius > 65 OR b.level > 2 "
        "WITHIN 1 SECOND RETURN a.room, b.room"
    )
    assert _ids(either, EVENTS) == [("L2", None), (None, "L1")]


def test_aggregates_group_matches_by_window_of_their_last_event() -> None:
    text = (
        "PATTERN SEQ(Temperature a, Smoke b) WITHIN 5 SECONDS "
        "RETURN b.room, count(*), max(a.celsius) GROUP BY b.room"
    )
    pattern = compile_pattern(text, SCHEMAS)
    rows = oracle.results(pattern, oracle.matches(pattern, EVENTS))
    window = (T0, T0 + timedelta(seconds=5))
    # Matches: T1-S2 (L1 @1), T1-S4 and T3-S4 (L2 @4); S5@9 is too far from both.
    assert sorted(rows) == [(*window, "L1", 1, 60.0), (*window, "L2", 2, 70.0)]


def test_the_watermark_model_drops_events_behind_it() -> None:
    batches = [
        [_e("Temperature", 1, 10, room="L1", celsius=1.0), _e("Smoke", 2, 20, room="L1")],
        [_e("Smoke", 3, 4, room="L1"), _e("Smoke", 4, 7, room="L1")],
    ]
    kept = oracle.admitted(batches, ["Temperature", "Smoke"], timedelta(seconds=5))
    # The watermark after batch 0: min(10, 20) - 5 = 5; Smoke@4 is behind it.
    assert [e.serial for e in kept] == [1, 2, 4]
    everything = oracle.admitted(batches, ["Temperature", "Smoke"], timedelta(5), drops=False)
    assert len(everything) == 4


def test_the_watermark_waits_for_every_source() -> None:
    """Spark counts a source that has seen no data as watermark 0: nothing is late until
    every type has had an event."""
    batches = [
        [_e("Temperature", 1, 10, room="L1", celsius=1.0)],
        [_e("Smoke", 2, 2, room="L1"), _e("Temperature", 3, 1, room="L1", celsius=1.0)],
        [_e("Smoke", 4, 3, room="L1")],  # the watermark after batch 1: min(10, 2) - 1 = 1
        [_e("Smoke", 5, 1, room="L1")],
    ]
    kept = oracle.admitted(batches, ["Temperature", "Smoke"], timedelta(seconds=1))
    assert [e.serial for e in kept] == [1, 2, 3, 4]


def test_unsettled_batches_are_judged_by_the_watermark_one_batch_older() -> None:
    """Without a micro-batch without data between them, a batch's late events are judged
    by the watermark the previous micro-batch ran with, not the one it left."""
    batches = [
        [_e("Temperature", 1, 10, room="L1", celsius=1.0), _e("Smoke", 2, 20, room="L1")],
        [_e("Temperature", 3, 30, room="L1", celsius=1.0), _e("Smoke", 4, 40, room="L1")],
        [_e("Smoke", 5, 8, room="L1"), _e("Smoke", 6, 20, room="L1")],
    ]
    types, delay = ["Temperature", "Smoke"], timedelta(seconds=5)
    # Watermarks: 5 after batch 0, 25 after batch 1; batch 2 ran with 25 when settled,
    # and is judged by 5 (what batch 1 ran with) when not.
    assert [e.serial for e in oracle.admitted(batches, types, delay)] == [1, 2, 3, 4]
    unsettled = oracle.admitted(batches, types, delay, settled=False)
    assert [e.serial for e in unsettled] == [1, 2, 3, 4, 5, 6]
    with_empty = [batches[0], batches[1], [], batches[2]]  # Spark ran a batch without data
    assert oracle.admitted(with_empty, types, delay, settled=False) == oracle.admitted(
        batches, types, delay
    )
