"""One MQTT message as (device, landing line), or the reason it is refused (pure).

The topic says which device sent a message: its level ``provider_level``. The binding
maps that device to a channel; a device it does not name is refused
(``unbound_device``), and so is a topic the binding's filter does not match
(``unbound_topic``: a persistent session can still hold a subscription an earlier
binding under the same client id made). The payload is then read like a Kafka record's
value (:func:`~streamshield.connectors.record_lines.record_line`): the device's channel
is set, a payload naming another is refused, ``seq`` is the connector's to give.

:func:`message_key` is what the source remembers of a landed message to know it again
when the broker delivers it a second time (see :mod:`.mqtt_source`).
"""

from __future__ import annotations

import hashlib

from streamshield.connectors.mqtt_binding import MqttBinding
from streamshield.connectors.record_lines import Refused, record_line


def matches(topic_filter: str, topic: str) -> bool:
    """Whether ``topic`` matches ``topic_filter`` by MQTT's rules (``+`` one level, ``#``
    the rest, including none; a ``$`` topic matches no leading wildcard)."""
    if topic.startswith("$") and topic_filter[:1] in ("+", "#"):
        return False
    wanted, levels = topic_filter.split("/"), topic.split("/")
    for number, level in enumerate(wanted):
        if level == "#":
            return True
        if number >= len(levels) or (level != "+" and level != levels[number]):
            return False
    return len(wanted) == len(levels)


def device_of(topic: str, level: int) -> str | None:
    """The topic's level ``level`` (0-based), or None if the topic is shorter."""
    levels = topic.split("/")
    return levels[level] if level < len(levels) else None


def message_line(topic: str, payload: bytes, binding: MqttBinding) -> tuple[str, str] | Refused:
    """The device a message comes from and its landing line on the device's channel."""
    if not matches(binding.topic_filter, topic):
        return Refused("unbound_topic", "the topic does not match the binding's filter")
    device = device_of(topic, binding.provider_level)
    source = binding.providers.get(device) if device is not None else None
    if device is None or source is None:
        return Refused("unbound_device", "the topic names no device the binding maps")
    line = record_line(
        payload, binding.stream, source.channel_provider, binding.format, binding.fields
    )
    return line if isinstance(line, Refused) else (device, line)


def message_key(mid: int, topic: str, payload: bytes) -> str:
    """What identifies one delivery of a message across its redeliveries: the packet id
    (a broker resends an unacknowledged message with the same one) and a digest of the
    topic and payload (so a later message that reuses the id is not taken for it)."""
    digest = hashlib.sha256(topic.encode("utf-8") + b"\0" + payload).hexdigest()[:32]
    return f"{mid}:{digest}"
