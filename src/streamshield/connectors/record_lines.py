"""One broker message as one landing line, or the reason it is refused (any source).

A Kafka record's value and an MQTT message's payload are read alike: JSON (or, for a
Kafka binding with a schema registry, Avro or JSON Schema values decoded to the same
objects by :mod:`.registry_decoder`), in the
``element`` format a wire-format element (a tuple with its values and policy reference,
or a security punctuation, so providers stream policies in-band too) without ``seq``,
which the connector gives; in the ``values`` format a tuple's attribute values alone
(renamed by the binding's ``fields``), for which the channel's current policy is
declared, as with ``POST /streams/{name}/elements?assign=seq``.

A record may name its stream and provider; if it names others than the binding gives
its channel, it is refused (``wrong_channel``): a record never moves itself into another
channel or stream. What this module cannot judge (the schema, roles, order) the landing
gate judges, line by line, with its own reasons. Messages name fields, never a value.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

Format = Literal["element", "values"]
MAX_RECORD_BYTES = 1_048_576
"""A record larger than this is refused (``record_too_large``), never parsed."""
Reason = Literal[
    "malformed_record",
    "record_too_large",
    "seq_given",
    "wrong_channel",
    "unbound_device",
    "unbound_topic",
    "not_wire_format",
    "unknown_schema",
    "undecodable_record",
    "invalid_record",
]
"""Why a record is refused before the landing gate. ``unbound_device``,
``unbound_topic``: an MQTT message's topic names no bound device, or does not match the
binding's filter. The last four, a schema registry's encodings
(:mod:`.registry_decoder`): not Confluent's framing, a schema id the registry does not
have (for this encoding), a body that does not decode with its schema, one that decodes
but breaks its JSON Schema."""


@dataclass(frozen=True)
class Refused:
    reason: Reason
    message: str


Decode = Callable[[bytes], object]
"""A record's value as the object it encodes, or the :class:`Refused` it earns."""


def json_value(value: bytes) -> object:
    """The JSON value a record carries, or ``malformed_record``."""
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return Refused("malformed_record", "the record's value is not JSON (UTF-8)")


def record_line(
    value: bytes | None,
    stream: str,
    provider: str,
    form: Format = "element",
    fields: Mapping[str, str] | None = None,
    max_bytes: int = MAX_RECORD_BYTES,
    decode: Decode = json_value,
) -> str | Refused:
    """The landing line of one record on the channel (``stream``, ``provider``); raises
    what ``decode`` raises (a registry that does not answer: the record waits)."""
    if value is None:
        return Refused("malformed_record", "the record has no value (a tombstone)")
    if len(value) > max_bytes:
        return Refused("record_too_large", f"the record's value exceeds {max_bytes} bytes")
    decoded = decode(value)
    if isinstance(decoded, Refused):
        return decoded
    if not isinstance(decoded, dict):
        return Refused("malformed_record", "the record's value is not an object")
    if form == "values":
        renamed = {(fields or {}).get(key, key): item for key, item in decoded.items()}
        element: dict[str, object] = {"type": "tuple", "values": renamed}
    else:
        element = decoded
        if "seq" in element:
            return Refused("seq_given", "the connector gives a record its seq: omit 'seq'")
        for key, expected in (("stream", stream), ("provider", provider)):
            if key in element and element[key] != expected:
                return Refused(
                    "wrong_channel",
                    f"the record names another {key} than its channel",
                )
    element["stream"], element["provider"] = stream, provider
    return json.dumps(element, separators=(",", ":"))
