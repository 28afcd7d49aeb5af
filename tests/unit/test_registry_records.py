"""Avro and JSON Schema record values read through a schema registry
(connectors/registry_decoder.py), and what such a binding may declare, without a broker
or a JVM: a real registry speaking HTTP (tests/schema_registry.py) and confluent-kafka's
own serializers on the producing side."""

from __future__ import annotations

import datetime
import json
import struct

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from streamshield.connectors.kafka_binding import KafkaBinding, SchemaRegistry
from streamshield.connectors.record_lines import Refused, record_line
from streamshield.connectors.registry_decoder import RegistryDecoder, RegistryDown
from tests.schema_registry import SchemaRegistryServer

STREAM, PROVIDER, TOPIC = "quotes", "ed.k0", "quotes"
CONTEXT = SerializationContext(TOPIC, MessageField.VALUE)
QUOTE = {
    "type": "record",
    "name": "Quote",
    "fields": [
        {"name": "ID", "type": "long"},
        {"name": "sym", "type": "string"},
        {"name": "px", "type": "double"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
BLOB = {"type": "record", "name": "Blob", "fields": [{"name": "data", "type": "bytes"}]}
ELEMENT = {  # JSON Schema of an element: tuples and sps both pass, anything else not
    "type": "object",
    "properties": {"type": {"enum": ["tuple", "sp"]}},
    "required": ["type"],
}
PRICE = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "price": {"type": "number"}},
    "required": ["id", "price"],
    "additionalProperties": False,
}
AT = datetime.datetime(2026, 12, 1, 19, 35, tzinfo=datetime.UTC)


@pytest.fixture(scope="module")
def registry():
    started = SchemaRegistryServer()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def fuzzed(registry):
    """An Avro binding's decoder; ids 1 and 2 (those the fuzz writes most) name an Avro
    schema and a JSON Schema."""
    registry.register("fuzz-a", json.dumps(QUOTE), "AVRO")
    registry.register("fuzz-j", json.dumps(PRICE), "JSON")
    return RegistryDecoder(_settings(registry), "avro")


@pytest.fixture()
def producer(registry):
    """The producer's client: registers schemas as Confluent's serializers do."""
    client = SchemaRegistryClient({"url": registry.url})
    yield client
    client.close()


def _settings(registry, **change) -> SchemaRegistry:
    return SchemaRegistry.model_validate({"url": registry.url, **change})


def _avro(producer, schema: dict, value: dict) -> bytes:
    return AvroSerializer(producer, json.dumps(schema))(value, CONTEXT)


def _json(producer, schema: dict, value: object) -> bytes:
    return JSONSerializer(json.dumps(schema), producer)(value, CONTEXT)


def _line(decoder: RegistryDecoder, raw: bytes, **options) -> dict | Refused:
    line = record_line(raw, STREAM, PROVIDER, decode=decoder, **options)
    return line if isinstance(line, Refused) else json.loads(line)


def test_avro_values_land_as_a_tuple_renamed_with_iso_timestamps(registry, producer) -> None:
    decoder = RegistryDecoder(_settings(registry), "avro")
    raw = _avro(producer, QUOTE, {"ID": 7, "sym": "ACME", "px": 1.5, "at": AT})
    assert raw[0] == 0 and len(raw) > 5
    line = _line(decoder, raw, form="values", fields={"ID": "id", "px": "price"})
    assert line == {
        "type": "tuple",
        "values": {"id": 7, "sym": "ACME", "price": 1.5, "at": "2026-12-01T19:35:00+00:00"},
        "stream": STREAM,
        "provider": PROVIDER,
    }


def test_a_json_schema_of_the_element_shape_carries_sps_in_band(registry, producer) -> None:
    decoder = RegistryDecoder(_settings(registry), "json_schema")
    sp = {
        "type": "sp",
        "ddp": {"streams": STREAM, "tuples": "*", "attributes": "*"},
        "srp": {"roles": "{TRADER}", "grant_option": False},
        "sign": "+",
        "immutable": False,
    }
    tup = {"type": "tuple", "tid": 1, "values": {"id": 1, "price": 2.5}}
    for element in (sp, tup):
        line = _line(decoder, _json(producer, ELEMENT, element))
        assert line == {**element, "stream": STREAM, "provider": PROVIDER}
    # the element rules still hold: a record never picks its channel or its seq
    moved = _line(decoder, _json(producer, ELEMENT, {**tup, "provider": "fay"}))
    assert isinstance(moved, Refused) and moved.reason == "wrong_channel"


def _priced(body: bytes):
    """A record of the JSON Schema ``PRICE``'s id with ``body``, made with the producer."""
    return lambda producer: _header(_id(producer, PRICE, "JSON")) + body


def _quote() -> dict:
    return {"ID": 1, "sym": "ACME", "px": 1.0, "at": AT}


def _id(producer, schema: dict, kind: str = "AVRO") -> int:
    from confluent_kafka.schema_registry import Schema

    return producer.register_schema(f"{TOPIC}-value", Schema(json.dumps(schema), kind))


def _header(schema_id: int) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id)


