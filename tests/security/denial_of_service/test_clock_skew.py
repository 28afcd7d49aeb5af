"""Threat: a far-future sp timestamp that locks its channel.

A channel's policy timestamp only grows, so an sp stamped in the year 2500 would make
every honest sp after it "older" than the policy in force: the channel's owner could
never change its policy again. The class: any sp ``ts`` ahead of the server's clock by
more than the allowed skew. It is rejected at the landing zone (where every path in,
HTTP, CLI and ``INSERT SP``, lands) with its own reason; past timestamps stay valid.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from streamshield import landing
from streamshield.catalog import SqliteCatalog, StreamDefinition
from streamshield.landing import LandingZone
from streamshield.lang.cql import parse_pattern
from streamshield.policy.elements import Channel, SpElement, TupleElement
from streamshield.policy.punctuation import (
    DataDescription,
    SecurityPunctuation,
    SecurityRestriction,
)

NOW = 1_800_000_000.0  # seconds since the epoch, the server's clock in these tests
SKEW = 300.0  # the documented default
VITALS = StreamDefinition("Vitals", (("id", "bigint"), ("n", "int")), tid="id")


@pytest.fixture
def catalog(tmp_path: Path) -> SqliteCatalog:
    catalog = SqliteCatalog(tmp_path / "catalog.db")
    catalog.register_stream(VITALS)
    catalog.set_roles(["E", "D"], [("D", "E")])
    return catalog


def sp(seq: int, ts: int, provider: str = "p1") -> SpElement:
    punctuation = SecurityPunctuation(
        DataDescription(), SecurityRestriction(parse_pattern("D")), ts=ts, sn=1
    )
    return SpElement(Channel("Vitals", provider), seq, punctuation)


def micros(seconds: float) -> int:
    return int(seconds * 1_000_000)


def test_the_default_skew_is_five_minutes() -> None:
    assert landing.DEFAULT_MAX_FUTURE_SKEW == SKEW


def test_far_future_sps_are_rejected_with_their_reason(
    tmp_path: Path, catalog: SqliteCatalog
) -> None:
    zone = LandingZone(tmp_path / "land", catalog)  # the server's real clock
    now = time.time()
    result = zone.append(
        [
            sp(1, micros(now + 400 * 365 * 86400)),  # four centuries ahead
            sp(2, micros(now + SKEW + 60)),
            sp(3, 2**63 - 1),  # the largest bigint
        ]
    )
    assert result.accepted == 0
    assert [r.reason for r in result.rejected] == ["future_timestamp"] * 3
    assert all("300 s ahead of the server's clock" in r.message for r in result.rejected)
    assert catalog.rejections()[("Vitals", "future_timestamp")] == 3
    # nothing was taken from the channel: an honest sp after them still lands
    assert zone.append([sp(1, micros(time.time()))]).accepted == 1


def test_old_and_current_timestamps_stay_valid(tmp_path: Path, catalog: SqliteCatalog) -> None:
    zone = LandingZone(tmp_path / "land", catalog, clock=lambda: NOW)
    tuple_ = TupleElement(Channel("Vitals", "p1"), 4, 1, 100, 1, {"id": 1})
    elements = [
        sp(1, 100),  # the small timestamps of examples and tests
        sp(2, micros(NOW)),
        sp(3, micros(NOW + SKEW - 1)),  # a provider clock a bit ahead
        tuple_,
    ]
    result = zone.append(elements)
    assert result.rejected == [] and result.accepted == 4


def test_the_skew_is_configurable(tmp_path: Path, catalog: SqliteCatalog) -> None:
    zone = LandingZone(tmp_path / "land", catalog, clock=lambda: NOW, max_future_skew=5.0)
    result = zone.append([sp(1, micros(NOW + 4)), sp(2, micros(NOW + 6))])
    assert result.accepted == 1
    assert [r.reason for r in result.rejected] == ["future_timestamp"]
    assert "5 s ahead" in result.rejected[0].message
