"""The fast reading of an sp line (secure ingest's driver) equals the validator's.

``parse_sp`` skips the general validator for the common shape of an sp; on every line,
valid or hostile, it must return the same element or raise the same error (class and
text) as ``parse_element``: a forged or malformed sp must never be read differently.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from streamshield.lang import wire
from streamshield.lang.wire import WireFormatError, parse_element, parse_sp, to_line
from streamshield.policy.elements import SpElement
from tests.unit.test_wire import REJECTIONS, sp_dict, sp_elements, tuple_dict


def outcome(read: Any, line: str) -> object:
    try:
        return read(line)
    except WireFormatError as err:
        return (type(err), str(err), err.line)


def same(line: str) -> None:
    assert outcome(parse_sp, line) == outcome(parse_element, line)


HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.sampled_from(["", "sp", "tuple", "+", "-", "read", "statistics", "grant", "*", "\u00e9"]),
    st.sampled_from(["{r1, r2}", "{r1,r2}", "[1, 5]", "ALL", "r 1", "\\u0041", "{}", "a\x00"]),
    st.text(max_size=6),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
PATHS = [
    ("type",),
    ("stream",),
    ("provider",),
    ("seq",),
    ("ts",),
    ("sn",),
    ("sign",),
    ("immutable",),
    ("ddp",),
    ("srp",),
    ("level",),
    ("_ss_r0",),
    ("values",),
    ("ddp", "streams"),
    ("ddp", "tuples"),
    ("ddp", "attributes"),
    ("ddp", "roles"),
    ("srp", "roles"),
    ("srp", "grant_option"),
    ("srp", "privilege"),
    ("srp", "model"),
]


@st.composite
def hostile_lines(draw: st.DrawFn) -> str:
    """An sp (or tuple) dict with a few fields removed, retyped or added, written in a
    random key order, sometimes with its text cut, doubled keys or spaces."""
    raw = draw(st.sampled_from([sp_dict, tuple_dict]))()
    for _ in range(draw(st.integers(0, 3))):
        path = draw(st.sampled_from(PATHS))
        parent = raw
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if not isinstance(parent, dict):
            continue
        if draw(st.booleans()) and path[-1] in parent:
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(HOSTILE)
    keys = draw(st.permutations(list(raw)))
    text = json.dumps(
        {k: raw[k] for k in keys}, separators=draw(st.sampled_from([(",", ":"), (", ", ": ")]))
    )
    edit = draw(st.integers(0, 4))
    if edit == 1:
        text = text[: draw(st.integers(0, len(text)))]
    elif edit == 2 and len(text) > 2:  # a doubled key: the last one wins in both readers
        key = draw(st.sampled_from(["seq", "sign", "type", "immutable", "ts"]))
        text = text[:-1] + f', "{key}": {json.dumps(draw(HOSTILE))}}}'
    elif edit == 3:
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(["\\", '"', "}", " ", "\u00e9", "NaN"])) + text[at:]
    return text


@given(sp_elements)
def test_valid_sps_read_the_same(element: SpElement) -> None:
    line = to_line(element)
    assert parse_sp(line) == parse_element(line) == element


@given(hostile_lines())
@example('{"type":"sp"}')
@example("[]")
@example("")
@example("NaN")
@example("[" * 10_000)
def test_hostile_lines_read_the_same(line: str) -> None:
    same(line)


@pytest.mark.parametrize(
    ("name", "make", "edit", "field"), REJECTIONS, ids=[r[0] for r in REJECTIONS]
)
def test_every_documented_rejection_is_the_validators(name, make, edit, field) -> None:
    raw = make()
    edit(raw)
    line = json.dumps(raw)
    with pytest.raises(WireFormatError) as fast:
        parse_sp(line)
    with pytest.raises(WireFormatError) as general:
        parse_element(line)
    assert (type(fast.value), str(fast.value)) == (type(general.value), str(general.value))
    assert field in str(fast.value)


def test_the_common_shape_skips_the_validator(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark's ``to_json`` of an ingest sp (no escapes, exact fields) takes the fast path;
    a forged field sends it to the validator, which refuses it."""
    line = json.dumps(sp_dict(), separators=(",", ":"))

    def refuse(text: str) -> None:
        raise AssertionError("the validator ran")

    monkeypatch.setattr(wire._ELEMENT, "validate_json", refuse)  # pydantic: not called
    assert isinstance(parse_sp(line), SpElement)
    monkeypatch.undo()
    forged = {**sp_dict(), "level": "top"}
    with pytest.raises(wire.ReservedFieldError, match="level"):
        parse_sp(json.dumps(forged))