@pytest.mark.parametrize(
    ("encoding", "make", "reason"),
    [
        ("avro", lambda p: b"", "not_wire_format"),
        ("avro", lambda p: b"\x00\x00\x00\x01", "not_wire_format"),
        ("avro", lambda p: b'{"id": 1, "price": 2.0}', "not_wire_format"),
        ("avro", lambda p: b"\x01" + _avro(p, QUOTE, _quote())[1:], "not_wire_format"),
        ("avro", lambda p: _header(4242) + b"\x02", "unknown_schema"),
        ("avro", lambda p: _avro(p, QUOTE, _quote())[:7], "undecodable_record"),
        ("avro", lambda p: _header(_id(p, QUOTE)), "undecodable_record"),
        ("avro", lambda p: _avro(p, BLOB, {"data": b"\x01\x02"}), "undecodable_record"),
        ("avro", lambda p: _json(p, PRICE, {"id": 1, "price": 2.0}), "unknown_schema"),
        ("json_schema", lambda p: _avro(p, QUOTE, _quote()), "unknown_schema"),
        ("json_schema", _priced(b'{"id": '), "undecodable_record"),
        ("json_schema", _priced(b"\xff\xfe"), "undecodable_record"),
        ("json_schema", _priced(b"[" * 50_000), "undecodable_record"),
        ("json_schema", _priced(b'{"id": "x"}'), "invalid_record"),
        ("json_schema", _priced(b'{"id": 1}'), "invalid_record"),
        ("json_schema", _priced(b"[1]"), "invalid_record"),
    ],
)
def test_a_bad_record_is_refused_with_its_reason(
    registry, producer, encoding: str, make, reason: str
) -> None:
    decoder = RegistryDecoder(_settings(registry), encoding)
    refused = _line(decoder, make(producer), form="values")
    assert isinstance(refused, Refused) and refused.reason == reason, refused
    assert "ACME" not in refused.message  # a reason names no value


def test_a_schema_is_fetched_once_per_id_and_an_unknown_id_once_a_minute(
    registry, producer
) -> None:
    decoder = RegistryDecoder(_settings(registry), "avro")
    records = [_avro(producer, QUOTE, {**_quote(), "ID": i}) for i in range(5)]
    schema_id = struct.unpack(">I", records[0][1:5])[0]
    before = registry.asked.copy()
    assert [_line(decoder, r, form="values")["values"]["ID"] for r in records] == list(range(5))
    unknown = [_line(decoder, _header(9999) + b"\x02") for _ in range(3)]
    assert {u.reason for u in unknown} == {"unknown_schema"}
    asked = registry.asked - before
    assert asked == {("GET", f"/schemas/ids/{schema_id}"): 1, ("GET", "/schemas/ids/9999"): 1}


def test_a_registry_that_does_not_answer_holds_records_and_never_refuses_one(
    registry, producer
) -> None:
    raw = _avro(producer, {**QUOTE, "name": "Held"}, _quote())
    decoder = RegistryDecoder(_settings(registry), "avro")
    registry.stop()
    try:
        with pytest.raises(RegistryDown) as down:
            decoder(raw)
        assert down.value.code == "registry_unreachable"
    finally:
        registry.start()
    registry.failing = True
    try:
        with pytest.raises(RegistryDown) as down:
            decoder(raw)
        assert down.value.code == "registry_unreachable"  # a 5xx: later, not a bad record
    finally:
        registry.failing = False
    assert _line(decoder, raw, form="values")["values"]["ID"] == 1


def test_the_registry_credentials_are_sent_and_a_refusal_holds_records_back() -> None:
    guarded = SchemaRegistryServer(user="svc", password="reg-pw")
    try:
        schema_id = guarded.register(f"{TOPIC}-value", json.dumps(PRICE), "JSON")
        raw = _header(schema_id) + b'{"id": 3, "price": 4.5}'
        wrong = RegistryDecoder(_settings(guarded, username="svc", password="nope"), "json_schema")
        with pytest.raises(RegistryDown) as down:
            wrong(raw)
        assert down.value.code == "registry_error: HTTP 401"
        right = RegistryDecoder(
            _settings(guarded, username="svc", password="reg-pw"), "json_schema"
        )
        assert right(raw) == {"id": 3, "price": 4.5}
    finally:
        guarded.stop()


