"""An MQTT topic filter bound to a stream: what an administrator declares, validated whole.

One level of the topic names the device (``provider_level``, 0-based: in
``plant/+/reading`` level 1 is the device), and the binding maps each device name to
the user and provider its messages act as (:class:`ChannelSource`: the user needs WRITE,
for sps INJECT SP, on the stream, checked at every landing). A device is a channel; a
device the map does not name is refused (``unbound_device``): there is no default entry,
so a device nobody bound never lands a message (deny by default). Two devices never
share a provider: their messages would interleave on one channel in no defined order.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, SecretStr, field_validator, model_validator

from streamshield.connectors.source_binding import ChannelSource, SourceBinding

HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.\-:]{0,252}[A-Za-z0-9])?\Z")
"""A host name, an IPv4 address or a bare IPv6 address."""
CLIENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}\Z")
MAX_FILTER_BYTES = 65_535
"""MQTT's bound on a topic (filter) string's UTF-8 length."""
RESERVED = frozenset("+#/\0")
"""What a device name (one topic level) cannot hold."""


def check_filter(value: str) -> list[str]:
    """The filter's levels, or ValueError if MQTT forbids it (section 4.7 of 3.1.1).

    ``+`` and ``#`` stand alone in their level, ``#`` only as the last; a filter never
    starts with ``$`` here: those topics are the broker's own (``$SYS``), not devices'.
    """
    if not value or len(value.encode("utf-8")) > MAX_FILTER_BYTES or "\0" in value:
        raise ValueError("a topic filter is 1-65535 UTF-8 bytes without NUL")
    if value.startswith("$"):
        raise ValueError("topics starting with '$' are the broker's, not a device's")
    levels = value.split("/")
    for number, level in enumerate(levels):
        if "#" in level and (level != "#" or number != len(levels) - 1):
            raise ValueError("'#' must be a whole level, the filter's last")
        if "+" in level and level != "+":
            raise ValueError("'+' must be a whole level")
    return levels


class MqttBinding(SourceBinding):
    """One topic filter feeding one stream."""

    KIND, CHANNEL, SOURCE = "mqtt", "device", "topic_filter"
    SECRETS = (("password",),)

    host: str = Field(description="The broker's host name or address")
    port: int = Field(default=1883, ge=1, le=65535)
    topic_filter: str = Field(
        description="What the source subscribes to (QoS 1), e.g. 'plant/+/reading'"
    )
    provider_level: int = Field(
        ge=0, le=1000, description="Which topic level (0-based) names the device"
    )
    providers: dict[str, ChannelSource] = Field(
        description="Device name -> who its messages act as; other devices are refused"
    )
    client_id: str | None = Field(
        default=None,
        description="The persistent session's client id (default: streamshield-<name>)",
    )
    username: str | None = None
    password: SecretStr | None = None
    ca_file: str | None = Field(
        default=None,
        description="PEM file of the CA that signed the broker's certificate (turns TLS on)",
    )

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        if not HOST.match(value):
            raise ValueError("host is a host name or an address")
        return value

    @field_validator("topic_filter")
    @classmethod
    def _filter(cls, value: str) -> str:
        check_filter(value)
        return value

    @field_validator("client_id")
    @classmethod
    def _client_id(cls, value: str | None) -> str | None:
        if value is not None and not CLIENT_ID.match(value):
            raise ValueError("a client id is 1-128 of [A-Za-z0-9_.-]")
        return value

    @model_validator(mode="after")
    def _devices(self) -> MqttBinding:
        levels = self.topic_filter.split("/")
        within = self.provider_level < len(levels) and levels[self.provider_level] != "#"
        if not within and levels[-1] != "#":
            raise ValueError(
                f"the filter has no level {self.provider_level}: provider_level names one "
                "of its levels (or one below its '#')"
            )
        if not self.providers:
            raise ValueError("a binding names at least one device")
        fixed = levels[self.provider_level] if within else "+"
        for device in self.providers:
            if not device or len(device) > 256 or RESERVED & set(device):
                raise ValueError(f"device {device[:40]!r} is not one topic level")
            if fixed != "+" and device != fixed:
                raise ValueError(f"device {device!r} never matches the filter's level {fixed!r}")
        if self.password is not None and not self.username:
            raise ValueError("a password needs a username")
        self.check_sources()
        return self

    def sources(self) -> dict[str, ChannelSource]:
        return self.providers

    @property
    def client(self) -> str:
        return self.client_id or f"streamshield-{self.name}"

    def public(self) -> dict[str, Any]:
        shown = super().public()
        shown["client_id"] = self.client
        return shown
