"""MQTT messages as landing lines (connectors/mqtt_messages.py) and what a binding may
declare (connectors/mqtt_binding.py), without a broker."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from streamshield.connectors.mqtt_binding import MqttBinding, check_filter
from streamshield.connectors.mqtt_messages import matches, message_key, message_line
from streamshield.connectors.record_lines import Refused

BINDING = {
    "name": "plant_feed",
    "stream": "readings",
    "host": "127.0.0.1",
    "topic_filter": "plant/+/reading",
    "provider_level": 1,
    "providers": {"m1": {"user": "ed", "provider": "ed.m1"}, "m2": {"user": "fay"}},
}
CHANNELS = {"m1": "ed.m1", "m2": "fay"}


def _binding(**change) -> MqttBinding:
    return MqttBinding.model_validate({**BINDING, **change})


def _line(topic: str, value: object, **change) -> tuple[str, dict] | Refused:
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    got = message_line(topic, raw, _binding(**change))
    return got if isinstance(got, Refused) else (got[0], json.loads(got[1]))


def test_a_message_lands_on_its_devices_channel() -> None:
    element = {"type": "tuple", "values": {"id": 1}}
    assert _line("plant/m1/reading", element) == (
        "m1",
        {**element, "stream": "readings", "provider": "ed.m1"},
    )
    assert _line("plant/m2/reading", element)[1]["provider"] == "fay"


@pytest.mark.parametrize(
    ("topic", "value", "reason"),
    [
        ("plant/m3/reading", {"type": "tuple", "values": {}}, "unbound_device"),
        ("plant/m1/other", {"type": "tuple", "values": {}}, "unbound_topic"),
        ("plant/m1", {"type": "tuple", "values": {}}, "unbound_topic"),
        ("plant/m1/reading", b"not json", "malformed_record"),
        ("plant/m1/reading", b"", "malformed_record"),
        ("plant/m1/reading", [1], "malformed_record"),
        ("plant/m1/reading", {"type": "tuple", "seq": 3, "values": {}}, "seq_given"),
        ("plant/m1/reading", {"type": "tuple", "provider": "fay", "values": {}}, "wrong_channel"),
        ("plant/m1/reading", {"type": "tuple", "stream": "x", "values": {}}, "wrong_channel"),
    ],
)
def test_a_bad_message_is_refused_with_its_reason(topic: str, value: object, reason: str) -> None:
    refused = _line(topic, value)
    assert isinstance(refused, Refused) and refused.reason == reason


def test_values_payloads_become_tuples_of_the_device() -> None:
    device, line = _line("plant/m1/reading", {"T": 21.5}, format="values", fields={"T": "temp"})
    assert device == "m1" and line == {
        "type": "tuple",
        "values": {"temp": 21.5},
        "stream": "readings",
        "provider": "ed.m1",
    }


def test_the_device_level_may_lie_below_a_hash() -> None:
    binding = {"topic_filter": "site/#", "provider_level": 2}
    assert _line("site/a/m1", {"values": {}}, **binding)[0] == "m1"
    assert _line("site/a/m1/x", {"values": {}}, **binding)[0] == "m1"
    short = _line("site/a", {"values": {}}, **binding)
    assert isinstance(short, Refused) and short.reason == "unbound_device"


@pytest.mark.parametrize(
    ("topic_filter", "topic", "expected"),
    [
        ("a/+/c", "a/b/c", True),
        ("a/+/c", "a//c", True),
        ("a/+/c", "a/b/c/d", False),
        ("a/#", "a", True),
        ("a/#", "a/b/c", True),
        ("#", "$SYS/x", False),
        ("+/x", "$SYS/x", False),
        ("a/b", "a/b", True),
        ("a/b", "a/c", False),
    ],
)
def test_topics_match_filters_by_the_mqtt_rules(topic_filter, topic, expected) -> None:
    assert matches(topic_filter, topic) is expected


@pytest.mark.parametrize(
    "bad", ["", "a/#/b", "a#", "a/b+", "+a", "$SYS/#", "a\0b", "a/##", "x" * 65_536]
)
def test_a_filter_mqtt_forbids_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        check_filter(bad)


@pytest.mark.parametrize(
    "change",
    [
        {"providers": {}},
        {"providers": {"m1": {"user": "ed", "provider": "fay"}}},  # another user's channel
        {"providers": {"m1": {"user": "ed"}, "m2": {"user": "ed"}}},  # one channel, two
        {"providers": {"a/b": {"user": "ed"}}},
        {"providers": {"+": {"user": "ed"}}},
        {"providers": {"#": {"user": "ed"}}},
        {"providers": {"": {"user": "ed"}}},
        {"topic_filter": "plant/+/#/x"},
        {"topic_filter": "plant/m+/reading"},
        {"provider_level": 3},  # no such level
        {"provider_level": -1},
        {"topic_filter": "plant/m1/reading", "providers": {"m2": {"user": "ed"}}},
        {"name": "../etc"},
        {"stream": "a b"},
        {"host": "evil host"},
        {"port": 0},
        {"client_id": "a b"},
        {"password": "pw"},  # without a username
        {"fields": {"T": "temp; DROP"}},
        {"unknown": 1},
    ],
)
def test_a_binding_that_could_mislabel_or_misname_is_refused(change: dict) -> None:
    with pytest.raises(ValidationError):
        _binding(**change)


def test_a_binding_maps_devices_to_channels_and_names_its_session() -> None:
    binding = _binding()
    assert binding.client == "streamshield-plant_feed"
    assert binding.channels() == {"ed.m1", "fay"}
    assert _binding(topic_filter="plant/m1/reading", providers={"m1": {"user": "ed"}})


def test_the_password_is_kept_but_never_shown() -> None:
    binding = _binding(username="svc", password="s3cret-pw")
    assert "s3cret-pw" not in json.dumps(binding.public())
    assert "s3cret-pw" not in repr(binding)
    kept = MqttBinding.model_validate_json(binding.stored())
    assert kept.password is not None and kept.password.get_secret_value() == "s3cret-pw"
    assert kept.providers == binding.providers


def test_a_redelivery_has_the_key_of_its_first_delivery() -> None:
    key = message_key(7, "plant/m1/reading", b"{}")
    assert key == message_key(7, "plant/m1/reading", b"{}")
    assert key != message_key(8, "plant/m1/reading", b"{}")  # another message, same content
    assert key != message_key(7, "plant/m2/reading", b"{}")
    assert key != message_key(7, "plant/m1/reading", b"{ }")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)
levels = st.sampled_from(["m1", "m2", "m3", "", "+", "reading", "x/y"])


@given(
    st.tuples(st.just("plant"), levels, st.sampled_from(["reading", "other"])).map("/".join),
    st.binary(max_size=64) | json_values.map(lambda v: json.dumps(v).encode()),
    st.sampled_from(["element", "values"]),
)
def test_any_payload_lands_on_its_devices_own_channel_or_is_refused(topic, raw, form) -> None:
    """Whatever a device publishes under whatever topic: a line of exactly the channel its
    topic's device is bound to, without a seq of its own, or a refusal with a reason."""
    got = message_line(topic, raw, _binding(format=form))
    if isinstance(got, Refused):
        assert got.reason in {
            "unbound_device",
            "unbound_topic",
            "malformed_record",
            "record_too_large",
            "seq_given",
            "wrong_channel",
        }
        return
    device, line = got
    element = json.loads(line)
    assert topic == f"plant/{device}/reading" and device in CHANNELS
    assert (element["stream"], element["provider"]) == ("readings", CHANNELS[device])
    assert "seq" not in element
