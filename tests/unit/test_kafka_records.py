"""Kafka records as landing lines (connectors/record_lines.py) and what a binding may
declare (connectors/kafka_binding.py), without a broker."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from streamshield.connectors.kafka_binding import KafkaBinding
from streamshield.connectors.record_lines import Refused, record_line

STREAM, PROVIDER = "quotes", "ed.k0"


def _line(value: object, **options) -> dict | Refused:
    raw = value if isinstance(value, bytes) or value is None else json.dumps(value).encode()
    line = record_line(raw, STREAM, PROVIDER, **options)
    return line if isinstance(line, Refused) else json.loads(line)


def test_an_element_lands_on_its_partitions_channel() -> None:
    tuple_record = {"type": "tuple", "values": {"id": 1}}
    assert _line(tuple_record) == {**tuple_record, "stream": STREAM, "provider": PROVIDER}
    named = {**tuple_record, "stream": STREAM, "provider": PROVIDER}
    assert _line(named) == named


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "malformed_record"),
        (b"not json", "malformed_record"),
        (b"\xff\xfe", "malformed_record"),
        ([1, 2], "malformed_record"),
        ("a string", "malformed_record"),
        (b"[" * 100_000, "malformed_record"),
        ({"type": "tuple", "seq": 7, "values": {}}, "seq_given"),
        ({"type": "tuple", "provider": "ed", "values": {}}, "wrong_channel"),
        ({"type": "tuple", "provider": "ed.k1", "values": {}}, "wrong_channel"),
        ({"type": "tuple", "stream": "other", "values": {}}, "wrong_channel"),
    ],
)
def test_a_bad_record_is_refused_with_its_reason(value: object, reason: str) -> None:
    refused = _line(value)
    assert isinstance(refused, Refused) and refused.reason == reason


def test_a_record_over_the_bound_is_not_parsed() -> None:
    refused = _line(b'{"values": {"id": 1}}', max_bytes=10)
    assert isinstance(refused, Refused) and refused.reason == "record_too_large"


def test_values_become_a_tuple_with_renamed_fields() -> None:
    line = _line({"ID": 3, "px": 1.5}, form="values", fields={"px": "price", "ID": "id"})
    assert line == {
        "type": "tuple",
        "values": {"id": 3, "price": 1.5},
        "stream": STREAM,
        "provider": PROVIDER,
    }
    # a values record cannot choose its channel: stream and provider are set, not read
    line = _line({"id": 3, "provider": "mallory"}, form="values")
    assert isinstance(line, dict) and line["provider"] == PROVIDER
    assert line["values"] == {"id": 3, "provider": "mallory"}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)


@given(st.binary(max_size=64) | json_values.map(lambda v: json.dumps(v).encode()))
def test_any_record_lands_on_its_own_channel_or_is_refused(raw: bytes) -> None:
    """Whatever a producer writes: either a line of exactly the partition's channel, without
    a seq of its own, or a refusal with a reason; never an exception."""
    line = record_line(raw, STREAM, PROVIDER)
    if isinstance(line, Refused):
        assert line.reason in {"malformed_record", "record_too_large", "seq_given", "wrong_channel"}
        assert raw.decode("utf-8", "replace") not in line.message or len(raw) < 3
    else:
        element = json.loads(line)
        assert (element["stream"], element["provider"]) == (STREAM, PROVIDER)
        assert "seq" not in element


BINDING = {
    "name": "quotes_feed",
    "stream": STREAM,
    "bootstrap_servers": "127.0.0.1:9092",
    "topic": "quotes",
    "partitions": {"0": {"user": "ed", "provider": "ed.k0"}, "1": {"user": "fay"}},
}


def test_a_binding_names_each_partitions_channel() -> None:
    binding = KafkaBinding.model_validate(BINDING)
    assert {n: s.channel_provider for n, s in binding.partitions.items()} == {0: "ed.k0", 1: "fay"}
    assert binding.group == "streamshield-quotes_feed"
    config = binding.client_config()
    assert config["enable.auto.commit"] is False and config["group.id"] == binding.group


@pytest.mark.parametrize(
    "change",
    [
        {"partitions": {}},
        {"partitions": {"0": {"user": "ed", "provider": "fay"}}},  # another user's channel
        {"partitions": {"0": {"user": "ed", "provider": "edward"}}},  # not ed.<name>
        {"partitions": {"0": {"user": "ed"}, "1": {"user": "ed"}}},  # one channel, two
        {"partitions": {"-1": {"user": "ed"}}},
        {"partitions": {"0": {"user": "ed", "provider": "ed/../x"}}},
        {"name": "../etc"},
        {"stream": "a b"},
        {"topic": "bad topic"},
        {"topic": ".."},
        {"bootstrap_servers": "no-port"},
        {"bootstrap_servers": "host:99999"},
        {"fields": {"px": "price; DROP"}},
        {"security": {"protocol": "SASL_SSL", "sasl_mechanism": "PLAIN"}},
        {"max_records": 0},
        {"unknown": 1},
    ],
)
def test_a_binding_that_could_mislabel_or_misname_is_refused(change: dict) -> None:
    with pytest.raises(ValidationError):
        KafkaBinding.model_validate({**BINDING, **change})


def test_the_password_is_kept_but_never_shown() -> None:
    security = {
        "protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "username": "svc",
        "password": "s3cret-pw",
    }
    binding = KafkaBinding.model_validate({**BINDING, "security": security})
    assert "s3cret-pw" not in json.dumps(binding.public())
    assert "s3cret-pw" not in repr(binding)
    kept = KafkaBinding.model_validate_json(binding.stored())
    assert kept.client_config()["sasl.password"] == "s3cret-pw"
    assert kept.partitions == binding.partitions
