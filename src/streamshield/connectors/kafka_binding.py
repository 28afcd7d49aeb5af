"""A Kafka topic bound to a stream: what an administrator declares, validated whole.

A partition is a channel: every record of partition ``p`` acts as one provider (a user
who needs WRITE, for sps INJECT SP, on the stream, checked at every landing), and the
record's offset is the channel's ``seq`` (``offset + 1``, seqs start at 1). Kafka keeps
a partition's order, the landing zone refuses a seq that does not grow, so policies and
the Security Shield see exactly the order the producer wrote. A partition the binding
does not name is not read at all: its records never land (deny by default). Two
partitions never share a provider: their offsets would collide as seqs.

A record's value is JSON, or (``encoding`` ``avro`` or ``json_schema``) Confluent's wire
format read with the schema a registry keeps under the record's schema id; either way
the object it decodes to is read as a JSON value would be (:mod:`.record_lines`).
"""

from __future__ import annotations

import re
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from streamshield.connectors.source_binding import ChannelSource, SourceBinding

TOPIC = re.compile(r"[A-Za-z0-9._\-]{1,249}\Z")
"""Kafka's own rule for topic names."""
Encoding = Literal["json", "avro", "json_schema"]
"""How a record's value is written: JSON, or Avro / JSON Schema in Confluent's wire
format (magic byte 0, a 4-byte big-endian schema id, the body)."""
REGISTRY_TIMEOUT_SECONDS = 5.0
"""How long one registry request may take: the consumer thread waits on it."""


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


class SchemaRegistry(BaseModel):
    """Where the schemas of an Avro or JSON Schema topic are fetched, by id."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(description="http(s)://host[:port][/path] of the schema registry")
    username: str | None = Field(default=None, description="HTTP basic auth user")
    password: SecretStr | None = Field(default=None, description="HTTP basic auth password")
    ca_location: str | None = Field(
        default=None, description="PEM file of the CA that signed the registry's certificate"
    )

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018  (raises on a port that is not a number)
        except ValueError:
            raise ValueError("the schema registry URL is not a URL") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("the schema registry URL is http(s)://host[:port][/path]")
        if parts.username is not None or parts.password is not None:
            raise ValueError(
                "the schema registry URL holds no credentials: give username and password"
            )
        if parts.query or parts.fragment or "," in value:
            raise ValueError("the schema registry URL is one URL, without query or fragment")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _complete(self) -> SchemaRegistry:
        if (self.username is None) != (self.password is None):
            raise ValueError("the schema registry's basic auth needs username and password")
        if self.username is not None and ":" in self.username:
            raise ValueError("the schema registry's username has no ':'")
        if self.ca_location and not self.url.startswith("https:"):
            raise ValueError("ca_location is for an https schema registry URL")
        return self

    def client_config(self) -> dict[str, Any]:
        """confluent-kafka's SchemaRegistryClient settings. No retries of its own: a
        registry that does not answer holds the partition back, and the source's back-off
        asks again."""
        config: dict[str, Any] = {
            "url": self.url,
            "timeout": REGISTRY_TIMEOUT_SECONDS,
            "max.retries": 0,
        }
        if self.username is not None and self.password is not None:
            config["basic.auth.user.info"] = f"{self.username}:{self.password.get_secret_value()}"
        if self.ca_location:
            config["ssl.ca.location"] = self.ca_location
        return config


class KafkaBinding(SourceBinding):
    """One topic feeding one stream."""

    KIND, CHANNEL, SOURCE = "kafka", "partition", "topic"
    SECRETS = (("security", "password"), ("schema_registry", "password"))

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
    encoding: Encoding = Field(
        default="json",
        description="'json': each value is JSON; 'avro', 'json_schema': Confluent's wire "
        "format, read with the schema the registry keeps under the record's schema id",
    )
    schema_registry: SchemaRegistry | None = Field(
        default=None, description="Where the schemas are ('avro' and 'json_schema' only)"
    )

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
        if self.encoding == "json" and self.schema_registry is not None:
            raise ValueError("a schema registry is read only for encoding avro or json_schema")
        if self.encoding != "json" and self.schema_registry is None:
            raise ValueError(f"encoding {self.encoding} needs a schema_registry")
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
