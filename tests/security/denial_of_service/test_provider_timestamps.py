"""Threat: any timestamp a provider chooses, pushed far into the future.

The sp ``ts`` check (``test_clock_skew.py``) covers one member of the class. The others
a provider supplies: a tuple's ``policy.ts`` (the policy it claims) and the stream's
event-time value, which moves the watermark of every windowed query over the stream: one
tuple stamped in 2500 makes every other provider's tuples "late", so windowed
aggregates drop them for good. Every such timestamp is held to the same configurable
skew at the landing zone; values within the skew and old values land.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from streamshield.catalog import SqliteCatalog, StreamDefinition
from streamshield.landing import LandingZone
from streamshield.policy.elements import Channel, TupleElement

NOW = 1_800_000_000.0  # the server's clock in these tests (seconds)
SKEW = 300.0
READINGS = StreamDefinition(
    "Readings", (("id", "bigint"), ("at", "timestamp"), ("n", "int")), tid="id", event_time="at"
)
COUNTS = StreamDefinition(
    "Counts", (("id", "bigint"), ("sec", "bigint")), tid="id", event_time="sec"
)


@pytest.fixture
def zone(tmp_path: Path) -> LandingZone:
    catalog = SqliteCatalog(tmp_path / "catalog.db")
    catalog.register_stream(READINGS)
    catalog.register_stream(COUNTS)
    catalog.set_roles(["E"], [])
    return LandingZone(tmp_path / "land", catalog, clock=lambda: NOW, max_future_skew=SKEW)


def reading(seq: int, at: object, policy_ts: int = 100, stream: str = "Readings") -> TupleElement:
    values = {"id": 7, "at": at} if stream == "Readings" else {"id": 7, "sec": at}
    return TupleElement(Channel(stream, "p1"), seq, 7, policy_ts, 1, values)


FAR = NOW + 400 * 365 * 86400  # four centuries ahead


@pytest.mark.parametrize(
    ("element", "field"),
    [
        (reading(1, 1_000, policy_ts=int(FAR * 1_000_000)), "policy.ts"),
        (reading(1, 1_000, policy_ts=2**63 - 1), "policy.ts"),
        (reading(1, int(FAR)), "values.at"),
        (reading(1, int(NOW + SKEW + 60)), "values.at"),
        (reading(1, "2426-01-01T00:00:00Z"), "values.at"),
        (reading(1, "2426-01-01 00:00:00"), "values.at"),  # naive: the session's UTC
        (reading(1, "2426-01-01"), "values.at"),
        (reading(1, "2426-01-01T00:00:00+14:00"), "values.at"),
        (reading(1, int(FAR), stream="Counts"), "values.sec"),  # bigint seconds
    ],
    ids=[
        "policy-ts-far",
        "policy-ts-max",
        "event-epoch-far",
        "event-just-beyond-skew",
        "event-iso-utc",
        "event-iso-naive",
        "event-date",
        "event-iso-offset",
        "event-bigint-seconds",
    ],
)
def test_future_timestamps_in_tuples_are_rejected(zone: LandingZone, element, field) -> None:
    result = zone.append([element])
    assert result.accepted == 0
    [rejection] = result.rejected
    assert rejection.reason == "future_timestamp"
    assert rejection.message.startswith(field) and "300 s ahead" in rejection.message
    assert "2426" not in rejection.message and str(int(FAR)) not in rejection.message
    assert zone.catalog.rejections()[(element.channel.stream, "future_timestamp")] == 1
    # nothing was taken from the channel: the honest tuple with the same seq lands
    assert zone.append([reading(1, int(NOW), stream=element.channel.stream)]).accepted == 1


def test_current_old_and_slightly_ahead_timestamps_land(zone: LandingZone) -> None:
    elements = [
        reading(1, 1_000),  # the small timestamps of examples and tests
        reading(2, int(NOW)),
        reading(3, int(NOW + SKEW - 1)),  # a provider clock a bit ahead
        reading(4, "2027-01-01T00:00:00Z"),
        reading(6, 1_000, policy_ts=int((NOW + SKEW - 1) * 1_000_000)),
        reading(1, int(NOW + SKEW - 1), stream="Counts"),
    ]
    result = zone.append(elements)
    assert result.rejected == [] and result.accepted == len(elements)
    # no event time at all is not a time to judge: refused as a missing attribute
    missing = zone.append([reading(5, None)])
    assert [r.reason for r in missing.rejected] == ["missing_attribute"]


def test_the_skew_applies_to_tuples_too(tmp_path: Path, zone: LandingZone) -> None:
    zone.max_future_skew = 5.0
    result = zone.append([reading(1, int(NOW + 4)), reading(2, int(NOW + 6))])
    assert result.accepted == 1
    assert [r.reason for r in result.rejected] == ["future_timestamp"]
    assert "5 s ahead" in result.rejected[0].message
