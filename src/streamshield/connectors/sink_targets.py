"""Where a sink writes one recipient's rows: a Kafka topic or a Delta Lake table.

Both write one micro-batch at a time, the batch id with it, so a reader can tell a
batch written again after a crash:

* **Kafka**: every row one record (its JSON, ``_masked`` included), keyed
  ``<query>:<batch>:<n>``, headers ``streamshield.query`` and ``streamshield.batch``;
  the batch is flushed and acknowledged (``acks=all``) before the sink counts it
  written. At-least-once: a batch replayed after a crash comes again with the same keys
  and batch id (a consumer keeps the last batch id per query and skips lower ones).
* **Delta Lake** (delta-rs, no JVM): one commit per batch with rows, appending, the
  batch id as the commit's application transaction (``streamshield-sink-<id>``) and in
  its metadata. Exactly once: a batch at or below the table's transaction version for
  the sink is already committed and is skipped, so a replay never doubles a row.
  Columns that are null in every row of a batch are left out of its commit (their type
  is unknown); the table's schema grows when a column first has a value.
"""

from __future__ import annotations

import json
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from streamshield.connectors.kafka_binding import TOPIC, KafkaSecurity


class KafkaTarget(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["kafka"] = "kafka"
    bootstrap_servers: str
    topic: str
    security: KafkaSecurity = Field(default_factory=KafkaSecurity)

    @field_validator("topic")
    @classmethod
    def _topic(cls, value: str) -> str:
        if not TOPIC.match(value) or value in (".", ".."):
            raise ValueError("a topic name is 1-249 of [A-Za-z0-9._-]")
        return value


class DeltaTarget(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["delta"] = "delta"
    uri: str = Field(description="A local path or a URI delta-rs writes (s3://, az://, ...)")
    storage_options: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="delta-rs's settings for the store (keys, tokens): every value is "
        "a secret, shown as asterisks",
    )

    def options(self) -> dict[str, str]:
        """The storage options as delta-rs takes them (the secrets' values)."""
        return {key: value.get_secret_value() for key, value in self.storage_options.items()}

    @field_validator("uri")
    @classmethod
    def _uri(cls, value: str) -> str:
        if not value.strip() or "\x00" in value:
            raise ValueError("a table URI is needed")
        return value


class Writer(Protocol):
    def write(self, query: str, batch_id: int, rows: list[dict]) -> None: ...
    def close(self) -> None: ...


class KafkaWriter:
    def __init__(self, target: KafkaTarget) -> None:
        from confluent_kafka import Producer

        config: dict[str, Any] = {
            "bootstrap.servers": target.bootstrap_servers,
            "acks": "all",
            "linger.ms": 5,
            "security.protocol": target.security.protocol,
            "log_level": 2,
        }
        if target.security.sasl_mechanism and target.security.password is not None:
            config["sasl.mechanism"] = target.security.sasl_mechanism
            config["sasl.username"] = target.security.username
            config["sasl.password"] = target.security.password.get_secret_value()
        if target.security.ca_location:
            config["ssl.ca.location"] = target.security.ca_location
        self.topic = target.topic
        self._producer = Producer(config)

    def write(self, query: str, batch_id: int, rows: list[dict]) -> None:
        failures: list[str] = []

        def delivered(error: Any, _message: Any) -> None:
            if error is not None:
                failures.append(error.name())

        headers: dict[str, str | bytes | None] = {
            "streamshield.query": query,
            "streamshield.batch": str(batch_id),
        }
        for number, row in enumerate(rows):
            self._producer.produce(
                self.topic,
                value=json.dumps(row, default=str),
                key=f"{query}:{batch_id}:{number}",
                headers=headers,
                on_delivery=delivered,
            )
            self._producer.poll(0)
        if self._producer.flush(30) or failures:
            raise OSError(f"kafka sink: batch {batch_id} not acknowledged ({failures[:1]})")

    def close(self) -> None:
        self._producer.flush(10)


class DeltaWriter:
    def __init__(self, target: DeltaTarget, app_id: str) -> None:
        self.uri, self.options, self.app_id = target.uri, target.options(), app_id

    def committed(self) -> int | None:
        """The last batch committed to the table by this sink (None: none, no table)."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        try:
            table = DeltaTable(self.uri, storage_options=self.options or None)
        except TableNotFoundError:
            return None
        return table.transaction_version(self.app_id)

    def write(self, query: str, batch_id: int, rows: list[dict]) -> None:
        import pyarrow as pa
        from deltalake import CommitProperties, Transaction, write_deltalake

        if not rows:
            return  # nothing for her in this batch: no commit
        done = self.committed()
        if done is not None and batch_id <= done:
            return  # a replayed batch the table already holds
        table = pa.Table.from_pylist(rows)
        for index in reversed(range(table.num_columns)):
            field = table.schema.field(index)
            if pa.types.is_null(field.type):
                table = table.remove_column(index)
            elif pa.types.is_list(field.type) and pa.types.is_null(field.type.value_type):
                table = table.set_column(index, field.name, table.column(index).cast(
                    pa.list_(pa.string())))  # fmt: skip
        commit = CommitProperties(
            custom_metadata={"streamshield.query": query, "streamshield.batch": str(batch_id)},
            app_transactions=[Transaction(self.app_id, batch_id)],
        )
        write_deltalake(
            self.uri,
            table,
            mode="append",
            schema_mode="merge",
            storage_options=self.options or None,
            commit_properties=commit,
        )

    def close(self) -> None:
        pass
