"""Kafka bindings behind the API: bind, list, show, unbind, and their sources' health.

Binding a topic is an administrator's act (CHANGE SYSTEM, audited with the binding's
name, topic and channels, never its credentials): a binding decides which provider a
broker's records act as. Each partition's user must exist and hold WRITE or INJECT SP
on the stream when it is bound (a binding that could land nothing is a mistake to say
at once), and is asked again at every landing, so a revocation or a disabled user holds
the records back from the next batch. No two bindings feed one channel.

A binding is kept in ``<root>/connectors/kafka/<name>.json`` (mode 0600: it may hold a
SASL password) and its source starts with the server and after each bind.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from streamshield.connectors.kafka_binding import KafkaBinding
from streamshield.connectors.kafka_source import KafkaSource
from streamshield.durable import write_atomic
from streamshield.lang.wire import interned_channel
from streamshield.server import error_codes as codes
from streamshield.server import security_port as port
from streamshield.server.errors import Conflict, Forbidden, Invalid, NotFound

if TYPE_CHECKING:
    from streamshield.catalog.security import Session
    from streamshield.server.stream_service import StreamService

RECORD_REASONS = frozenset({"malformed_record", "record_too_large", "seq_given", "wrong_channel"})
"""Refusals of a record before the landing gate (the gate counts its own)."""


class ConnectorService:
    def __init__(self, security: Any, streams: StreamService, root: Path) -> None:
        self.security, self.streams = security, streams
        self.directory = root / "connectors" / "kafka"
        self._sources: dict[str, KafkaSource] = {}
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
            for other in self._sources.values():
                shared = other.binding.providers() & binding.providers()
                if other.binding.stream == binding.stream and shared:
                    raise Conflict(
                        f"binding {other.binding.name} already feeds the channels of "
                        f"{', '.join(sorted(shared))} on {binding.stream}",
                        codes.EXISTS,
                    )
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

    # -- the server's view -------------------------------------------------------------------

    def health(self) -> dict[str, int]:
        """How many bindings land (``kafka.ok``) and how many do not, by why
        (``kafka.broker_unreachable``, ...): ``/readyz`` answers without a token, so it
        names no binding; ``GET /connectors/kafka`` does, for administrators."""
        counts: dict[str, int] = {}
        for source in list(self._sources.values()):
            key = f"kafka.{source.status()}"
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
            for source in self._sources.values():
                if not source.running:
                    source.start()

    def stop_all(self) -> None:
        with self._lock:
            self._running = False
            sources = list(self._sources.values())
        for source in sources:
            source.stop()

    # -- parts -------------------------------------------------------------------------------

    def _require_admin(self, session: Session) -> None:
        if not port.check(self.security, session, "CHANGE SYSTEM", "system", "system"):
            raise Forbidden("permission denied: CHANGE SYSTEM on system is needed")

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
