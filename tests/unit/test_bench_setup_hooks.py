"""The timing hooks of bench.borealis_setup (Figs. 11-12): they time the security steps
while on, leave every function as it was when off, and count nested calls once."""

from __future__ import annotations

import pytest
from bench.borealis_setup import BOXES, Timings, query_text, timing_hooks

from streamshield.engine.queries import cql_service, streaming_queries
from streamshield.engine.views.secured_view import SecuredProjection
from streamshield.examples import hospital
from streamshield.lang import admission
from streamshield.lang.admission import admit
from streamshield.server import security_port


def test_hooks_time_while_on_and_restore_every_function_after() -> None:
    originals = (
        security_port.seen_streams,
        security_port.add_query,
        admission.check_query,
        cql_service.secure,
        streaming_queries.secure,
        SecuredProjection.__dict__["of"],
    )
    timings = Timings()
    with timing_hooks(timings):
        assert admission.check_query is not originals[2]
        admit("SELECT * FROM HeartRate", ["C"], hospital.hierarchy(), ["HeartRate"])
    assert set(timings.take()) == {"sql check (counted in the rest)"}
    assert (
        security_port.seen_streams,
        security_port.add_query,
        admission.check_query,
        cql_service.secure,
        streaming_queries.secure,
        SecuredProjection.__dict__["of"],
    ) == originals
    with pytest.raises(ZeroDivisionError), timing_hooks(timings):  # restored on errors too
        _ = 1 / 0
    assert admission.check_query is originals[2]


def test_nested_hooks_count_only_the_outermost_call() -> None:
    timings = Timings()
    inner = timings.wrap("inner", lambda: None)
    outer = timings.wrap("outer", lambda: inner())
    outer()
    assert set(timings.take()) == {"outer"}
    inner()
    assert set(timings.take()) == {"inner"}


def test_queries_grow_as_the_papers_boxes() -> None:
    texts = [query_text(b) for b in BOXES]
    assert [t.count(" AS p") + t.count("price >") for t in texts] == list(BOXES)
