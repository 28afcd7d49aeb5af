"""``GET /streams/{name}/ingest``: the policy in force per channel and the ingest counts.

A policy says who may read a provider's data; knowing it tells a reader which roles to
ask for and a provider what she declared. It is not for everyone who may see the stream
in the catalog, so the route denies by default and answers in three depths:

* ``all`` -- administrators (CHANGE SYSTEM) and whoever holds CHANGE PERM on the stream
  (its owner does): every channel, named by provider, with the sps of its policy and the
  roles it admits and denies;
* ``own`` -- a provider (WRITE or INJECT SP on the stream): her own channels in full
  (those whose provider is her name or ``<name>.*``), other channels as a reader sees
  them if she also reads the stream, else not at all;
* ``reader`` -- READ TUPLE, READ AGGREGATE or SUBSCRIBE on the stream: each channel's
  policy id and which of *her active roles* it admits, no provider names, no sps (she
  learns whether she may read, not who else may), and only for channels whose level her
  session's level dominates (a channel above it is not listed at all);
* anyone else who may see the stream: 403; a stream she may not see: 404, as everywhere.

The counts (elements accepted and rejected at the API, tuples accepted and denied by
secure ingest, accepted rows/s over the last minute) are those of ``/metrics``, since
the server started, for everyone the route answers.
"""

# No ``from __future__ import annotations``: FastAPI must see the real ``Auth`` type.
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

from fastapi import APIRouter
from pydantic import BaseModel, Field

from streamshield.policy.policy import PolicyError
from streamshield.policy.policy_view import PolicyView, SpView, admitted_among, policy_view
from streamshield.server import security_port as port
from streamshield.server.auth import Auth
from streamshield.server.element_gate import owns_provider
from streamshield.server.errors import Forbidden, unseen
from streamshield.server.openapi import AUTHED, errors
from streamshield.server.routes.operations import iso

if TYPE_CHECKING:
    from streamshield.catalog.security import Session
    from streamshield.engine.pipeline import Pipeline
    from streamshield.engine.queries.cql_service import CqlService
    from streamshield.server.connector_service import ConnectorService
    from streamshield.server.metrics import ServerMetrics

READER_PERMISSIONS = ("READ TUPLE", "READ AGGREGATE", "SUBSCRIBE")
Scope = Literal["all", "own", "reader"]


class ChannelPolicy(BaseModel):
    provider: str | None = Field(description="The channel's provider (null for readers)")
    policy_id: str
    admits: list[str] = Field(
        description="Roles the policy grants READ or STATISTICS on something (closed up "
        "the hierarchy); for readers only those of their own active roles"
    )
    full: bool = Field(description="Whether denies and sps are shown (entitled callers)")
    ts: int | None = None
    denies: list[str] | None = None
    unknown_roles: bool | None = None
    sps: list[SpView] | None = None


class IngestCounts(BaseModel):
    elements_accepted: int
    elements_rejected: int
    tuples_accepted: int
    tuples_denied: int
    rows_per_second: float


class KafkaPartition(BaseModel):
    partition: int
    provider: str
    next_offset: int | None
    lag: int | None = Field(description="Records on the broker not yet landed or refused")
    landed: int
    refused: int
    held: str | None = Field(description="Why the partition waits (a refused landing)")


class KafkaFeed(BaseModel):
    binding: str
    topic: str
    status: str
    partitions: list[KafkaPartition]


class MqttDevice(BaseModel):
    device: str
    provider: str
    waiting: int = Field(description="Messages received, not yet landed (nor acked)")
    landed: int
    refused: int
    duplicates: int = Field(description="Redeliveries of landed messages, dropped")
    held: str | None = Field(description="Why the device waits (a refused landing)")


class MqttFeed(BaseModel):
    binding: str
    topic_filter: str
    status: str
    devices: list[MqttDevice]


class StreamIngest(BaseModel):
    stream: str
    kind: Literal["input", "output"]
    scope: Scope
    channels: list[ChannelPolicy]
    counts: IngestCounts
    kafka: list[KafkaFeed] = Field(
        default=[],
        description="The Kafka topics feeding the stream: every partition for 'all', "
        "one's own channels' for 'own', none for readers",
    )
    mqtt: list[MqttFeed] = Field(
        default=[],
        description="The MQTT topic filters feeding the stream: every device for 'all', "
        "one's own channels' for 'own', none for readers",
    )
    at: str


