"""Kafka and MQTT bindings behind the API: bind, list, show, unbind, and their health.

Binding a topic is an administrator's act (CHANGE SYSTEM, audited with the binding's
name, topic and channels, never its credentials): a binding decides which provider a
broker's records act as. Each partition's user must exist and hold WRITE or INJECT SP
on the stream when it is bound (a binding that could land nothing is a mistake to say
at once), and is asked again at every landing, so a revocation or a disabled user holds
the records back from the next batch. No two bindings, Kafka or MQTT, feed one
channel: a channel's seqs are its source's alone.

A binding is kept in ``<root>/connectors/kafka/<name>.json`` or
``<root>/connectors/mqtt/<name>.json`` (mode 0600: it may hold a broker's or a schema
registry's password) and its source
starts with the server and after each bind. An MQTT source keeps what it needs to know
redeliveries again beside it, in ``<name>.state``; unbinding removes both.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from pydantic import ValidationError

from streamshield.connectors.kafka_binding import KafkaBinding
from streamshield.connectors.kafka_source import KafkaSource
from streamshield.connectors.mqtt_binding import MqttBinding
from streamshield.connectors.mqtt_source import MqttSource
from streamshield.connectors.record_lines import Reason
from streamshield.connectors.source_binding import SourceBinding
from streamshield.connectors.source_thread import SourceThread
from streamshield.durable import write_atomic
from streamshield.lang.wire import interned_channel
from streamshield.server import error_codes as codes
from streamshield.server import security_port as port
from streamshield.server.errors import Conflict, Forbidden, Invalid, NotFound

if TYPE_CHECKING:
    from streamshield.catalog.security import Session
    from streamshield.server.stream_service import StreamService

RECORD_REASONS = frozenset(get_args(Reason))
"""Refusals of a record before the landing gate (the gate counts its own)."""


BINDINGS: dict[str, type[SourceBinding]] = {"kafka": KafkaBinding, "mqtt": MqttBinding}
"""Every kind of source binding, by the name it is routed and kept under."""


class ConnectorService:
    def __init__(self, security: Any, streams: StreamService, root: Path) -> None:
        self.security, self.streams = security, streams
        self.root = root / "connectors"
        self._sources: dict[str, dict[str, SourceThread]] = {kind: {} for kind in BINDINGS}
        self._lock = threading.Lock()
        self._running = False

    # -- requests ----------------------------------------------------------------------------

    def add(self, session: Session, binding: SourceBinding) -> dict:
        """Binds (CHANGE SYSTEM) and starts the source; each channel's user must exist and
        hold WRITE or INJECT SP on the stream now."""
        self._require_admin(session)
        if binding.stream not in self.streams.pipeline.queries.streams:
            raise NotFound(f"no input stream {binding.stream}")
        for name, who in sorted(binding.sources().items()):
            where = f"{binding.CHANNEL} {name}"
            if not port.user_enabled(self.security, who.user):
                raise Invalid(f"{where}: no enabled user {who.user}")
            if not (
                port.can_write(self.security, who.user, binding.stream)
                or port.can_inject(self.security, who.user, binding.stream)
            ):
                raise Invalid(
                    f"{where}: {who.user} holds neither WRITE nor INJECT SP "
                    f"on stream {binding.stream}"
                )
        sources = self._sources[binding.KIND]
        path = self._path(binding.KIND, binding.name)
        with self._lock:
            if binding.name in sources or path.exists():
                raise Conflict(
                    f"a {binding.KIND} binding named {binding.name} exists", codes.EXISTS
                )
            self._refuse_shared(binding.stream, binding.channels())

            def store() -> None:
                path.parent.mkdir(parents=True, exist_ok=True)
                _state(path).unlink(missing_ok=True)  # an earlier binding's
                write_atomic(path, binding.stored(), mode=0o600)

            audited = binding.audited()
            port.change_connector(self.security, session, True, binding.stream, audited, store)
            source = self._source(binding)
            sources[binding.name] = source
            if self._running:
                source.start()
        return source.view()

    def remove(self, session: Session, kind: str, name: str) -> None:
        """Unbinds: the source stops (an MQTT one unsubscribes, so the broker stops
        queueing for it) and the binding and its state are forgotten; what landed stays."""
        self._require_admin(session)
        path = self._path(kind, name)
        with self._lock:
            source = self._sources[kind].get(name)
            if source is None:
                raise NotFound(f"no {kind} binding {name}")

            def forget() -> None:
                path.unlink(missing_ok=True)
                _state(path).unlink(missing_ok=True)

            detail = {"connector": kind, "binding": name}
            port.change_connector(
                self.security, session, False, source.binding.stream, detail, forget
            )
            del self._sources[kind][name]
        source.stop(forget=True)
        _state(path).unlink(missing_ok=True)  # a last turn may have written it

    def listed(self, session: Session, kind: str) -> list[dict]:
        self._require_admin(session)
        return [s.view() for _, s in sorted(self._sources[kind].items())]

    def shown(self, session: Session, kind: str, name: str) -> dict:
        self._require_admin(session)
        source = self._sources[kind].get(name)
        if source is None:
            raise NotFound(f"no {kind} binding {name}")
        return source.view()

    def feeds(
        self, stream: str, kind: str, providers: Callable[[str], bool] | None = None
    ) -> list[dict]:
        """The ``kind`` feeds of ``stream``: per binding what it reads, its status and
        channels (only those whose provider ``providers(provider)`` accepts, if given)."""
        feeds = []
        for _, source in sorted(self._sources[kind].items()):
            feed = source.feed(providers) if source.binding.stream == stream else None
            if feed is not None:
                feeds.append(feed)
        return feeds

    def channels_of(self, stream: str) -> frozenset[str]:
        """The providers of ``stream`` whose channels a binding of any kind feeds."""
        return frozenset(
            provider
            for sources in self._sources.values()
            for source in list(sources.values())
            if source.binding.stream == stream
            for provider in source.binding.channels()
        )

    # -- the server's view -------------------------------------------------------------------

    def health(self) -> dict[str, int]:
        """How many bindings land (``kafka.ok``, ``mqtt.ok``) and how many do not, by why
        (``kafka.broker_unreachable``, ...): ``/readyz`` answers without a token, so it
        names no binding; ``GET /connectors/kafka`` and ``/connectors/mqtt`` do, for
        administrators."""
        counts: dict[str, int] = {}
        for kind, sources in self._sources.items():
            for source in list(sources.values()):
                key = f"{kind}.{source.status()}"
                counts[key] = counts.get(key, 0) + 1
        return dict(sorted(counts.items()))

    def lags(self) -> dict[tuple[str, int], int]:
        """Records on the brokers not landed yet, per Kafka binding and partition."""
        return {
            (name, number): lag
            for name, source in list(self._sources["kafka"].items())
            if isinstance(source, KafkaSource)
            for number, lag in source.lags().items()
        }

    def start_all(self) -> None:
        """Loads every kept binding and starts its source (the server's start)."""
        with self._lock:
            self._running = True
            for kind, model in BINDINGS.items():
                directory = self.root / kind
                if not directory.is_dir():
                    continue
                for path in sorted(directory.glob("*.json")):
                    if path.stem in self._sources[kind]:
                        continue
                    try:
                        binding = model.model_validate_json(path.read_text("utf-8"))
                    except (OSError, ValidationError) as err:
                        port.audit_log.error("%s binding %s not loaded: %s", kind, path.stem, err)
                        continue
                    self._sources[kind][binding.name] = self._source(binding)
            for source in self._every():
                if not source.running:
                    source.start()

    def stop_all(self) -> None:
        with self._lock:
            self._running = False
            sources = self._every()
        for source in sources:
            source.stop()

    # -- parts -------------------------------------------------------------------------------

    def _every(self) -> list[SourceThread]:
        return [source for sources in self._sources.values() for source in sources.values()]

    def _require_admin(self, session: Session) -> None:
        if not port.check(self.security, session, "CHANGE SYSTEM", "system", "system"):
            raise Forbidden("permission denied: CHANGE SYSTEM on system is needed")

    def _refuse_shared(self, stream: str, channels: set[str]) -> None:
        """Conflict if another binding feeds one of ``channels`` of ``stream`` (call
        holding the lock)."""
        for source in self._every():
            shared = source.binding.channels() & channels
            if source.binding.stream == stream and shared:
                raise Conflict(
                    f"binding {source.name} already feeds the channels of "
                    f"{', '.join(sorted(shared))} on {stream}",
                    codes.EXISTS,
                )

    def _path(self, kind: str, name: str) -> Path:
        return self.root / kind / f"{name}.json"

    def _source(self, binding: SourceBinding) -> SourceThread:
        stream = binding.stream
        landing = self.streams.pipeline.landing

        def land(user: str, lines: list[str], seqs: list[int] | None) -> Any:
            return self.streams.land_for(user, stream, lines, seqs)

        def last_seq(provider: str) -> int:
            return landing.last_seq(interned_channel(stream, provider))

        def refused(user: str | None, reason: str, count: int) -> None:
            if reason in RECORD_REASONS:
                self.streams.metrics.appended(stream, 0, count)
            if user is not None:  # an unbound device acts as nobody: counted, not audited
                port.record_rejected(self.security, user, stream, reason, count)

        if isinstance(binding, KafkaBinding):
            return KafkaSource(binding, land, last_seq, refused)
        assert isinstance(binding, MqttBinding)
        state = _state(self._path(binding.KIND, binding.name))
        return MqttSource(binding, land, last_seq, refused, state)


def _state(path: Path) -> Path:
    """Where a source keeps what it needs across restarts beside its binding (MQTT's
    redelivery keys)."""
    return path.with_suffix(".state")
