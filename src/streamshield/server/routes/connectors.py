"""``/connectors/kafka`` and ``/connectors/mqtt``: brokers bound to streams (administrators).

A binding names the broker, the topic, the record format, how values are encoded (JSON,
or Avro / JSON Schema through a schema registry) and, per partition, the user and
provider its records act as (docs/connectors.md). What it shows back never holds the
broker's or the registry's password; its ``status`` is ``ok`` or why records do not land
now (``broker_unreachable``, ``registry_unreachable``, ``held_back: <code>``), and per
partition the next offset, the lag and the counts landed and refused since the server
started. An MQTT binding
names the broker, the topic filter, which topic level names the device and, per device,
the user and provider its messages act as; per device it shows the messages waiting to
land, the counts landed, refused and dropped as redeliveries, and why it is held back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from fastapi import APIRouter
from pydantic import BaseModel

from streamshield.connectors.kafka_binding import KafkaBinding
from streamshield.connectors.mqtt_binding import MqttBinding
from streamshield.connectors.source_binding import SourceBinding
from streamshield.server.auth import Auth
from streamshield.server.models import Removed
from streamshield.server.openapi import AUTHED, errors

if TYPE_CHECKING:
    from streamshield.catalog.security import Session


class PartitionState(BaseModel):
    partition: int
    provider: str
    next_offset: int | None
    lag: int | None
    landed: int
    refused: int
    held: str | None


class BindingView(BaseModel):
    name: str
    stream: str
    bootstrap_servers: str
    topic: str
    group_id: str
    partitions: dict[int, dict[str, Any]]
    format: str
    fields: dict[str, str]
    security: dict[str, Any]
    max_records: int
    encoding: str
    schema_registry: dict[str, Any] | None
    status: str
    partitions_state: list[PartitionState]


class BindingList(BaseModel):
    bindings: list[BindingView]


class DeviceState(BaseModel):
    device: str
    provider: str
    waiting: int
    landed: int
    refused: int
    duplicates: int
    held: str | None


class MqttBindingView(BaseModel):
    name: str
    stream: str
    host: str
    port: int
    topic_filter: str
    provider_level: int
    providers: dict[str, dict[str, Any]]
    client_id: str
    format: str
    fields: dict[str, str]
    username: str | None
    ca_file: str | None
    status: str
    unbound: int
    retained: int
    devices_state: list[DeviceState]


class MqttBindingList(BaseModel):
    bindings: list[MqttBindingView]


class Bindings(Protocol):
    """What the routes ask of :class:`~streamshield.server.connector_service.ConnectorService`."""

    def add(self, session: Session, binding: SourceBinding) -> dict: ...
    def remove(self, session: Session, kind: str, name: str) -> None: ...
    def listed(self, session: Session, kind: str) -> list[dict]: ...
    def shown(self, session: Session, kind: str, name: str) -> dict: ...


def router(connectors: Bindings) -> APIRouter:
    api = APIRouter(tags=["connectors"])

    @api.post(
        "/connectors/kafka",
        status_code=201,
        response_model=BindingView,
        responses=errors(*AUTHED, 403, 404, 409, 422),
    )
    def bind(binding: KafkaBinding, who: Auth) -> dict:
        """Binds a topic to an input stream and starts consuming it (CHANGE SYSTEM)."""
        return connectors.add(who.session, binding)

    @api.get("/connectors/kafka", response_model=BindingList, responses=errors(*AUTHED, 403, 422))
    def bindings(who: Auth) -> dict:
        return {"bindings": connectors.listed(who.session, "kafka")}

    @api.get(
        "/connectors/kafka/{name}",
        response_model=BindingView,
        responses=errors(*AUTHED, 403, 404, 422),
    )
    def binding(name: str, who: Auth) -> dict:
        return connectors.shown(who.session, "kafka", name)

    @api.delete(
        "/connectors/kafka/{name}",
        response_model=Removed,
        responses=errors(*AUTHED, 403, 404, 422),
    )
    def unbind(name: str, who: Auth) -> dict:
        """Stops consuming and forgets the binding; what landed stays."""
        connectors.remove(who.session, "kafka", name)
        return {"removed": name}

    @api.post(
        "/connectors/mqtt",
        status_code=201,
        response_model=MqttBindingView,
        responses=errors(*AUTHED, 403, 404, 409, 422),
    )
    def bind_mqtt(binding: MqttBinding, who: Auth) -> dict:
        """Binds a topic filter to an input stream and subscribes to it (CHANGE SYSTEM)."""
        return connectors.add(who.session, binding)

    @api.get(
        "/connectors/mqtt", response_model=MqttBindingList, responses=errors(*AUTHED, 403, 422)
    )
    def mqtt_bindings(who: Auth) -> dict:
        return {"bindings": connectors.listed(who.session, "mqtt")}

    @api.get(
        "/connectors/mqtt/{name}",
        response_model=MqttBindingView,
        responses=errors(*AUTHED, 403, 404, 422),
    )
    def mqtt_binding(name: str, who: Auth) -> dict:
        return connectors.shown(who.session, "mqtt", name)

    @api.delete(
        "/connectors/mqtt/{name}",
        response_model=Removed,
        responses=errors(*AUTHED, 403, 404, 422),
    )
    def unbind_mqtt(name: str, who: Auth) -> dict:
        """Unsubscribes and forgets the binding; what landed stays."""
        connectors.remove(who.session, "mqtt", name)
        return {"removed": name}

    return api
