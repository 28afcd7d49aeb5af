"""Kafka and MQTT bindings behind the API: bind, list, show, unbind, and their health.

Binding a topic is an administrator's act (CHANGE SYSTEM, audited with the binding's
name, topic and channels, never its credentials): a binding decides which provider a
broker's records act as. Each partition's user must exist and hold WRITE or INJECT SP
on the stream when it is bound (a binding that could land nothing is a mistake to say
at once), and is asked again at every landing, so a revocation or a disabled user holds
the records back from the next batch. No two bindings, Kafka or MQTT, feed one
channel: a channel's seqs are its source's alone.

A binding is kept in ``<root>/connectors/kafka/<name>.json`` or
``<root>/connectors/mqtt/<name>.json`` (mode 0600: it may hold a password) and its source
starts with the server and after each bind. An MQTT source keeps what it needs to know
redeliveries again beside it, in ``<name>.state``; unbinding removes both.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from streamshield.connectors.kafka_binding import KafkaBinding
from streamshield.connectors.kafka_source import KafkaSource
from streamshield.connectors.mqtt_binding import MqttBinding
from streamshield.connectors.mqtt_source import MqttSource
from streamshield.durable import write_atomic
from streamshield.lang.wire import interned_channel
from streamshield.server import error_codes as codes
from streamshield.server import security_port as port
from streamshield.server.errors import Conflict, Forbidden, Invalid, NotFound

if TYPE_CHECKING:
    from streamshield.catalog.security import Session
    from streamshield.server.stream_service import StreamService

RECORD_REASONS = frozenset(
    {
        "malformed_record",
        "record_too_large",
        "seq_given",
        "wrong_channel",
        "unbound_device",
        "unbound_topic",
    }
)
"""Refusals of a record before the landing gate (the gate counts its own)."""


class ConnectorService:
    def __init__(self, security: Any, streams: StreamService, root: Path) -> None:
        self.security, self.streams = security, streams
        self.directory = root / "connectors" / "kafka"
        self.mqtt_directory = root / "connectors" / "mqtt"
        self._sources: dict[str, KafkaSource] = {}
        self._mqtt: dict[str, MqttSource] = {}
        self._lock = threading.Lock()
        self._running = False

    # -- requests ----------------------------------------------------------------------------

    def add(self, session: Session, binding: KafkaBinding) -> dict:
        self._require_admin(session)
        definition = self.streams.pipeline.queries.streams.get(binding.stream)
        if definition is None:
            raise NotFound(f"no input stream {binding.stream}")
        for number, part in sorted(binding.partitions.items()):
            if not port.user_enabled(self.security, part.user):
                raise Invalid(f"partition {number}: no enabled user {part.user}")
            if not (
                port.can_write(self.security, part.user, binding.stream)
                or port.can_inject(self.security, part.user, binding.stream)
            ):
                raise Invalid(
                    f"partition {number}: {part.user} holds neither WRITE nor INJECT SP "
                    f"on stream {binding.stream}"
                )
        with self._lock:
            if binding.name in self._sources or self._path(binding.name).exists():
                raise Conflict(f"a binding named {binding.name} exists", codes.EXISTS)
            self._refuse_shared(binding.stream, binding.channels())
            detail = {
                "binding": binding.name,
                "topic": binding.topic,
                "partitions": {str(n): s.channel_provider for n, s in binding.partitions.items()},
            }
            port.change_connector(
                self.security,
                session,
                True,
                binding.stream,
                detail,
                lambda: self._store(binding),
            )
            source = self._source(binding)
            self._sources[binding.name] = source
            if self._running:
                source.start()
        return self.describe(source)

    def remove(self, session: Session, name: str) -> None:
        self._require_admin(session)
        with self._lock:
            source = self._sources.get(name)
            if source is None:
                raise NotFound(f"no binding {name}")
            stream = source.binding.stream
            port.change_connector(
                self.security,
                session,
                False,
                stream,
                {"binding": name},
                lambda: self._path(name).unlink(missing_ok=True),
            )
            del self._sources[name]
        source.stop()

    def listed(self, session: Session) -> list[dict]:
        self._require_admin(session)
        return [self.describe(s) for _, s in sorted(self._sources.items())]

    def shown(self, session: Session, name: str) -> dict:
        self._require_admin(session)
        source = self._sources.get(name)
        if source is None:
            raise NotFound(f"no binding {name}")
        return self.describe(source)

    @staticmethod
    def describe(source: KafkaSource) -> dict:
        return {
            **source.binding.public(),
            "status": source.status(),
            "partitions_state": source.partitions(),
        }

    def of_stream(self, stream: str, providers: Any = None) -> list[dict]:
        """The Kafka feeds of ``stream``: per binding its topic, status and partitions
        (only those whose provider ``providers(provider)`` accepts, if given)."""
        feeds = []
        for name, source in sorted(self._sources.items()):
            if source.binding.stream != stream:
                continue
            parts = [
                p for p in source.partitions() if providers is None or providers(p["provider"])
            ]
            if parts:
                feeds.append(
                    {
                        "binding": name,
                        "topic": source.binding.topic,
                        "status": source.status(),
                        "partitions": parts,
                    }
                )
        return feeds

    # -- MQTT requests -----------------------------------------------------------------------

    def add_mqtt(self, session: Session, binding: MqttBinding) -> dict:
        """Binds a topic filter (CHANGE SYSTEM): as :meth:`add`, each device's user must
        exist and hold WRITE or INJECT SP on the stream now."""
        self._require_admin(session)
        if binding.stream not in self.streams.pipeline.queries.streams:
            raise NotFound(f"no input stream {binding.stream}")
        for device, who in sorted(binding.providers.items()):
            if not port.user_enabled(self.security, who.user):
                raise Invalid(f"device {device}: no enabled user {who.user}")
            if not (
                port.can_write(self.security, who.user, binding.stream)
                or port.can_inject(self.security, who.user, binding.stream)
            ):
                raise Invalid(
                    f"device {device}: {who.user} holds neither WRITE nor INJECT SP "
                    f"on stream {binding.stream}"
                )
        with self._lock:
            path = self._mqtt_path(binding.name)
            if binding.name in self._mqtt or path.exists():
                raise Conflict(f"an MQTT binding named {binding.name} exists", codes.EXISTS)
            self._refuse_shared(binding.stream, binding.channels())
            detail = {
                "connector": "mqtt",
                "binding": binding.name,
                "topic_filter": binding.topic_filter,
                "devices": {d: s.channel_provider for d, s in binding.providers.items()},
            }

            def store() -> None:
                self.mqtt_directory.mkdir(parents=True, exist_ok=True)
                path.with_suffix(".state").unlink(missing_ok=True)  # an earlier binding's
                write_atomic(path, binding.stored(), mode=0o600)

            port.change_connector(self.security, session, True, binding.stream, detail, store)
            source = self._mqtt_source(binding)
            self._mqtt[binding.name] = source
            if self._running:
                source.start()
        return self.describe_mqtt(source)

    def remove_mqtt(self, session: Session, name: str) -> None:
        """Unbinds: the source unsubscribes (the broker stops queueing for it) and the
        binding and its state are forgotten; what landed stays."""
        self._require_admin(session)
        with self._lock:
            source = self._mqtt.get(name)
            if source is None:
                raise NotFound(f"no MQTT binding {name}")
            path = self._mqtt_path(name)

            def forget() -> None:
                path.unlink(missing_ok=True)
                path.with_suffix(".state").unlink(missing_ok=True)

            detail = {"connector": "mqtt", "binding": name}
            port.change_connector(
                self.security, session, False, source.binding.stream, detail, forget
            )
            del self._mqtt[name]
        source.stop(forget=True)
        path.with_suffix(".state").unlink(missing_ok=True)  # a last turn may have written it

    def listed_mqtt(self, session: Session) -> list[dict]:
        self._require_admin(session)
        return [self.describe_mqtt(s) for _, s in sorted(self._mqtt.items())]

    def shown_mqtt(self, session: Session, name: str) -> dict:
        self._require_admin(session)
        source = self._mqtt.get(name)
        if source is None:
            raise NotFound(f"no MQTT binding {name}")
        return self.describe_mqtt(source)

    @staticmethod
    def describe_mqtt(source: MqttSource) -> dict:
        return {
            **source.binding.public(),
            "status": source.status(),
            "unbound": source.unbound,
            "retained": source.retained,
            "devices_state": source.devices(),
        }

    def mqtt_of_stream(self, stream: str, providers: Any = None) -> list[dict]:
        """The MQTT feeds of ``stream``: per binding its filter, status and devices (only
        those whose provider ``providers(provider)`` accepts, if given)."""
        feeds = []
        for name, source in sorted(self._mqtt.items()):
            if source.binding.stream != stream:
                continue
            devices = [d for d in source.devices() if providers is None or providers(d["provider"])]
            if devices:
                feeds.append(
                    {
                        "binding": name,
                        "topic_filter": source.binding.topic_filter,
                        "status": source.status(),
                        "devices": devices,
                    }
                )
        return feeds

    # -- the server's view -------------------------------------------------------------------

    def health(self) -> dict[str, int]:
        """How many bindings land (``kafka.ok``, ``mqtt.ok``) and how many do not, by why
        (``kafka.broker_unreachable``, ...): ``/readyz`` answers without a token, so it
        names no binding; ``GET /connectors/kafka`` and ``/connectors/mqtt`` do, for
        administrators."""
        counts: dict[str, int] = {}
        states = [("kafka", s.status()) for s in list(self._sources.values())]
        states += [("mqtt", s.status()) for s in list(self._mqtt.values())]
        for kind, state in states:
            key = f"{kind}.{state}"
            counts[key] = counts.get(key, 0) + 1
        return dict(sorted(counts.items()))

    def lags(self) -> dict[tuple[str, int], int]:
        return {
            (name, number): lag
            for name, source in list(self._sources.items())
            for number, lag in source.lags().items()
        }

    def start_all(self) -> None:
        """Loads every kept binding and starts its source (the server's start)."""
        with self._lock:
            self._running = True
            if self.directory.is_dir():
                for path in sorted(self.directory.glob("*.json")):
                    if path.stem in self._sources:
                        continue
                    try:
                        binding = KafkaBinding.model_validate_json(path.read_text("utf-8"))
                    except (OSError, ValidationError) as err:
                        port.audit_log.error("kafka binding %s not loaded: %s", path.stem, err)
                        continue
                    self._sources[binding.name] = self._source(binding)
            if self.mqtt_directory.is_dir():
                for path in sorted(self.mqtt_directory.glob("*.json")):
                    if path.stem in self._mqtt:
                        continue
                    try:
                        mqtt = MqttBinding.model_validate_json(path.read_text("utf-8"))
                    except (OSError, ValidationError) as err:
                        port.audit_log.error("mqtt binding %s not loaded: %s", path.stem, err)
                        continue
                    self._mqtt[mqtt.name] = self._mqtt_source(mqtt)
            every: list[KafkaSource | MqttSource] = [*self._sources.values(), *self._mqtt.values()]
            for source in every:
                if not source.running:
                    source.start()

    def stop_all(self) -> None:
        with self._lock:
            self._running = False
            sources: list[KafkaSource | MqttSource] = [
                *self._sources.values(),
                *self._mqtt.values(),
            ]
        for source in sources:
            source.stop()

    # -- parts -------------------------------------------------------------------------------

    def _require_admin(self, session: Session) -> None:
        if not port.check(self.security, session, "CHANGE SYSTEM", "system", "system"):
            raise Forbidden("permission denied: CHANGE SYSTEM on system is needed")

    def _refuse_shared(self, stream: str, channels: set[str]) -> None:
        """Conflict if another binding feeds one of ``channels`` of ``stream`` (call
        holding the lock)."""
        feeding = [
            (s.binding.name, s.binding.stream, s.binding.channels()) for s in self._sources.values()
        ]
        feeding += [
            (s.binding.name, s.binding.stream, s.binding.channels()) for s in self._mqtt.values()
        ]
        for name, other, theirs in feeding:
            shared = theirs & channels
            if other == stream and shared:
                raise Conflict(
                    f"binding {name} already feeds the channels of "
                    f"{', '.join(sorted(shared))} on {stream}",
                    codes.EXISTS,
                )

    def _path(self, name: str) -> Path:
        return self.directory / f"{name}.json"

    def _store(self, binding: KafkaBinding) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        write_atomic(self._path(binding.name), binding.stored(), mode=0o600)

    def _source(self, binding: KafkaBinding) -> KafkaSource:
        stream = binding.stream
        landing = self.streams.pipeline.landing

        def land(user: str, lines: list[str], seqs: list[int]) -> Any:
            return self.streams.land_for(user, stream, lines, seqs)

        def last_seq(provider: str) -> int:
            return landing.last_seq(interned_channel(stream, provider))

        def refused(user: str, reason: str, count: int) -> None:
            if reason in RECORD_REASONS:
                self.streams.metrics.appended(stream, 0, count)
            port.record_rejected(self.security, user, stream, reason, count)

        return KafkaSource(binding, land, last_seq, refused)

    def _mqtt_path(self, name: str) -> Path:
        return self.mqtt_directory / f"{name}.json"

    def _mqtt_source(self, binding: MqttBinding) -> MqttSource:
        stream = binding.stream
        landing = self.streams.pipeline.landing

        def land(user: str, lines: list[str], seqs: None) -> Any:
            return self.streams.land_for(user, stream, lines, seqs)

        def last_seq(provider: str) -> int:
            return landing.last_seq(interned_channel(stream, provider))

        def refused(user: str | None, reason: str, count: int) -> None:
            if reason in RECORD_REASONS:
                self.streams.metrics.appended(stream, 0, count)
            if user is not None:  # an unbound device acts as nobody: counted, not audited
                port.record_rejected(self.security, user, stream, reason, count)

        path = self._mqtt_path(binding.name).with_suffix(".state")
        return MqttSource(binding, land, last_seq, refused, path)
