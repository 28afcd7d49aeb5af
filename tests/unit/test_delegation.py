"""Registration-time delegation check: only grant-option holders may use ON RESULT."""

from __future__ import annotations

from streamshield.examples import hospital
from streamshield.lang.cql import parse_policy
from streamshield.policy.delegation import grant_option_holders, may_delegate

H = hospital.hierarchy()


def policy(text: str):
    return parse_policy(text, ts=1)


GRANTING = policy(
    "INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:GP WITH GRANT OPTION;"
    "INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:ND"
)


def test_grant_option_reaches_seniors_only() -> None:
    holders = grant_option_holders([GRANTING], "HeartRate", H)
    assert "GP" in holders
    assert "ND" not in holders  # readable, but without grant option
    assert holders == H.readers(["GP"])


def test_plain_readers_may_not_delegate() -> None:
    assert may_delegate({"HeartRate": [GRANTING]}, ["HeartRate"], ["GP"], H)
    assert not may_delegate({"HeartRate": [GRANTING]}, ["HeartRate"], ["ND"], H)


def test_every_input_stream_needs_a_grant_option() -> None:
    in_force = {"HeartRate": [GRANTING]}
    assert not may_delegate(in_force, ["HeartRate", "BodyTemperature"], ["GP"], H)


def test_nothing_in_force_denies() -> None:
    assert not may_delegate({}, ["HeartRate"], ["C"], H)
    assert not may_delegate({"HeartRate": [GRANTING]}, [], ["GP"], H)


def test_deny_with_grant_option_is_not_a_grant() -> None:
    other_stream = policy(
        "INSERT SP INTO STREAM HeartRate LET DDP = STREAMS: BodyTemperature AND TUPLES: *,"
        " SRP = rbac:GP WITH GRANT OPTION"
    )
    assert not may_delegate({"HeartRate": [other_stream]}, ["HeartRate"], ["GP"], H)
