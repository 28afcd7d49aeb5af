"""The JSON-lines wire format: round trip, line numbering, and strict rejection."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamshield.lang.wire import WireFormatError, parse_element, parse_lines, to_dict, to_line
from streamshield.policy.elements import Channel, Element, SpElement, TupleElement
from streamshield.policy.punctuation import (
    DataDescription,
    SecurityPunctuation,
    SecurityRestriction,
    Sign,
)
from streamshield.policy.sp_patterns import ANY, Literal, Range
from tests.unit.test_cql import sps

# --- strategies -------------------------------------------------------------------------

channels = st.builds(Channel, st.text(min_size=1, max_size=10), st.text(min_size=1, max_size=10))
seqs = st.integers(min_value=0, max_value=2**70)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=10),
)
tuples = st.builds(
    TupleElement,
    channel=channels,
    seq=seqs,
    tid=st.one_of(st.integers(), st.text(max_size=10)),
    policy_ts=st.integers(min_value=1, max_value=2**62),
    policy_csn=st.integers(min_value=0, max_value=10_000),
    values=st.dictionaries(st.text(max_size=8), json_scalars, max_size=5),
)
sp_elements = st.builds(SpElement, channel=channels, seq=seqs, sp=sps())
elements: st.SearchStrategy[Element] = st.one_of(tuples, sp_elements)


# --- valid lines ------------------------------------------------------------------------

CHANNEL = Channel("HeartRate", "p1")
SP = SecurityPunctuation(
    DataDescription(Literal("HeartRate"), Range(120.0, 133.0), ANY),
    SecurityRestriction(Literal("GP"), grant_option=True),
    Sign.GRANT,
    immutable=False,
    ts=100,
    sn=1,
)
SP_ELEMENT = SpElement(CHANNEL, 0, SP)
TUPLE = TupleElement(CHANNEL, 1, 125, 100, 1, {"patient_id": 125, "beats_per_min": 88.5})


def tuple_dict() -> dict[str, Any]:
    return {
        "type": "tuple",
        "stream": "HeartRate",
        "provider": "p1",
        "seq": 1,
        "tid": 125,
        "policy": {"ts": 100, "csn": 1},
        "values": {"patient_id": 125, "beats_per_min": 88.5},
    }


def sp_dict() -> dict[str, Any]:
    return {
        "type": "sp",
        "stream": "HeartRate",
        "provider": "p1",
        "seq": 0,
        "ts": 100,
        "sn": 1,
        "ddp": {"streams": "HeartRate", "tuples": "[120, 133]", "attributes": "*"},
        "srp": {"roles": "GP", "grant_option": True},
        "sign": "+",
        "immutable": False,
    }


def test_parse_tuple() -> None:
    assert parse_element(json.dumps(tuple_dict())) == TUPLE


def test_parse_sp() -> None:
    assert parse_element(json.dumps(sp_dict())) == SP_ELEMENT


def test_to_dict_matches_documented_shape() -> None:
    assert to_dict(TUPLE) == tuple_dict()
    assert to_dict(SP_ELEMENT) == sp_dict()


def test_to_line_is_one_compact_line() -> None:
    line = to_line(SP_ELEMENT)
    assert "\n" not in line
    assert ", " not in line.replace('"[120, 133]"', "")
    assert json.loads(line) == sp_dict()


def test_string_tid_and_negative_sp() -> None:
    raw = tuple_dict() | {"tid": "p-125"}
    assert parse_element(json.dumps(raw)) == TupleElement(CHANNEL, 1, "p-125", 100, 1, TUPLE.values)
    raw = sp_dict()
    raw["sign"], raw["srp"]["grant_option"] = "-", False
    element = parse_element(json.dumps(raw))
    assert isinstance(element, SpElement)
    assert element.sp.sign is Sign.DENY


@given(elements)
def test_round_trip(element: Element) -> None:
    assert parse_element(to_line(element)) == element


@given(st.lists(elements, max_size=5))
def test_parse_lines_round_trip(element_list: list[Element]) -> None:
    text = "\n".join(to_line(e) for e in element_list) + "\n"
    assert list(parse_lines(text.splitlines())) == element_list


def test_parse_lines_skips_blank_lines() -> None:
    lines = ["", to_line(SP_ELEMENT), "   ", "\t", to_line(TUPLE) + "\n", "\n"]
    assert list(parse_lines(lines)) == [SP_ELEMENT, TUPLE]
    assert list(parse_lines([])) == []


def test_parse_lines_numbers_lines_from_one() -> None:
    """Blank lines count: the error names the line a person sees in the file."""
    lines = ["", to_line(SP_ELEMENT), "", "{oops"]
    with pytest.raises(WireFormatError) as info:
        list(parse_lines(lines))
    assert info.value.line == 4
    with pytest.raises(WireFormatError) as info:
        list(parse_lines(["{oops"]))
    assert info.value.line == 1


def test_error_on_line_3_of_5() -> None:
    good = to_line(TUPLE)
    lines = [to_line(SP_ELEMENT), good, json.dumps(tuple_dict() | {"seq": -1}), good, good]
    parsed = parse_lines(lines)  # lazy: nothing is parsed yet
    with pytest.raises(WireFormatError) as info:
        list(parsed)
    assert info.value.line == 3
    assert "seq" in info.value.problem
    assert str(info.value).startswith("line 3: ")


def test_parse_lines_is_lazy() -> None:
    """Elements before a bad line are produced; the bad line raises when reached."""
    lines = iter([to_line(SP_ELEMENT), "nonsense"])
    parsed = parse_lines(lines)
    assert next(parsed) == SP_ELEMENT
    with pytest.raises(WireFormatError) as info:
        next(parsed)
    assert info.value.line == 2


def test_parse_element_without_line_number() -> None:
    with pytest.raises(WireFormatError) as info:
        parse_element("{oops")
    assert info.value.line is None
    assert str(info.value).startswith("not valid JSON")


# --- rejections -------------------------------------------------------------------------

Edit = Callable[[dict[str, Any]], None]


def drop(*path: str) -> Edit:
    def edit(raw: dict[str, Any]) -> None:
        *parents, last = path
        for key in parents:
            raw = raw[key]
        del raw[last]

    return edit


def put(value: object, *path: str) -> Edit:
    def edit(raw: dict[str, Any]) -> None:
        *parents, last = path
        for key in parents:
            raw = raw[key]
        raw[last] = value

    return edit


REJECTIONS: list[tuple[str, Callable[[], dict[str, Any]], Edit, str]] = [
    # missing fields: nothing defaults (a missing tuple scope must not become *)
    ("no ddp.tuples", sp_dict, drop("ddp", "tuples"), "ddp.tuples"),
    ("no ddp.streams", sp_dict, drop("ddp", "streams"), "ddp.streams"),
    ("no srp.grant_option", sp_dict, drop("srp", "grant_option"), "srp.grant_option"),
    ("no immutable", sp_dict, drop("immutable"), "immutable"),
    ("no sign", sp_dict, drop("sign"), "sign"),
    ("no sn", sp_dict, drop("sn"), "sn"),
    ("no tid", tuple_dict, drop("tid"), "tid"),
    ("no policy.csn", tuple_dict, drop("policy", "csn"), "policy.csn"),
    ("no values", tuple_dict, drop("values"), "values"),
    ("no provider", tuple_dict, drop("provider"), "provider"),
    # unknown fields
    ("unknown top field", tuple_dict, put(1, "priority"), "priority"),
    ("unknown ddp field", sp_dict, put("*", "ddp", "roles"), "ddp.roles"),
    ("unknown srp field", sp_dict, put(1, "srp", "model"), "srp.model"),
    ("unknown policy field", tuple_dict, put(1, "policy", "sn"), "policy.sn"),
    # wrong types
    ("seq as string", tuple_dict, put("1", "seq"), "seq"),
    ("seq as bool", tuple_dict, put(True, "seq"), "seq"),
    ("seq as float", sp_dict, put(1.0, "seq"), "seq"),
    ("tid as float", tuple_dict, put(125.0, "tid"), "tid"),
    ("tid as list", tuple_dict, put([125], "tid"), "tid"),
    ("tid as bool", tuple_dict, put(True, "tid"), "tid"),
    ("tid as null", tuple_dict, put(None, "tid"), "tid"),
    ("ts as string", sp_dict, put("100", "ts"), "ts"),
    ("immutable as int", sp_dict, put(1, "immutable"), "immutable"),
    ("grant_option as string", sp_dict, put("true", "srp", "grant_option"), "grant_option"),
    ("pattern as list", sp_dict, put(["D", "ND"], "srp", "roles"), "srp.roles"),
    ("values as list", tuple_dict, put([1, 2], "values"), "values"),
    ("stream as int", tuple_dict, put(3, "stream"), "stream"),
    ("empty stream", tuple_dict, put("", "stream"), "stream"),
    # out of range
    ("negative seq", tuple_dict, put(-1, "seq"), "seq"),
    ("ts 0", sp_dict, put(0, "ts"), "ts"),
    ("negative ts", sp_dict, put(-5, "ts"), "ts"),
    ("sn 0", sp_dict, put(0, "sn"), "sn"),
    ("policy.ts 0", tuple_dict, put(0, "policy", "ts"), "policy.ts"),
    ("negative csn", tuple_dict, put(-1, "policy", "csn"), "policy.csn"),
    # type and sign
    ("unknown type", tuple_dict, put("heartbeat", "type"), "type"),
    ("no type", tuple_dict, drop("type"), "type"),
    ("sign word", sp_dict, put("POSITIVE", "sign"), "sign"),
    ("sign empty", sp_dict, put("", "sign"), "sign"),
    # bad pattern text
    ("empty range", sp_dict, put("[133, 120]", "ddp", "tuples"), "ddp.tuples"),
    ("unclosed set", sp_dict, put("{a, b", "ddp", "attributes"), "ddp.attributes"),
    ("two words", sp_dict, put("Nurse on duty", "srp", "roles"), "srp.roles"),
    ("empty pattern", sp_dict, put("", "ddp", "streams"), "ddp.streams"),
    # semantic
    ("negative with grant", sp_dict, put("-", "sign"), "grant option"),
]


@pytest.mark.parametrize(
    ("make", "edit", "field"),
    [pytest.param(make, edit, field, id=name) for name, make, edit, field in REJECTIONS],
)
def test_rejections(make: Callable[[], dict[str, Any]], edit: Edit, field: str) -> None:
    raw = make()
    edit(raw)
    with pytest.raises(WireFormatError) as info:
        parse_element(json.dumps(raw), 12)
    err = info.value
    assert err.line == 12
    assert field in err.problem
    assert str(err).startswith("line 12: ")


@pytest.mark.parametrize("line", ["{oops", "{}{}", "", "nul", '{"type": "tuple",}', "[1, 2"])
def test_invalid_json(line: str) -> None:
    with pytest.raises(WireFormatError) as info:
        parse_element(line, 5)
    assert info.value.line == 5
    assert "JSON" in info.value.problem


@pytest.mark.parametrize("line", ["[]", '"tuple"', "42", "null"])
def test_json_that_is_not_an_object(line: str) -> None:
    with pytest.raises(WireFormatError) as info:
        parse_element(line, 2)
    assert info.value.line == 2


@pytest.mark.parametrize("index", range(5))
def test_error_line_in_longer_input(index: int) -> None:
    """Whichever of five lines is bad, its own number is reported."""
    lines = [to_line(TUPLE)] * 5
    lines[index] = json.dumps(sp_dict() | {"sn": 0})
    with pytest.raises(WireFormatError) as info:
        list(parse_lines(lines))
    assert info.value.line == index + 1
    assert "sn" in info.value.problem


def test_statistics_privilege_round_trips_and_read_keeps_the_old_form() -> None:
    from streamshield.lang.wire import sp_from_line, sp_line
    from streamshield.policy.privileges import Privilege

    srp = SecurityRestriction(Literal("GP"), grant_option=True, privilege=Privilege.STATISTICS)
    sp = SecurityPunctuation(DataDescription(), srp, ts=3, sn=1)
    line = sp_line(sp)
    assert '"privilege":"statistics"' in line
    assert sp_from_line(line) == sp
    read = SecurityPunctuation(DataDescription(), SecurityRestriction(Literal("GP")), ts=3, sn=1)
    assert "privilege" not in sp_line(read)


@pytest.mark.parametrize("value", ["grant", "STATS", None, 1])
def test_unknown_privilege_is_rejected(value) -> None:
    import json

    from streamshield.lang.wire import WireFormatError, parse_element, sp_line
    from streamshield.policy.privileges import Privilege

    srp = SecurityRestriction(Literal("GP"), privilege=Privilege.STATISTICS)
    raw = json.loads(sp_line(SecurityPunctuation(DataDescription(), srp, ts=3, sn=1)))
    raw["srp"]["privilege"] = value
    with pytest.raises(WireFormatError, match="privilege"):
        parse_element(json.dumps(raw))
