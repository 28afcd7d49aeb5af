"""Secure ingest reads an sp from its typed columns exactly as from their JSON (lang/wire).

``Ingest._collect`` collects an sp's fields as typed Arrow columns, not as Spark's
``to_json`` of its fields read with ``wire.parse_sp``, and reads them with
``wire.sp_of_columns``, which keeps what it derives from a body per distinct body. On
every combination of field values Spark's schema can hold (None for a null, hostile
strings, out-of-range numbers), the column reader must return the sp that ``parse_sp``
reads from the JSON, or None exactly where ``parse_sp`` raises: a malformed or forged sp
is dropped (its policy stays incomplete, its tuples are denied) either way.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from streamshield.lang import wire
from streamshield.lang.wire import WireFormatError, parse_sp, sp_of_columns
from streamshield.policy.elements import SpElement
from tests.unit.test_wire import sp_elements

LONG = st.integers(min_value=-(2**63), max_value=2**63 - 1)
STRINGS = st.one_of(
    st.sampled_from(["HeartRate", "p1", "*", "[120, 133]", "{GP, ND}", "{a,b}", "GP", "r 1"]),
    st.sampled_from(["", "+", "-", "read", "statistics", "grant", "READ", "\u00e9", 'a"b']),
    st.sampled_from(["a\\b", "\\u0041", "a\x00", "[1, 5", "{}", "r*", "ALL", "a\nb"]),
    st.text(max_size=6),
)


def nullable(values: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(st.none(), values, values, values)


@st.composite
def columns(draw: st.DrawFn) -> tuple:
    """Values of the columns ``Ingest._collect`` reads (stream, provider, seq, then
    ``ingest.SP_COLUMNS``), as Arrow gives them from Spark's types: str, int, bool or
    None; mostly near a valid sp so that the sp checks are reached."""
    valid = (
        "HeartRate",
        "p1",
        draw(st.integers(0, 9)),
        draw(st.integers(1, 9)),
        draw(st.integers(1, 3)),
        "HeartRate",
        draw(st.sampled_from(["*", "[120, 133]", "{1, 2}"])),
        draw(st.sampled_from(["*", "{a, b}"])),
        draw(st.sampled_from(["GP", "{GP, ND}", "*"])),
        draw(st.booleans()),
        draw(st.sampled_from([None, "read", "statistics"])),
        draw(st.sampled_from(["+", "-"])),
        draw(st.booleans()),
    )
    kinds = ["s", "s", "l", "l", "l", "s", "s", "s", "s", "b", "s", "s", "b"]
    out = list(valid)
    for _ in range(draw(st.integers(0, 3))):
        i = draw(st.integers(0, len(out) - 1))
        kind = {"s": STRINGS, "l": LONG, "b": st.booleans()}[kinds[i]]
        out[i] = draw(nullable(kind))
    return tuple(out)


def spark_json(values: tuple) -> str:
    """Spark's ``to_json`` of the sp's struct (``Ingest``'s former ``sp`` column): the
    fields in schema order, a None one left out (``ignoreNullFields``), UTF-8 as is."""
    stream, provider, seq, ts, sn, streams, tuples, attributes, *srp, sign, immutable = values
    raw = {"type": "sp", "stream": stream, "provider": provider, "seq": seq, "ts": ts, "sn": sn}
    ddp = {"streams": streams, "tuples": tuples, "attributes": attributes}
    srp_fields = dict(zip(("roles", "grant_option", "privilege"), srp, strict=True))
    raw |= {"ddp": ddp, "srp": srp_fields, "sign": sign, "immutable": immutable}
    kept = {
        k: ({n: x for n, x in v.items() if x is not None} if isinstance(v, dict) else v)
        for k, v in raw.items()
        if v is not None
    }
    return json.dumps(kept, separators=(",", ":"), ensure_ascii=False)


def from_json(values: tuple) -> Any:
    try:
        element = parse_sp(spark_json(values))
    except WireFormatError:
        return None
    return element.sp if isinstance(element, SpElement) else None


def read_twice(values: tuple) -> Any:
    """The column reader on a fresh body, then on the body it has kept: both the same."""
    wire._bodies.clear()
    first = sp_of_columns(*values)
    assert sp_of_columns(*values) == first
    return first


@given(columns())
@example(("HeartRate", "p1", 0, 1, 1, "HeartRate", "*", "*", "GP", False, None, "+", False))
@example(("HeartRate", "p1", 0, 1, 1, "HeartRate", "*", "*", "GP", True, None, "-", False))
@example(("HeartRate", "p1", 0, 1, 1, "*", "*", "*", "GP", False, "statistics", "-", False))
@example(("HeartRate", "p1", 0, 1, 1, "*", "*", "*", "GP", False, "grant", "+", False))
@example(("HeartRate", "", 0, 1, 1, "*", "*", "*", "GP", False, None, "+", False))
@example(("HeartRate", "p1", -1, 1, 1, "*", "*", "*", "GP", False, None, "+", False))
@example(("HeartRate", "p1", 0, 0, 1, "*", "*", "*", "GP", False, None, "+", False))
@example(("HeartRate", "p1", 0, 1, 0, "*", "*", "*", "GP", False, None, "+", False))
@example(("HeartRate", "p1", 0, 1, 1, None, None, None, "GP", False, None, "+", False))
@example(("HeartRate", "p1", 0, 1, 1, "*", "*", "*", None, None, None, "+", False))
@example(("HeartRate", "p1", 0, 1, 1, "*", "[1, 5", "*", "GP", False, None, "+", False))
@example(("HeartRate", "p1", 0, 1, 1, "*", "*", "*", "\u00e9", False, None, "+", True))
@example(("HeartRate", "p1", 0, 1, 1, "*", "*", "*", "a\\b", False, None, "+", False))
def test_columns_read_as_their_json(values: tuple) -> None:
    assert read_twice(values) == from_json(values)


@given(sp_elements)
def test_every_valid_sp_reads_back(element: SpElement) -> None:
    line = json.loads(wire.to_line(element))
    srp = line["srp"]
    values = (
        *(line[k] for k in ("stream", "provider", "seq", "ts", "sn")),
        *(line["ddp"][k] for k in ("streams", "tuples", "attributes")),
        srp["roles"],
        srp["grant_option"],
        srp.get("privilege"),
        line["sign"],
        line["immutable"],
    )
    assert read_twice(values) == element.sp == from_json(values)


BASE = ("HeartRate", "p1", 3, 7, 1, "HeartRate", "*", "*", "GP", False, None, "+", False)


@pytest.mark.parametrize(
    ("at", "other"),
    [
        (5, "*"),  # ddp.streams
        (6, "[1, 5]"),  # ddp.tuples
        (7, "{a, b}"),  # ddp.attributes
        (8, "{GP, ND}"),  # srp.roles
        (9, True),  # grant option
        (10, "statistics"),  # privilege
        (11, "-"),  # sign
        (12, True),  # immutable
    ],
)
def test_two_bodies_never_share_a_parse(at: int, other: object) -> None:
    """Bodies that differ in one field, read one after the other in both orders, keep
    their own sp: the kept body is keyed by every field of it."""
    changed = (*BASE[:at], other, *BASE[at + 1 :])
    for order in ((BASE, changed), (changed, BASE)):
        wire._bodies.clear()
        got = [sp_of_columns(*values) for values in order]
        assert got == [from_json(values) for values in order]
        assert got[0] != got[1]


def test_a_kept_body_is_not_taken_for_an_equal_value_of_another_type() -> None:
    """``True == 1`` and they hash alike: a body kept with ``grant_option`` True must not
    let an integer 1 (which the JSON reader refuses) read as a grant option."""
    wire._bodies.clear()
    granted = (*BASE[:9], True, *BASE[10:])
    assert sp_of_columns(*granted) is not None
    for forged in ((*BASE[:9], 1, *BASE[10:]), (*BASE[:12], 0)):
        assert sp_of_columns(*forged) is None
        assert from_json(forged) is None


def test_a_failing_body_stays_failed_and_per_sp_fields_are_checked_each_time() -> None:
    wire._bodies.clear()
    denied_with_grant = (*BASE[:9], True, None, "-", False)
    assert sp_of_columns(*denied_with_grant) is None
    assert sp_of_columns(*denied_with_grant) is None  # from the kept failure
    assert sp_of_columns(*BASE) is not None
    for bad in (
        (*BASE[:3], 0, *BASE[4:]),
        (*BASE[:4], 0, *BASE[5:]),
        ("HeartRate", None, *BASE[2:]),
    ):
        assert sp_of_columns(*bad) is None  # the body is kept, the sp's own fields are not


def test_long_texts_are_not_kept() -> None:
    wire._bodies.clear()
    ids = "{" + ", ".join(str(i) for i in range(200)) + "}"
    values = (*BASE[:6], ids, *BASE[7:])
    assert sp_of_columns(*values) == from_json(values) is not None
    assert wire._bodies == {}
