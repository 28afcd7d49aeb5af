"""A recipient is exempt from the row checks only while every start of the query she
acts as compiled one READ mask; otherwise nobody is, and that is no lookup failure."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from streamshield.engine.delivery.delivery import Delivery
from streamshield.policy.provenance import ProvenanceCodec
from streamshield.server.queries import LiveQuery


def _query_and_delivery() -> tuple[LiveQuery, Delivery]:
    delivery = Delivery(lambda _user: (set(), set()), ProvenanceCodec(["S"]), roles=lambda _sub: ())
    query = LiveQuery(
        "q",
        "ann",
        "SELECT a FROM S",
        ("A",),
        ("S",),
        "api_q",
        delivery,
        SimpleNamespace(),  # type: ignore[arg-type]  # no batch is stored here
    )
    delivery.query_mask = query.own_mask
    return query, delivery


def test_one_compiled_mask_exempts_who_acts_with_it() -> None:
    query, delivery = _query_and_delivery()
    query.compiled(frozenset({"A"}), (1,))
    query.compiled(frozenset({"A"}), (1,))
    assert delivery._own_mask() == (1,)


@pytest.mark.parametrize("masks", [[], [(1,), (2,)]], ids=["never started", "starts differ"])
def test_without_one_compiled_mask_nobody_is_exempt_and_nothing_failed(
    masks: list[tuple[int, ...]], caplog: pytest.LogCaptureFixture
) -> None:
    query, delivery = _query_and_delivery()
    for i, mask in enumerate(masks):
        query.compiled(frozenset({f"R{i}"}), mask)
    with caplog.at_level(logging.ERROR, logger="streamshield.audit"):
        assert delivery._own_mask() is None
    assert not caplog.records
