"""The append path's reading and writing of tuples equals the validator's and to_dict's.

With ``assign=seq`` the server builds the common tuple from the decoded line itself
(``tuple_of_dict``) instead of dumping it and running the general validator; on every
line, valid or hostile, that must give the element ``parse_element`` gives for the
dumped line, or None so that the validator judges it. A tuple's line is written from a
template (``to_line``), which must be the text of its sorted, compact ``to_dict``.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from streamshield.lang import wire
from streamshield.lang.wire import WireFormatError, parse_element, to_dict, to_line, tuple_of_dict
from streamshield.policy.elements import Channel, TupleElement
from tests.unit.test_wire import tuple_dict
from tests.unit.test_wire_fast_sp import HOSTILE, outcome
from tests.unit.test_wire_fast_sp import hostile_lines as _hostile_sp_lines

PATHS = [
    ("type",),
    ("stream",),
    ("provider",),
    ("seq",),
    ("tid",),
    ("policy",),
    ("values",),
    ("level",),
    ("_ss_r0",),
    ("ts",),
    ("policy", "ts"),
    ("policy", "csn"),
    ("policy", "x"),
    ("values", "patient_id"),
    ("values", "beats_per_min"),
    ("values", "level"),
    ("values", "\u00e9"),
]
TEXTS = st.sampled_from(["p1", "HeartRate", "\u00e9t\u00e9", 'a"b', "a\\b", "\ud800", "", "x\n"])


@st.composite
def hostile_tuples(draw: st.DrawFn) -> str:
    """A tuple's line with a few fields removed, retyped (texts with escapes, quotes,
    lone surrogates and non-ASCII; NaN, huge ints, nested values) or added."""
    raw = tuple_dict()
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
            parent[path[-1]] = draw(st.one_of(HOSTILE, TEXTS))
    text = json.dumps(raw, ensure_ascii=draw(st.booleans()))
    try:  # a body is strict UTF-8 (server/app.py): a lone surrogate arrives only escaped
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(raw)
    return text


def same(text: str) -> None:
    """What the assigner does with a decoded line: the fast element, or the validator's
    verdict on the dumped line (what the gate parses without the fast path), must agree."""
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):
        return  # not an object: neither reader sees it
    if not isinstance(raw, dict):
        return
    dumped = json.dumps(raw, separators=(",", ":"))
    fast = tuple_of_dict(raw, "\\" in text)
    if fast is not None:
        assert fast == parse_element(dumped)
        assert to_line(fast) == to_line(parse_element(dumped))
    else:  # the validator's: it may accept (a shape the fast path leaves to it) or refuse
        outcome(parse_element, dumped)


@given(hostile_tuples())
@example(json.dumps({**tuple_dict(), "values": {"x": math.nan}}))
@example(json.dumps({**tuple_dict(), "values": {"x": [1]}}))
@example(json.dumps({**tuple_dict(), "provider": "\ud800"}))
@example(json.dumps({**tuple_dict(), "tid": True}))
@example(json.dumps({**tuple_dict(), "seq": 1.0}))
def test_hostile_tuples_read_as_the_validator_reads_them(text: str) -> None:
    same(text)


@given(_hostile_sp_lines())
def test_hostile_lines_of_both_kinds_read_the_same(text: str) -> None:
    same(text)


def test_what_the_fast_path_refuses_the_validator_judges() -> None:
    """None, never a guess: each of these goes to parse_element, which says why (a
    nested value or an infinity it accepts, and the landing zone judges the value)."""
    for edit in (
        {"seq": True},
        {"policy": {"ts": 0, "csn": 1}},
        {"policy": {"ts": 1, "csn": 1, "x": 1}},
        {"level": 3},
        {"stream": ""},
    ):
        raw = {**tuple_dict(), **edit}
        assert tuple_of_dict(raw) is None
        with pytest.raises(WireFormatError):
            parse_element(json.dumps(raw))
    for value in ({"nested": 1}, [1], math.inf, math.nan):
        assert tuple_of_dict({**tuple_dict(), "values": {"x": value}}) is None


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=8),
)


@given(
    st.text(min_size=1, max_size=6),
    st.text(min_size=1, max_size=6),
    st.integers(min_value=0, max_value=2**64),
    st.one_of(st.integers(), st.text(max_size=6)),
    st.integers(min_value=1, max_value=2**63),
    st.integers(min_value=0, max_value=2**63),
    st.dictionaries(st.text(max_size=6), SCALARS, max_size=5),
)
def test_a_tuples_line_is_its_sorted_compact_dict(
    stream: str, provider: str, seq: int, tid: object, ts: int, csn: int, values: dict
) -> None:
    element = TupleElement(Channel(stream, provider), seq, tid, ts, csn, values)
    general = json.dumps(to_dict(element), separators=(",", ":"), sort_keys=True)
    assert to_line(element) == general


def test_the_common_tuple_skips_the_validator(monkeypatch: pytest.MonkeyPatch) -> None:
    """An assigned plain tuple is built once, from its decoded line: no pydantic run and
    no second decoding (the gate and the landing zone take the element as it is)."""
    from streamshield.server.provider_assign import SeqAssigner

    class Landing:
        def last_seq(self, channel: Channel) -> int:
            return 0

        def stream_dir(self, stream: str) -> Any:
            from pathlib import Path

            return Path("/nonexistent")

    def refuse(text: str) -> None:
        raise AssertionError("the validator ran")

    monkeypatch.setattr(wire._ELEMENT, "validate_json", refuse)
    lines = [json.dumps({"values": {"id": n, "x": 1.5, "name": "\u00e9"}}) for n in range(50)]
    assigned = SeqAssigner(Landing()).assign("S", "ann", "id", lines)  # type: ignore[arg-type]
    elements = [line.element for line in assigned.lines]  # type: ignore[union-attr]
    assert [e.seq for e in elements] == list(range(1, 51))
    assert all(e.policy_ts == 1 and e.policy_csn == 0 for e in elements)  # no policy: none
    assert elements[7].values == {"id": 7, "x": 1.5, "name": "\u00e9"} and elements[7].tid == 7
