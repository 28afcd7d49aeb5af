"""A Kafka topic bound to a stream: what an administrator declares, validated whole.

A partition is a channel: every record of partition ``p`` acts as one provider (a user
who needs WRITE, for sps INJECT SP, on the stream, checked at every landing), and the
record's offset is the channel's ``seq`` (``offset + 1``, seqs start at 1). Kafka keeps
a partition's order, the landing zone refuses a seq that does not grow, so policies and
the Security Shield see exactly the order the producer wrote. A partition the binding
does not name is not read at all: its records never land (deny by default). Two
partitions never share a provider: their offsets would collide as seqs.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from streamshield.connectors.source_binding import ChannelSource, SourceBinding

TOPIC = re.compile(r"[A-Za-z0-9._\-]{1,249}\Z")
"""Kafka's own rule for topic names."""


class KafkaSecurity(BaseModel):
    """How the consumer authenticates to the broker (librdkafka's settings)."""

    model_config = ConfigDict(extra="forbid")

    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    username: str | None = None
    password: SecretStr | None = None
    ca_location: str | None = Field(
        default=None, description="PEM file of the CA that signed the broker's certificate"
    )

    @model_validator(mode="after")
    def _sasl_complete(self) -> KafkaSecurity:
        if self.protocol.startswith("SASL_") and not (
            self.sasl_mechanism and self.username and self.password
        ):
            raise ValueError("SASL needs sasl_mechanism, username and password")
        return self


class KafkaBinding(SourceBinding):
    """One topic feeding one stream."""

    KIND, CHANNEL, SOURCE = "kafka", "partition", "topic"
    SECRET = ("security", "password")

    bootstrap_servers: str = Field(description="host:port[,host:port...] of the brokers")
    topic: str
    group_id: str | None = Field(
        default=None,
        description="Consumer group the offsets are committed under (default: streamshield-<name>)",
    )
    partitions: dict[int, ChannelSource] = Field(
        description="Partition number -> who its records act as; other partitions are not read"
    )
    security: KafkaSecurity = Field(default_factory=KafkaSecurity)
    max_records: int = Field(default=5000, ge=1, le=100_000, description="Records per landing")

    @field_validator("topic")
    @classmethod
    def _topic(cls, value: str) -> str:
        if not TOPIC.match(value) or value in (".", ".."):
            raise ValueError("a topic name is 1-249 of [A-Za-z0-9._-]")
        return value

    @field_validator("bootstrap_servers")
    @classmethod
    def _servers(cls, value: str) -> str:
        servers = [s.strip() for s in value.split(",")]
        for server in servers:
            host, colon, port = server.rpartition(":")
            if not (host and colon and port.isdigit() and 0 < int(port) < 65536):
                raise ValueError(f"bootstrap server {server!r} is not host:port")
        return ",".join(servers)

    @model_validator(mode="after")
    def _partitions(self) -> KafkaBinding:
        if not self.partitions:
            raise ValueError("a binding names at least one partition")
        if any(p < 0 for p in self.partitions):
            raise ValueError("partition numbers are 0 or more")
        self.check_sources()
        return self

    def sources(self) -> dict[int, ChannelSource]:
        return self.partitions

    @property
    def group(self) -> str:
        return self.group_id or f"streamshield-{self.name}"

    def client_config(self) -> dict[str, Any]:
        """librdkafka's settings for the consumer: offsets are committed by the source
        after each landing, never automatically (an automatic commit could run ahead of
        what landed)."""
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "group.id": self.group,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
            "security.protocol": self.security.protocol,
            "reconnect.backoff.max.ms": 10_000,
            "fetch.max.bytes": 64 * 1024 * 1024,
        }
        if self.security.sasl_mechanism:
            config["sasl.mechanism"] = self.security.sasl_mechanism
            config["sasl.username"] = self.security.username
            assert self.security.password is not None  # checked by KafkaSecurity
            config["sasl.password"] = self.security.password.get_secret_value()
        if self.security.ca_location:
            config["ssl.ca.location"] = self.security.ca_location
        return config

    def public(self) -> dict[str, Any]:
        shown = super().public()
        shown["group_id"] = self.group
        return shown