class IngestHost(Protocol):
    """What the ingest routes read of the server: its catalog, the engine's streams and
    shield state, and the ingest counts (:class:`~streamshield.server.service.ServerService`)."""

    security: Any
    pipeline: "Pipeline"
    cql: "CqlService"
    metrics: "ServerMetrics"
    connectors: "ConnectorService"


def router(service: IngestHost) -> APIRouter:
    api = APIRouter(tags=["catalog"])

    def holds(session: "Session", permission: str, kind: str, name: str) -> bool:
        return port.check(service.security, session, permission, kind, name)

    def scope_of(session: "Session", name: str) -> tuple[Scope, bool]:
        """The caller's depth, and whether she also reads (others' channels shown)."""
        if not holds(session, "VIEW OBJECT", "stream", name):
            raise unseen("stream")
        reads = any(holds(session, p, "stream", name) for p in READER_PERMISSIONS)
        if holds(session, "CHANGE SYSTEM", "system", "system") or holds(
            session, "CHANGE PERM", "stream", name
        ):
            return "all", True
        provides = port.can_write(service.security, session, name) or port.can_inject(
            service.security, session, name
        )
        if provides:
            return "own", reads
        if reads:
            return "reader", True
        raise Forbidden(
            "the policies of a stream are shown to its owner, administrators, its "
            "providers and those holding READ TUPLE, READ AGGREGATE or SUBSCRIBE on it"
        )

    def level_test(session: "Session") -> Callable[[str, str], bool]:
        """Whether the caller's session level dominates a channel's: a reader learns
        nothing, not even a policy id, of a channel above her level (always true while
        levels are off)."""
        level = service.security.session_level(session)
        assignment = service.security.level_assignment()
        if level is None or assignment is None:
            return lambda _stream, _provider: True
        lattice = assignment.lattice
        return lambda stream, provider: lattice.dominated(
            assignment.tuple_level(stream, provider), level
        )

    @api.get(
        "/streams/{name}/ingest",
        response_model=StreamIngest,
        responses=errors(*AUTHED, 403, 404, 422),
    )
    def stream_ingest(name: str, who: Auth) -> StreamIngest:
        """The policy in force on each channel after the newest ingest batch, and the
        stream's ingest counts, as deep as the caller is entitled (see the module)."""
        session = who.session
        scope, reads = scope_of(session, name)
        dominates = level_test(session)
        user, roles = port.user_of(session), port.roles_of(session)
        kind: Literal["input", "output"] = "output"
        channels: list[ChannelPolicy] = []
        if name in service.pipeline.queries.streams:
            kind = "input"
            hierarchy = service.pipeline.queries.hierarchy
            held = service.cql.shield_state.channel_policies()
            try:
                server, unusable = service.pipeline.ingest.ingest.server_policy(name), False
            except PolicyError:  # policies of both modes apply: nobody reads its tuples
                server, unusable = None, True
            for channel, policy in sorted(held.items(), key=lambda kv: kv[0].provider):
                if channel.stream != name:
                    continue
                view = policy_view(policy, hierarchy, server)
                if unusable:
                    view = replace(view, admits=())
                if scope == "all" or owns_provider(user, channel.provider):
                    channels.append(_full(channel.provider, view))
                elif reads and dominates(channel.stream, channel.provider):
                    admits = list(admitted_among(view, roles))
                    channels.append(
                        ChannelPolicy(
                            provider=None, policy_id=view.policy_id, admits=admits, full=False
                        )
                    )
        counts = IngestCounts(**service.metrics.stream_counts(name))
        kafka: list[dict] = []
        mqtt: list[dict] = []
        if scope in ("all", "own"):
            mine = None if scope == "all" else (lambda p: owns_provider(user, p))
            kafka = service.connectors.feeds(name, "kafka", mine)
            mqtt = service.connectors.feeds(name, "mqtt", mine)
        return StreamIngest(
            stream=name,
            kind=kind,
            scope=scope,
            channels=channels,
            counts=counts,
            kafka=[KafkaFeed.model_validate(feed) for feed in kafka],
            mqtt=[MqttFeed.model_validate(feed) for feed in mqtt],
            at=iso(time.time()) or "",
        )

    return api


def _full(provider: str, view: PolicyView) -> ChannelPolicy:
    return ChannelPolicy(
        provider=provider,
        policy_id=view.policy_id,
        admits=list(view.admits),
        full=True,
        ts=view.ts,
        denies=list(view.denies),
        unknown_roles=view.unknown_roles,
        sps=list(view.sps),
    )
