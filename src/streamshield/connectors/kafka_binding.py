"""A Kafka topic bound to a stream: what an administrator declares, validated whole.

A partition is a channel: every record of partition ``p`` acts as one provider (a user
who needs WRITE, for sps INJECT SP, on the stream, checked at every landing), and the
record's offset is the channel's ``seq`` (``offset + 1``, seqs start at 1). Kafka keeps
a partition's order, the landing zone refuses a seq that does not grow, so policies and
the Security Shield see exactly the order the producer wrote. A partition the binding
does not name is not read at all: its records never land (deny by default).

Two partitions never share a provider: their offsets would collide as seqs. A binding
holds the broker's credentials; :meth:`KafkaBinding.public` is what the API shows (no
password), :meth:`KafkaBinding.stored` what the server keeps (its file is 0600).
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from streamshield.catalog.streams import check_name

PROVIDER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}\Z")
"""A provider name the landing zone accepts (it becomes part of a file name)."""
TOPIC = re.compile(r"[A-Za-z0-9._\-]{1,249}\Z")
"""Kafka's own rule for topic names."""


class PartitionSource(BaseModel):
    """Who the records of one partition act as."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    user: str = Field(description="The user whose WRITE / INJECT SP the records need")
    provider: str | None = Field(
        default=None,
        description="The channel's provider: the user or '<user>.<anything>' (default: the user)",
    )

    @model_validator(mode="after")
    def _provider_of_user(self) -> PartitionSource:
        provider = self.provider or self.user
        if not PROVIDER.match(provider):
            raise ValueError(f"provider {provider!r} is not a valid provider name")
        if provider != self.user and not provider.startswith(self.user + "."):
            raise ValueError(
                f"provider {provider!r} is neither the user {self.user!r} nor "
                f"'{self.user}.<name>': a user writes only her own channels"
            )
        return self

    @property
    def channel_provider(self) -> str:
        return self.provider or self.user


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


class KafkaBinding(BaseModel):
    """One topic feeding one stream."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The binding's name (an identifier)")
    stream: str = Field(description="The input stream the records land in")
    bootstrap_servers: str = Field(description="host:port[,host:port...] of the brokers")
    topic: str
    group_id: str | None = Field(
        default=None,
        description="Consumer group the offsets are committed under (default: streamshield-<name>)",
    )
    partitions: dict[int, PartitionSource] = Field(
        description="Partition number -> who its records act as; other partitions are not read"
    )
    format: Literal["element", "values"] = Field(
        default="element",
        description="'element': each value is a wire-format element without seq (a tuple "
        "or an sp); 'values': each value is a JSON object of the tuple's attribute values",
    )
    fields: dict[str, str] = Field(
        default_factory=dict,
        description="Renames a record's value fields to the stream's attributes ('values')",
    )
    security: KafkaSecurity = Field(default_factory=KafkaSecurity)
    max_records: int = Field(default=5000, ge=1, le=100_000, description="Records per landing")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_name(value, "a binding's name")

    @field_validator("stream")
    @classmethod
    def _stream(cls, value: str) -> str:
        return check_name(value, "stream")

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
        providers = [source.channel_provider for source in self.partitions.values()]
        if len(set(providers)) != len(providers):
            raise ValueError("two partitions never share a provider: their offsets are seqs")
        for source, target in self.fields.items():
            check_name(target, f"the attribute field {source!r} renames to")
        return self

    @property
    def group(self) -> str:
        return self.group_id or f"streamshield-{self.name}"

    def providers(self) -> set[str]:
        return {source.channel_provider for source in self.partitions.values()}

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
        """The binding as the API shows it: the password never leaves the server."""
        shown = self.model_dump(mode="json")
        shown["security"].pop("password", None)
        shown["group_id"] = self.group
        return shown

    def stored(self) -> str:
        """The binding as the server keeps it, password included."""
        data = self.model_dump(mode="json")
        if self.security.password is not None:
            data["security"]["password"] = self.security.password.get_secret_value()
        return json.dumps(data, indent=2)
