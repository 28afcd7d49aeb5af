"""A record value in Confluent's wire format decoded with the schema a registry keeps.

Confluent's producers write magic byte 0, the schema's id (4 bytes, big-endian) and the
body: Avro's binary encoding, or a JSON document its JSON Schema validates. The schema
is fetched by id with confluent-kafka's own :class:`SchemaRegistryClient` (which keeps
every schema it fetched, by id) and the body read by its own Avro and JSON Schema
deserializers, with the writer's schema alone: no subject, no newer version, no rules
a registry may attach (what lands is what the producer wrote, checked by the landing
gate).

What a record earns is told apart from what the registry does:

* the record's fault, refused alone (:class:`~.record_lines.Refused`):
  ``not_wire_format`` (shorter than the 5-byte header, or a magic byte other than 0),
  ``unknown_schema`` (the registry has no schema of that id, or one of another kind than
  the binding reads), ``undecodable_record`` (the body does not decode with its schema,
  or holds a value JSON has no form for: bytes, a decimal), ``invalid_record`` (JSON
  that breaks its JSON Schema);
* the registry's, never the record's (:class:`RegistryDown`): no connection, a timeout,
  a 5xx, or a refusal of the server's own credentials (401, 403). The records wait: the
  partition is held back and read again after a back-off, so an outage loses nothing
  and refuses nothing.

An id the registry answered 404 for is remembered for a minute, so a run of records
naming it costs one request, not one each.
"""

from __future__ import annotations

import datetime
import struct
import uuid
from collections.abc import Callable
from typing import Any

from cachetools import TTLCache
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.serialization import SerializationError

from streamshield.connectors.kafka_binding import Encoding, SchemaRegistry
from streamshield.connectors.record_lines import Refused

HEADER_BYTES = 5
SCHEMA_TYPES = {"avro": "AVRO", "json_schema": "JSON"}
"""The registry's ``schemaType`` of each encoding it serves (Avro's is left unsaid)."""
KINDS = {"AVRO": "an Avro schema", "JSON": "a JSON Schema", "PROTOBUF": "a Protobuf schema"}
UNKNOWN_SECONDS = 60.0
UNKNOWN_KEPT = 1024
RETRIED_STATUS = frozenset({408, 429})
"""HTTP answers that say "later" (besides every 5xx)."""


class RegistryDown(Exception):
    """The registry did not give a schema: the records wait, none is refused."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


def _writer_only(_ctx: object, _record_name: object) -> None:
    """No subject: the deserializer reads with the schema the record's id names."""
    return None


class RegistryDecoder:
    """``decoder(value)``: the object a wire-format value encodes, or why it is refused;
    raises :class:`RegistryDown` when the registry does not answer."""

    def __init__(
        self,
        registry: SchemaRegistry,
        encoding: Encoding,
        client: SchemaRegistryClient | None = None,
    ) -> None:
        if encoding not in SCHEMA_TYPES:
            raise ValueError(f"encoding {encoding} is not read through a schema registry")
        self.encoding = encoding
        self._client = client or SchemaRegistryClient(registry.client_config())
        conf = {"subject.name.strategy": _writer_only}
        self._deserialize: Callable[[bytes, None], Any] = (
            AvroDeserializer(self._client, conf=conf)
            if encoding == "avro"
            else JSONDeserializer(None, schema_registry_client=self._client, conf=conf)
        )
        self._unknown: TTLCache[int, bool] = TTLCache(UNKNOWN_KEPT, UNKNOWN_SECONDS)

    def close(self) -> None:
        self._client.close()

    def __call__(self, value: bytes) -> object:
        if len(value) < HEADER_BYTES:
            return Refused("not_wire_format", "the record is shorter than the 5-byte header")
        if value[0] != 0:
            return Refused("not_wire_format", "the record's magic byte is not 0")
        (schema_id,) = struct.unpack(">I", value[1:HEADER_BYTES])
        refused = self._schema(schema_id)
        if refused is not None:
            return refused
        try:
            decoded = self._deserialize(value, None)
        except SchemaRegistryError as err:  # a schema the writer's one references
            _hold_unless_missing(err)
            return Refused(
                "unknown_schema", f"schema {schema_id} references one the registry does not have"
            )
        except SerializationError:
            if self.encoding == "json_schema":
                return Refused("invalid_record", f"the record breaks JSON Schema {schema_id}")
            return Refused(
                "undecodable_record", f"the body does not decode with schema {schema_id}"
            )
        except Exception as err:
            if _transport(err):
                raise RegistryDown("registry_unreachable") from err
            return Refused(
                "undecodable_record", f"the body does not decode with schema {schema_id}"
            )
        return _json_form(decoded, schema_id)

    def _schema(self, schema_id: int) -> Refused | None:
        """None once the registry gave schema ``schema_id`` of the binding's kind (kept by
        the client); else why the record is refused."""
        if schema_id in self._unknown:
            return _unknown(schema_id)
        try:
            schema: Schema = self._client.get_schema(schema_id)
        except SchemaRegistryError as err:
            _hold_unless_missing(err)
            self._unknown[schema_id] = True
            return _unknown(schema_id)
        except Exception as err:  # no answer at all: refused, reset, timed out, TLS
            raise RegistryDown("registry_unreachable") from err
        kind = schema.schema_type or "AVRO"
        if kind != SCHEMA_TYPES[self.encoding]:
            return Refused(
                "unknown_schema",
                f"schema {schema_id} is {KINDS.get(kind, kind)}; the binding reads "
                f"{KINDS[SCHEMA_TYPES[self.encoding]]}",
            )
        return None


def _hold_unless_missing(err: SchemaRegistryError) -> None:
    """Returns on a 404 (the schema does not exist: the record is refused); raises
    :class:`RegistryDown` on any other answer (the record waits)."""
    status = err.http_status_code
    if status == 404:
        return
    if status >= 500 or status in RETRIED_STATUS:
        raise RegistryDown("registry_unreachable") from err
    raise RegistryDown(f"registry_error: HTTP {status}") from err


def _unknown(schema_id: int) -> Refused:
    return Refused("unknown_schema", f"the registry has no schema {schema_id}")


def _transport(err: Exception) -> bool:
    """Whether ``err`` is the HTTP client's failure to get any answer (httpx2's or httpx's
    TransportError, whichever confluent-kafka uses)."""
    return any(
        cls.__name__ == "TransportError" and cls.__module__.startswith("httpx")
        for cls in type(err).__mro__
    )


class _NoJsonForm(Exception):
    pass


def _json_form(decoded: object, schema_id: int) -> object:
    """The decoded object with Avro's logical types as the wire format writes them (a
    timestamp or date as ISO-8601 text, a UUID as text), or ``undecodable_record`` for
    a value JSON has no form for (bytes, a decimal)."""

    def convert(item: object) -> object:
        if item is None or isinstance(item, bool | int | float | str):
            return item
        if isinstance(item, dict):
            return {str(key): convert(value) for key, value in item.items()}
        if isinstance(item, list | tuple):
            return [convert(value) for value in item]
        if isinstance(item, datetime.date | datetime.time):
            return item.isoformat()
        if isinstance(item, uuid.UUID):
            return str(item)
        raise _NoJsonForm()

    try:
        return convert(decoded)
    except _NoJsonForm:
        return Refused(
            "undecodable_record",
            f"a value of schema {schema_id} has no JSON form (bytes or a decimal)",
        )
    except RecursionError:
        return Refused("undecodable_record", "the record's value nests too deep")