@settings(max_examples=150, deadline=None)
@given(
    st.binary(max_size=40)
    | st.binary(max_size=40).map(lambda body: b"\x00\x00\x00\x00\x01" + body)
    | st.binary(max_size=40).map(lambda body: b"\x00\x00\x00\x00\x02" + body)
)
def test_any_value_is_decoded_or_refused_never_raised(fuzzed: RegistryDecoder, raw: bytes) -> None:
    """Whatever a producer writes, with the registry up: a line of the partition's own
    channel or a refusal with a reason, never an exception that would stop the source."""
    line = record_line(raw, STREAM, PROVIDER, form="values", decode=fuzzed)
    if isinstance(line, Refused):
        assert line.reason in {
            "not_wire_format",
            "unknown_schema",
            "undecodable_record",
            "invalid_record",
            "malformed_record",
        }
    else:
        assert json.loads(line)["provider"] == PROVIDER


BINDING = {
    "name": "avro_feed",
    "stream": STREAM,
    "bootstrap_servers": "127.0.0.1:9092",
    "topic": "quotes",
    "partitions": {"0": {"user": "ed", "provider": "ed.k0"}},
    "encoding": "avro",
    "schema_registry": {"url": "https://registry.example:8081"},
}


@pytest.mark.parametrize(
    "change",
    [
        {"encoding": "protobuf"},
        {"encoding": "avro", "schema_registry": None},
        {"encoding": "json_schema", "schema_registry": None},
        {"encoding": "json"},  # a registry it would never ask
        {"schema_registry": {"url": "ftp://registry:21"}},
        {"schema_registry": {"url": "registry:8081"}},
        {"schema_registry": {"url": "file:///etc/passwd"}},
        {"schema_registry": {"url": "http://"}},
        {"schema_registry": {"url": "http://registry:port"}},
        {"schema_registry": {"url": "http://svc:pw@registry:8081"}},
        {"schema_registry": {"url": "http://registry:8081?x=1"}},
        {"schema_registry": {"url": "http://a:8081,http://b:8081"}},
        {"schema_registry": {"url": "http://registry:8081", "password": "pw"}},
        {"schema_registry": {"url": "http://registry:8081", "username": "svc"}},
        {"schema_registry": {"url": "http://r:8081", "username": "a:b", "password": "pw"}},
        {"schema_registry": {"url": "http://registry:8081", "ca_location": "/ca.pem"}},
        {"schema_registry": {"url": "https://registry:8081", "token": "x"}},
    ],
)
def test_a_registry_binding_that_could_not_work_is_refused(change: dict) -> None:
    with pytest.raises(ValidationError):
        KafkaBinding.model_validate({**BINDING, **change})


def test_the_registry_password_is_kept_but_never_shown() -> None:
    registry = {
        "url": "https://registry.example:8081/",
        "username": "svc",
        "password": "reg-s3cret",
        "ca_location": "/etc/ssl/registry-ca.pem",
    }
    security = {
        "protocol": "SASL_SSL",
        "sasl_mechanism": "PLAIN",
        "username": "svc",
        "password": "broker-s3cret",
    }
    binding = KafkaBinding.model_validate(
        {**BINDING, "schema_registry": registry, "security": security}
    )
    shown = json.dumps(binding.public())
    assert "reg-s3cret" not in shown and "broker-s3cret" not in shown
    assert "reg-s3cret" not in repr(binding)
    assert binding.public()["schema_registry"] == {
        "url": "https://registry.example:8081",
        "username": "svc",
        "ca_location": "/etc/ssl/registry-ca.pem",
    }
    kept = KafkaBinding.model_validate_json(binding.stored())
    assert kept.schema_registry is not None
    config = kept.schema_registry.client_config()
    assert config["basic.auth.user.info"] == "svc:reg-s3cret"
    assert config["ssl.ca.location"] == "/etc/ssl/registry-ca.pem"
    assert kept.client_config()["sasl.password"] == "broker-s3cret"
    plain = KafkaBinding.model_validate({**BINDING, "encoding": "json", "schema_registry": None})
    assert plain.public()["schema_registry"] is None
    assert KafkaBinding.model_validate_json(plain.stored()).schema_registry is None
