"""One broker message as one landing line, or the reason it is refused (any source).

A Kafka record's value and an MQTT message's payload are read alike: JSON, in the
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
from collections.abc import Mapping
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
]
"""Why a record is refused before the landing gate (the last two: an MQTT message's
topic names no bound device, or does not match the binding's filter)."""


@dataclass(frozen=True)
class Refused:
    reason: Reason
    message: str


def record_line(
    value: bytes | None,
    stream: str,
    provider: str,
    form: Format = "element",
    fields: Mapping[str, str] | None = None,
    max_bytes: int = MAX_RECORD_BYTES,
) -> str | Refused:
    """The landing line of one record on the channel (``stream``, ``provider``)."""
    if value is None:
        return Refused("malformed_record", "the record has no value (a tombstone)")
    if len(value) > max_bytes:
        return Refused("record_too_large", f"the record's value exceeds {max_bytes} bytes")
    try:
        decoded = json.loads(value)
    except (ValueError, RecursionError):
        return Refused("malformed_record", "the record's value is not JSON (UTF-8)")
    if not isinstance(decoded, dict):
        return Refused("malformed_record", "the record's value is not a JSON object")
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
